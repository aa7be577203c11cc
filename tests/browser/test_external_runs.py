"""External runs in the browser (issue 45): marked in the Runs list and on Compare; the run page
shows the ε their tool reported beside ours, flagged when smaller, and offers no clone or audit."""

from __future__ import annotations

import dp_accounting
import httpx
import pytest
from playwright.sync_api import Page, expect

from dpfl import track
from tests.browser.axe import serious_violations

pytestmark = pytest.mark.browser

STEPS = dp_accounting.SelfComposedDpEvent(
    dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1.1)), 20
)


@pytest.fixture(scope="module")
def external(server) -> dict:
    """A finished external run of 3 rounds whose tool reported ε 1.5 (RDP: 2.743), as the server shows it."""
    with track.start_run(algorithm="opacus dp-sgd", dataset="adult", delta=1e-5, server=server) as run:
        for r in (1, 2, 3):
            run.log_round(r, accuracy=0.7 + r / 100, loss=0.5, events={"c0": STEPS, "c1": STEPS})
        run.finish(reported_epsilon=1.5)
    return httpx.get(f"{server}/api/runs/{run.id}").json()


def test_the_run_page_shows_the_reported_epsilon_beside_ours_flagged(page: Page, external):
    assert external["epsilon"] == pytest.approx(2.742589, abs=1e-6)  # dp-accounting's RDP, 3 rounds
    page.goto(f"/#/runs/{external['id']}")
    line = page.locator(".run-header .reported-epsilon")
    expect(line).to_have_text(
        "ε reported by its tool: 1.5 · ours (rdp, recomputed from its ledger): 2.743 — the reported ε is "
        "smaller than a sound accountant's",
        timeout=20_000,
    )
    expect(line).to_have_class("reported-epsilon error-text")
    expect(page.locator(".run-header h1 .chip.external")).to_have_text("external")
    expect(page.locator(".run-header .privacy-warning")).to_contain_text("smaller than 'rdp''s ε")
    expect(page.locator(".run-header .caveats")).to_contain_text("ledger as reported")
    expect(page.get_by_role("button", name="Clone and edit")).to_be_hidden()
    expect(page.locator(".run-header dd.noise-source")).to_have_text(
        "executed elsewhere: as its code reported"
    )
    expect(page.locator(".audit-button")).to_have_count(0)
    expect(page.get_by_role("heading", name="Audit (not private)")).to_have_count(0)
    assert serious_violations(page) == []


def test_the_runs_list_marks_an_external_run(page: Page, external):
    page.goto("/#/runs")
    row = page.locator(f"table.runs tr[data-run='{external['id']}']")
    expect(row.locator(".chip.external")).to_have_text("external", timeout=20_000)
    assert serious_violations(page) == []


def test_compare_draws_an_external_run_as_its_own_marked_series(page: Page, external):
    page.goto(f"/#/compare?runs={external['id']}")
    page.wait_for_function(
        "() => document.getElementById('chart-tradeoff')?._fullData?.length > 0", timeout=20_000
    )
    names = page.evaluate("document.getElementById('chart-tradeoff')._fullData.map((t) => t.name)")
    assert "opacus dp-sgd · external" in names
