"""Runs picked in the Runs list, overlaid round by round on Compare (any metric, log-y, smoothing,
kept in the URL) with a diff of their specs that shows only the fields that differ."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import create_run, wait_finished

pytestmark = pytest.mark.browser

SPEC = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 3},
    "model": {"name": "mlp", "hidden": [8]},
    "rounds": 4,
    "eval_every": 1,
    "privacy": {"epsilon": 4.0, "delta": 1e-5},
}


def runs_traces(page: Page) -> list[list]:
    return page.evaluate(
        "document.getElementById('chart-overlay').data.map(t => [t.meta.role, t.meta.run_id])"
    )


def test_three_runs_overlaid_with_loss_log_y_and_smoothing_and_two_diffed(page: Page, server):
    ids = [
        create_run(server, SPEC | {"seed": 0, "params": {"lr": 0.5}}),
        create_run(server, SPEC | {"seed": 1, "params": {"lr": 0.5}}),
        create_run(server, SPEC | {"seed": 1, "params": {"lr": 0.1}}),
    ]
    for run_id in ids:
        assert wait_finished(server, run_id)["status"] == "succeeded"
    page.goto("/#/runs")
    for run_id in ids:
        page.locator(f"tr[data-run='{run_id}'] input[type=checkbox]").check()
    page.click("button:has-text('Compare selected')")
    page.wait_for_function(
        "() => document.getElementById('chart-overlay')?.data?.length === 3", timeout=30_000
    )
    assert sorted(r for _, r in runs_traces(page)) == sorted(ids)
    assert page.evaluate("document.getElementById('chart-overlay').layout.yaxis.range") == [0, 1]

    page.locator("select[name=metric]").select_option("loss")
    page.check("input[name=logy]")
    page.locator("input[name=smooth]").fill("0.5")
    page.locator("input[name=smooth]").dispatch_event("change")
    page.wait_for_function(
        "() => { const c = document.getElementById('chart-overlay'); return c?.layout?.yaxis?.type === 'log' "
        "&& c.data.length === 6 && c.layout.meta.figure === 'loss_per_round'; }",
        timeout=30_000,
    )
    assert [role for role, _ in runs_traces(page)] == ["raw", "run"] * 3
    loss = [m["loss"] for m in httpx.get(f"{server}/api/runs/{ids[0]}/metrics").json()]
    raw = page.evaluate(
        f"document.getElementById('chart-overlay').data.find(t => t.meta.run_id === '{ids[0]}').y"
    )
    assert raw == pytest.approx(loss)
    assert "metric=loss" in page.url and "logy=1" in page.url and "smooth=0.5" in page.url
    page.reload()  # the view is the URL's
    page.wait_for_function(
        "() => document.getElementById('chart-overlay')?.layout?.yaxis?.type === 'log'", timeout=30_000
    )
    expect(page.locator("select[name=metric]")).to_have_value("loss")

    # the diff: of every field, only the seed and lr differ across the three
    rows = page.locator("table.diff tbody tr")
    expect(rows).to_have_count(2)
    assert [r.get_attribute("data-field") for r in rows.all()] == ["params.lr", "seed"]
    expect(page.locator("table.diff tr[data-field=seed] td")).to_have_text(["0", "1", "1"])
    # two runs that differ in lr alone
    page.goto(f"/#/compare?runs={ids[1]},{ids[2]}")
    expect(page.locator("table.diff tbody tr")).to_have_count(1)
    expect(page.locator("table.diff tr[data-field='params.lr'] td")).to_have_text(["0.5", "0.1"])
    expect(page.locator(".diff-summary")).to_contain_text("1 of ")
