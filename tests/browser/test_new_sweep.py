"""The New sweep page in a real browser: typed lists checked beside their fields, a μ sweep that mixes
logistic-regression and MLP algorithms, any spec field as an axis, the preview's run count, tasks
and estimate, a name, and "Clone sweep" from Compare."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

SMALL = {"rounds": "2", "dataset.silos": "4", "eval_every": "1"}


def sweeps_total(server: str) -> int:
    return httpx.get(f"{server}/api/sweeps", params={"archived": "all"}).json()["total"]


def field(page: Page, name: str):
    return page.locator(f".field[data-field='{name}']")


def open_sweep_form(page: Page) -> None:
    page.goto("/#/new?mode=sweep")
    expect(page.locator("h1")).to_have_text("New sweep")
    for name, value in SMALL.items():
        page.fill(f"[name='{name}']", value)


def test_bad_list_entries_are_refused_beside_their_fields_and_nothing_is_created(page: Page, server):
    open_sweep_form(page)
    before = sweeps_total(server)
    page.fill("[name='sweep.privacy.epsilon']", "0.5, abc")
    page.fill("[name='sweep.seed']", "a, 1.5")
    page.click("button.add-axis")
    page.locator(".axis [name='axis.field']").select_option("params.lr")
    page.locator(".axis [name='axis.values']").fill("0.1, x")
    page.click("button[type=submit]")
    expect(field(page, "grid.privacy.epsilon").locator(".error")).to_have_text('"abc" is not a number.')
    expect(field(page, "grid.seed").locator(".error")).to_have_text('"a" is not a whole number.')
    expect(field(page, "grid.params.lr").locator(".error")).to_have_text('"x" is not a number.')
    expect(page.locator(".submit-error")).to_contain_text(
        'Could not start sweep: ε values: "abc" is not a number.'
    )
    assert "the slider" not in page.locator(".submit-error").inner_text()
    # the single ε box is not the sweep's: its list is
    expect(field(page, "privacy.epsilon")).to_be_hidden()
    page.fill("[name='sweep.seed']", "0, 0")
    page.click("button[type=submit]")
    expect(field(page, "grid.seed").locator(".error")).to_have_text("0 is given twice; give each value once.")
    assert sweeps_total(server) == before


def test_an_axis_added_empty_is_judged_once_typed_in_or_at_submit(page: Page, server):
    open_sweep_form(page)
    before = sweeps_total(server)
    expect(page.locator(".sweep-count")).to_contain_text(" runs in ")
    page.click("button.add-axis")
    # the preview is computed again with the row left out, and the row says nothing yet
    expect(page.locator(".projection-state")).to_have_text("")
    expect(field(page, "grid.rounds").locator(".error")).to_have_text("")
    page.click("button[type=submit]")
    expect(field(page, "grid.rounds").locator(".error")).to_have_text(
        "give at least one value, separated by commas, e.g. 10, 20, 50."
    )
    assert sweeps_total(server) == before


def test_mu_and_epsilon_sweeps_mixing_logreg_and_mlp_algorithms_with_an_axis_a_name_and_a_clone(
    page: Page, server
):
    open_sweep_form(page)
    page.locator("[name='dataset.name']").select_option("breast_cancer")
    # a μ sweep of the GDP algorithms, from the form's MLP: each runs with the model it takes
    page.check("input[name=target][value=mu]")
    expect(field(page, "grid.privacy.mu")).to_be_visible()
    expect(field(page, "grid.privacy.epsilon")).to_be_hidden()
    page.fill("[name='sweep.privacy.mu']", "0.5, 2")
    page.fill("[name='sweep.seed']", "0")
    for name, on in (("fedavg", False), ("isrl_mbsgd", False), ("gdp_gd", True), ("gdp_localnewton", True)):
        page.set_checked(f"input[name='sweep.algorithms'][value={name}]", on)
    note = page.locator("label.check", has=page.locator("input[value=gdp_gd]")).locator(".algorithm-note")
    expect(note).to_have_text("(runs with logreg: it does not take mlp)")
    expect(page.locator(".sweep-count")).to_contain_text("4 runs in ")
    expect(page.locator(".sweep-algorithms")).to_contain_text("gdp_localnewton (logreg): 2 runs")
    # × params.lr, submitted
    page.click("button.add-axis")
    page.locator(".axis [name='axis.field']").select_option("params.lr")
    page.locator(".axis [name='axis.values']").fill("0.1, 1")
    page.fill("[name='sweep.name']", "μ × lr on breast cancer")
    expect(page.locator(".sweep-count")).to_contain_text("8 runs in ")
    page.click("button[type=submit]")
    page.wait_for_url("**/#/compare*")
    mu = httpx.get(f"{server}/api/sweeps", params={"q": "μ × lr on breast cancer"}).json()["items"][0]
    assert mu["num_runs"] == 8 and mu["grid"] == {
        "algorithm": ["gdp_gd", "gdp_localnewton"],
        "privacy.mu": [0.5, 2],
        "seed": [0],
        "params.lr": [0.1, 1],
    }
    assert mu["base"]["model_by_algorithm"] == {
        "gdp_gd": {"name": "logreg"},
        "gdp_localnewton": {"name": "logreg"},
    }
    page.goto("/#/new?mode=sweep")
    for name, value in SMALL.items():
        page.fill(f"[name='{name}']", value)
    page.locator("[name='dataset.name']").select_option("breast_cancer")
    page.check("input[name=target][value=mu]")
    page.fill("[name='sweep.privacy.mu']", "0.5, 2")
    page.fill("[name='sweep.seed']", "0")
    for name, on in (("fedavg", False), ("gdp_gd", True)):
        page.set_checked(f"input[name='sweep.algorithms'][value={name}]", on)
    # μ is a GDP target: ticking an MLP algorithm is refused beside the μ values, before submit
    page.check("input[name='sweep.algorithms'][value=isrl_mbsgd]")
    expect(field(page, "grid.privacy.mu").locator(".error")).to_contain_text(
        "is a μ-GDP target, offered by algorithms of notion `gdp`; give `epsilon` or `noise_multiplier` "
        "for isrl_mbsgd."
    )
    # an ε sweep mixes them: gdp_gd (logreg) beside isrl_mbsgd (mlp), with rounds as an axis
    page.check("input[name=target][value=epsilon]")
    page.locator("[name='privacy.accountant']").select_option("rdp")
    page.fill("[name='sweep.privacy.epsilon']", "1, 4")
    page.uncheck("input[name='sweep.algorithms'][value=gdp_localnewton]")
    page.click("button.add-axis")
    page.locator(".axis [name='axis.field']").select_option("rounds")
    page.locator(".axis [name='axis.values']").fill("2, 3")
    page.fill("[name='sweep.name']", "ε on breast cancer")
    # 2 algorithms × 2 ε × 2 rounds values × 1 seed
    expect(page.locator(".sweep-count")).to_contain_text("8 runs in ")
    expect(page.locator(".sweep-algorithms")).to_contain_text("gdp_gd (logreg): 4 runs")
    expect(page.locator(".sweep-algorithms")).to_contain_text("isrl_mbsgd (mlp): 4 runs")
    page.click("button[type=submit]")
    page.wait_for_url("**/#/compare*")
    sweep = httpx.get(f"{server}/api/sweeps", params={"q": "ε on breast cancer"}).json()["items"][0]
    assert sweep["name"] == "ε on breast cancer" and sweep["num_runs"] == 8
    assert sweep["grid"] == {
        "algorithm": ["gdp_gd", "isrl_mbsgd"],
        "privacy.epsilon": [1, 4],
        "seed": [0],
        "rounds": [2, 3],
    }
    assert sweep["base"]["model_by_algorithm"] == {"gdp_gd": {"name": "logreg"}}
    assert sweep["base"]["privacy"] == {"delta": 1e-5, "accountant": "rdp", "calibration": "accountant"}

    # Clone sweep: the form comes back filled, and submitted unchanged it is the same sweep
    page.goto(f"/#/compare?sweep={sweep['id']}")
    page.click("text=Clone sweep")
    expect(page.locator("h1")).to_have_text("New sweep (from ε on breast cancer)")
    expect(page.locator("[name='sweep.name']")).to_have_value("copy of ε on breast cancer")
    expect(page.locator("[name='sweep.privacy.epsilon']")).to_have_value("1, 4")
    expect(page.locator(".axis [name='axis.values']")).to_have_value("2, 3")
    expect(page.locator(".sweep-count")).to_contain_text("8 runs in ")
    page.click("button[type=submit]")
    page.wait_for_url("**/#/compare*")
    copy = httpx.get(f"{server}/api/sweeps", params={"q": "copy of ε on breast cancer"}).json()["items"][0]
    assert (copy["grid"], copy["base"]) == (sweep["grid"], sweep["base"])
