"""The runs list: runs created elsewhere appear, CSV export of every matching run, labelled
checkboxes and sortable headers a keyboard can use."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import SMALL_RUN, create_run, wait_finished

pytestmark = pytest.mark.browser


def test_a_run_created_elsewhere_appears_without_a_reload(page: Page, server, small_runs):
    page.goto("/#/runs")
    expect(page.locator("table.runs tbody tr[data-run]").first).to_be_visible(timeout=20_000)
    page.evaluate("window.sameDocument = true")
    run_id = create_run(server, SMALL_RUN)
    expect(page.locator(f"table.runs tr[data-run='{run_id}']")).to_be_visible(timeout=10_000)
    assert page.evaluate("window.sameDocument === true")
    wait_finished(server, run_id)


def test_export_csv_is_every_run_matching_the_filters_from_the_server(page: Page, server, small_runs):
    page.goto("/#/runs?status=succeeded")
    expect(page.locator("table.runs tbody tr[data-run]").first).to_be_visible(timeout=20_000)
    link = page.get_by_role("link", name="Export CSV")
    assert link.get_attribute("href") == "/api/runs.csv?status=succeeded&sort=-created_at"
    with page.expect_download() as info:
        link.click()
    sent = Path(info.value.path()).read_bytes()
    expected = httpx.get(f"{server}/api/runs.csv", params={"status": "succeeded", "sort": "-created_at"})
    assert sent == expected.content
    total = int(expected.headers["x-total-count"])
    assert total >= 2 and len(sent.splitlines()) == total + 1


def test_checkboxes_are_labelled_with_their_run(page: Page, small_runs):
    page.goto("/#/runs")
    rows = page.locator("table.runs tbody tr[data-run]")
    expect(rows.first).to_be_visible(timeout=20_000)
    labels = page.evaluate(
        """() => [...document.querySelectorAll("table.runs tbody tr[data-run]")]
                 .map(tr => [tr.dataset.run,
                             tr.querySelector("input[type=checkbox]").getAttribute("aria-label")])"""
    )
    assert labels and all(label == f"select run {run}" for run, label in labels)


def test_sortable_headers_are_buttons_with_aria_sort_and_an_arrow(page: Page, small_runs):
    page.goto("/#/runs")
    expect(page.locator("table.runs tbody tr[data-run]").first).to_be_visible(timeout=20_000)

    def sorts():
        return page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll("table.runs th[aria-sort]")]
                     .map(th => [th.querySelector("button").textContent, th.getAttribute("aria-sort")]))"""
        )

    assert sorts() == {
        "status": "none", "algorithm": "none", "ε target": "none", "ε spent": "none",
        "accuracy": "none", "created ▼": "descending",
    }
    page.get_by_role("button", name="accuracy").focus()
    page.keyboard.press("Enter")
    expect(page.locator("th[aria-sort=descending]")).to_have_text("accuracy ▼")
    assert "sort=-final_accuracy" in page.url
    assert page.evaluate("document.activeElement.textContent") == "accuracy ▼"  # focus stays on it
    page.keyboard.press("Enter")
    expect(page.locator("th[aria-sort=ascending]")).to_have_text("accuracy ▲")
    assert "sort=final_accuracy" in page.url
    assert sorts()["created"] == "none"
