"""The new-run form: a clone keeps every field, errors are seen where the user is, the ε box,
the projection's state, and values the browser refuses before asking the API."""

from __future__ import annotations

import json
import math
import re

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import create_run

pytestmark = pytest.mark.browser

# Fields the form does not show: partition.min_size, users.zipf_alpha and
# main_silo_probability, the loader's options, privacy.noise_source.
RICH_SPEC = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 0.3},
    "dataset": {
        "name": "logistic",
        "silos": 3,
        "partition": {"kind": "dirichlet", "alpha": 0.7, "min_size": 5},
        "users": {"kind": "zipf", "count": 30, "zipf_alpha": 1.5, "main_silo_probability": 0.6},
        "options": {"num_samples": 2000, "num_test": 500},
    },
    "model": {"name": "logreg"},
    "rounds": 1,
    "privacy": {"noise_multiplier": 1.5, "delta": 1e-5, "noise_source": "seeded"},
}


def spec(server: str, run_id: str) -> dict:
    return httpx.get(f"{server}/api/runs/{run_id}/spec").json()


def in_viewport(page: Page, selector: str) -> bool:
    return page.evaluate(
        """s => { const r = document.querySelector(s).getBoundingClientRect();
                  return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }""",
        selector,
    )


def test_a_clone_submitted_unchanged_has_the_identical_spec(page: Page, server):
    source = create_run(server, RICH_SPEC)
    page.goto(f"/#/new?from={source}")
    advanced = page.locator("textarea[name=advanced]")
    expect(advanced).not_to_have_value("", timeout=20_000)
    kept = json.loads(advanced.input_value())
    assert kept["dataset"]["partition"] == {"min_size": 5}
    assert kept["dataset"]["users"] == {"zipf_alpha": 1.5, "main_silo_probability": 0.6}
    assert kept["dataset"]["options"] == {"num_samples": 2000, "num_test": 500}
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    clone = page.url.rsplit("/", 1)[1]
    assert clone != source
    assert spec(server, clone) == spec(server, source)


def test_the_advanced_box_is_merged_and_its_errors_are_shown_beside_it(page: Page, server):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("textarea[name=advanced]", "[1, 2]")
    page.click("button[type=submit]")
    error = page.locator(".field[data-field=advanced] .error")
    expect(error).to_have_text(
        'advanced fields must be a JSON object such as {"dataset": {"options": {}}}; got [1,2].'
    )
    page.fill("textarea[name=advanced]", '{"dataset": {"partition": {"min_size": 4}}, "rounds": 1}')
    expect(error).to_have_text("")
    page.select_option("select[name='dataset.partition.kind']", "dirichlet")  # a kind that takes min_size
    page.fill("[name='dataset.silos']", "2")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    made = spec(server, page.url.rsplit("/", 1)[1])
    assert (made["dataset"]["partition"]["min_size"], made["rounds"], made["dataset"]["silos"]) == (4, 1, 2)
    httpx.post(f"{server}/api/runs/{page.url.rsplit('/', 1)[1]}/cancel")


def test_a_refused_submit_shows_an_alert_beside_the_button_and_focuses_the_field(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("[name=rounds]", "0")
    page.click("button[type=submit]")
    alert = page.locator(".submit-error")
    expect(alert).to_have_text("Could not start run: see the fields marked in red")
    assert alert.get_attribute("role") == "alert"
    assert in_viewport(page, ".submit-error")
    assert page.evaluate("document.activeElement.name") == "rounds"
    expect(page.locator(".field[data-field=rounds] .error")).to_have_text(
        "input should be greater than or equal to 1; got 0."
    )


def test_hidden_layers_that_are_not_numbers_are_refused_beside_the_field(page: Page):
    posted: list[str] = []
    page.on("request", lambda r: r.method == "POST" and r.url.endswith("/api/runs") and posted.append(r.url))
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("[name='model.hidden']", "abc")
    page.click("button[type=submit]")
    expect(page.locator(".field[data-field='model.hidden'] .error")).to_have_text(
        'hidden layers must be positive integers separated by commas, e.g. 64, 32; got "abc".'
    )
    expect(page.locator(".submit-error")).to_have_text("Could not start run: see the fields marked in red")
    assert page.evaluate("document.activeElement.name") == "model.hidden"
    assert posted == []


def test_the_epsilon_box_and_the_slider_follow_each_other(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("[name='privacy.epsilon']", "8")
    expect(page.locator(".projection")).to_contain_text("projected ε = 8 at", timeout=30_000)
    slider = page.locator("[name=epsilon-slider]")
    assert slider.input_value() == str(round(1000 * math.log(8 / 0.1) / math.log(1000)))  # 634
    slider.fill("1000")
    expect(page.locator("[name='privacy.epsilon']")).to_have_value("100")
    expect(page.locator(".projection")).to_contain_text("projected ε = 100 at", timeout=30_000)


def test_the_projection_says_when_it_is_computing_and_stale(page: Page):
    page.goto("/#/new")
    projection = page.locator(".projection")
    expect(projection).to_contain_text("projected ε = 3", timeout=30_000)
    expect(page.locator(".projection-state")).to_have_text("")
    page.fill("[name='privacy.epsilon']", "5")
    expect(projection).to_have_attribute("aria-busy", "true")
    expect(projection).to_have_class(re.compile(r"\bstale\b"))
    expect(page.locator(".projection-state")).to_have_text("computing…")
    expect(projection).to_contain_text("projected ε = 5 at", timeout=30_000)
    expect(page.locator(".projection-state")).to_have_text("")
    expect(projection).not_to_have_attribute("aria-busy", "true")
    expect(projection).not_to_have_class(re.compile(r"\bstale\b"))
