"""The run page: a live header that keeps keyboard focus, a ledger that fits the window and whose
accountants come from /api/options; name, tags and notes edited in place; its sweep; archive and
delete; the "no better than guessing" flag."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import serious_violations
from tests.browser.conftest import SMALL_RUN, create_run, shoot, wait_finished

pytestmark = pytest.mark.browser

LONG_RUN = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 2},
    "rounds": 1500,
    "eval_every": 500,
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
}


def test_cancel_with_the_keyboard_while_the_header_updates(page: Page, server):
    run_id = create_run(server, LONG_RUN)
    try:
        page.goto(f"/#/runs/{run_id}")
        round_ = page.locator(".round")
        expect(round_).to_have_text(re.compile(r"^round [1-9]\d* of 1500$"), timeout=60_000)
        page.locator("button", has_text="Clone and edit").focus()
        page.keyboard.press("Shift+Tab")  # the button before Clone and edit
        assert page.evaluate("document.activeElement.textContent") == "Cancel"
        page.evaluate("window.cancelNode = document.activeElement")
        first = round_.inner_text()
        expect(round_).not_to_have_text(first, timeout=10_000)  # the header has been updated
        second = round_.inner_text()
        expect(round_).not_to_have_text(second, timeout=10_000)
        assert page.evaluate("document.activeElement === window.cancelNode && window.cancelNode.isConnected")
        page.keyboard.press("Enter")
        expect(page.locator("h1 .chip")).to_have_text("cancelled", timeout=60_000)
        assert page.evaluate("document.querySelector('.run-header').contains(window.cancelNode)")
    finally:
        httpx.post(f"{server}/api/runs/{run_id}/cancel")
        wait_finished(server, run_id)
    assert httpx.get(f"{server}/api/runs/{run_id}").json()["status"] == "cancelled"


def test_identical_ledger_events_are_grouped_and_the_page_fits_the_window(page: Page, small_runs):
    page.goto(f"/#/runs/{small_runs['voting']}")
    cell = page.locator("table.ledger td.releases").first
    expect(cell).to_have_text("10 × noisy-argmax vote σ = 20, sensitivity 1", timeout=20_000)
    width = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width


def test_events_are_counted_once_per_kind_in_first_seen_order(page: Page):
    page.goto("/")
    text = page.evaluate(
        """async () => {
          const m = await import("/js/pages/run-detail.js");
          const g = { kind: "gaussian", noise_multiplier: 2 };
          const v = { kind: "vote", noise_std: 14.9, sensitivity: 1, counts: null };
          return m.describeEvents([v, g, v, v]);
        }"""
    )
    assert text == "3 × noisy-argmax vote σ = 14.9, sensitivity 1; Gaussian σ = 2"


# σ so large that the model learns nothing: its accuracy is the majority class's, or worse
NOISE_RUN = {**SMALL_RUN, "rounds": 1, "privacy": {"noise_multiplier": 1000.0, "delta": 1e-5}}
BUDGET_RUN = {**SMALL_RUN, "dataset": {"name": "synthetic", "silos": 2}}


@pytest.fixture(scope="module")
def own_run(server) -> str:
    """A finished run of this module's own, which its tests rename, tag and archive."""
    run_id = create_run(server, SMALL_RUN)
    assert wait_finished(server, run_id)["status"] == "succeeded"
    return run_id


def test_name_tags_and_notes_are_edited_in_place_and_persist(page: Page, server, own_run):
    page.goto(f"/#/runs/{own_run}")
    form = page.locator("form.annotations")
    expect(form.get_by_label("name")).to_have_value("", timeout=20_000)
    form.get_by_label("name").fill("baseline σ=1")
    form.get_by_label("tags (comma-separated)").fill(" paper, digits ,paper")
    form.get_by_label("notes").fill("two rounds\nno tuning")
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".annotation-status")).to_have_text("saved")
    # as the server keeps them: trimmed, de-duplicated
    expect(form.get_by_label("tags (comma-separated)")).to_have_value("paper, digits")
    expect(page.locator(".run-header h1")).to_contain_text("baseline σ=1 · isrl_mbsgd on digits")
    body = httpx.get(f"{server}/api/runs/{own_run}").json()
    assert body["name"] == "baseline σ=1"
    assert (body["tags"], body["notes"]) == (["paper", "digits"], "two rounds\nno tuning")
    page.reload()
    expect(form.get_by_label("notes")).to_have_value("two rounds\nno tuning", timeout=20_000)


def test_a_refused_tag_is_shown_beside_the_tags(page: Page, server, own_run):
    before = httpx.get(f"{server}/api/runs/{own_run}").json()["tags"]
    page.goto(f"/#/runs/{own_run}")
    form = page.locator("form.annotations")
    tags = form.get_by_label("tags (comma-separated)")
    expect(tags).to_have_value(", ".join(before), timeout=20_000)
    tags.fill("ok, " + "x" * 41)
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".annotation-tags .error")).to_have_text(
        f"tag 1 must be 1 to 40 characters after trimming, without commas; got '{'x' * 41}'"
    )
    expect(form.locator(".annotation-status")).to_have_text("not saved")
    assert form.locator(".annotation-name .error").inner_text() == ""
    assert httpx.get(f"{server}/api/runs/{own_run}").json()["tags"] == before


def test_a_sweep_run_links_to_its_sweep(page: Page, server):
    res = httpx.post(
        f"{server}/api/sweeps",
        json={"name": "run page sweep", "base": {**SMALL_RUN, "rounds": 1}, "grid": {"seed": [3]}},
        timeout=60,
    )
    assert res.status_code == 201, res.text
    sweep_id, (run_id,) = res.json()["id"], res.json()["run_ids"]
    wait_finished(server, run_id)
    page.goto(f"/#/runs/{run_id}")
    link = page.locator(".sweep-link")
    expect(link).to_have_text("part of sweep run page sweep (its runs)", timeout=20_000)
    assert page.locator("a.sweep-compare").get_attribute("href") == f"#/compare?sweep={sweep_id}"
    assert page.locator("a.sweep-runs").get_attribute("href") == f"#/runs?sweep={sweep_id}"


def test_archive_and_a_refused_delete_on_the_run_page(page: Page, server):
    httpx.put(f"{server}/api/budgets/synthetic", json={"total_epsilon": 100.0})
    run_id = create_run(server, BUDGET_RUN)
    assert wait_finished(server, run_id)["status"] == "succeeded"
    refusal = httpx.delete(f"{server}/api/runs/{run_id}")
    assert refusal.status_code == 409
    page.goto(f"/#/runs/{run_id}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.locator(".run-actions-error")).to_have_text(f"Not deleted: {refusal.json()['detail']}")
    page.get_by_role("button", name="Archive").click()
    expect(page.get_by_role("button", name="Unarchive")).to_be_visible()
    assert httpx.get(f"{server}/api/runs/{run_id}").json()["archived"] is True
    assert page.locator(".run-actions-error").inner_text() == ""


def test_delete_of_a_finished_run_goes_back_to_the_list(page: Page, server):
    run_id = create_run(server, {**SMALL_RUN, "rounds": 1})
    wait_finished(server, run_id)
    page.goto(f"/#/runs/{run_id}")
    expect(page.locator(".run-header h1 .chip")).to_have_text("succeeded", timeout=20_000)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    # the list may write its view into the hash as it opens (#/runs?…)
    expect(page).to_have_url(re.compile(r"#/runs(\?.*)?$"), timeout=30_000)
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    assert httpx.get(f"{server}/api/runs/{run_id}").status_code == 404


def test_a_run_no_better_than_guessing_is_flagged(page: Page, server):
    run_id = create_run(server, NOISE_RUN)
    run = wait_finished(server, run_id)
    assert run["status"] == "succeeded" and run["no_better_than_guessing"] is True, run
    assert run["baseline_label"] == (
        "not private: computed from the private data without noise, not covered by the ledger's ε"
    )
    page.goto(f"/#/runs/{run_id}")
    flag = page.locator(".guessing-flag")
    acc, base = (float(f"{run[k]:.3g}") for k in ("final_accuracy", "baseline_accuracy"))
    expect(flag).to_have_text(
        f"accuracy {acc:g} is no better than guessing the majority class ({base:g}; {run['baseline_label']})",
        timeout=20_000,
    )
    expect(page.locator("table.ledger tbody tr").first).to_be_attached()
    assert serious_violations(page) == []


def test_a_run_that_is_not_private_is_not_flagged(page: Page, server):
    spec = {"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 2}, "rounds": 1}
    run = wait_finished(server, create_run(server, spec))
    assert (run["notion"], run["no_better_than_guessing"]) == ("none", None)
    page.goto(f"/#/runs/{run['id']}")
    expect(page.locator(".run-header dd.privacy")).to_have_text("not private", timeout=20_000)
    expect(page.locator(".guessing-flag")).to_be_hidden()


def test_the_ledger_offers_every_accountant_of_the_options(page: Page, server, small_runs):
    accountants = httpx.get(f"{server}/api/options").json()["accountants"]
    assert "pate" in [a["name"] for a in accountants]
    page.goto(f"/#/runs/{small_runs['voting']}")
    select = page.locator("select[name=accountant]")
    expect(select.locator("option")).to_have_count(len(accountants) + 1, timeout=20_000)
    values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
    assert values == ["", *(a["name"] for a in accountants)]
    pate = select.locator("option[value=pate]")
    expect(pate).to_have_text("pate (recompute only: data-dependent, never a headline)")
    expect(select.locator("option[value=rdp]")).to_have_text("rdp")
    select.select_option("pate")
    expect(page.locator(".ledger-eps")).to_contain_text("(pate) — data-dependent, not the run's guarantee")


def test_an_unknown_run_id_says_so_without_the_buttons_of_a_run(page: Page):
    page.goto("/#/runs/0123456789abcdef")
    expect(page.get_by_role("heading", name="Run not found")).to_be_visible(timeout=20_000)
    expect(page.locator(".not-found")).to_contain_text("No run has the id 0123456789abcdef")
    expect(page.get_by_role("button")).to_have_count(0)  # no Cancel, Delete or Audit of nothing
    page.get_by_role("link", name="All runs").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()


def test_a_run_page_asks_nothing_the_server_refuses(page: Page, small_runs):
    refused: list[str] = []
    page.on("response", lambda res: refused.append(f"{res.status} {res.url}") if res.status >= 400 else None)
    page.goto(f"/#/runs/{small_runs['small']}")
    expect(page.locator(".audit-status")).to_have_text("not audited", timeout=20_000)
    expect(page.locator("#chart-learning .main-svg").first).to_be_attached()
    assert refused == []  # before, every run page asked for an audit that was not there: a 404


def test_an_accountant_that_cannot_account_the_run_is_said_beside_the_ledger(page: Page, small_runs):
    page.goto(f"/#/runs/{small_runs['small']}")
    select = page.locator("select[name=accountant]")
    expect(select.locator("option[value=group]")).to_have_count(1, timeout=20_000)
    select.select_option("group")
    expect(page.locator("select[name=accountant]")).to_have_value("group")
    refused = "Could not account this ledger: accountant 'group' cannot account PoissonSampledEvent"
    expect(page.get_by_text(refused)).to_be_visible()
    # the charts keep the run's own accountant when the chosen one cannot account it: no page error
    expect(page.locator("#chart-learning .main-svg").first).to_be_attached()


def test_the_run_page_with_its_new_controls_fits_a_phone(browser, server, own_run):
    context = browser.new_context(base_url=server, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.goto(f"/#/runs/{own_run}")
        expect(page.locator("form.annotations")).to_be_visible(timeout=20_000)
        expect(page.locator("table.ledger tbody tr").first).to_be_attached(timeout=20_000)
        width = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width
        assert serious_violations(page) == []
        page.wait_for_function("() => document.getElementById('chart-learning')?._fullLayout")
        shoot(page, "run-phone")
    finally:
        context.close()


def test_the_learning_curves_keep_their_loss_axis_in_a_narrow_card(page: Page, server):
    # a chart card narrower than 700 px is not a notion-faceted figure: its rows keep their own axes
    from tests.browser.conftest import create_run, wait_finished

    run_id = create_run(
        server,
        {
            "algorithm": "isrl_mbsgd",
            "dataset": {"name": "digits", "silos": 2},
            "rounds": 2,
            "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
        },
    )
    assert wait_finished(server, run_id)["status"] == "succeeded"
    page.goto(f"/#/runs/{run_id}")
    chart = "document.getElementById('chart-learning')"
    page.wait_for_function(f"() => {chart}?._fullLayout?.yaxis2")
    loss = httpx.get(f"{server}/api/runs/{run_id}/metrics").json()[-1]["loss"]
    assert page.evaluate(f"{chart}.clientWidth") < 700
    top = page.evaluate(f"{chart}._fullLayout.yaxis2.range[1]")
    assert top >= loss > 1, (top, loss)  # the loss axis is the loss's, not accuracy's [0, 1]
