"""The run page: a live header that keeps keyboard focus, and a ledger that fits the window."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import create_run, wait_finished

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
