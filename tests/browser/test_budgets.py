"""The budgets page: a dataset chosen from the known ones, errors beside the field that caused
them and cleared by a success, and Delete."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def test_the_dataset_is_chosen_from_the_datasets_here_and_the_uploads(page: Page, server):
    page.goto("/#/budgets")
    catalogue = httpx.get(f"{server}/api/datasets").json()
    # the csv loader and datasets whose files are missing are no choice; uploads are, by name
    names = [d["name"] for d in catalogue["datasets"] if d["available"] and d["name"] != "csv"]
    names += [f"{u['name']} (your upload)" for u in catalogue["uploads"]]
    assert "mnist" in names and len(names) < len(catalogue["datasets"])
    expect(page.locator("select[name=dataset] option")).to_have_count(len(names) + 1)
    assert page.locator("select[name=dataset] option").all_inner_texts() == ["choose a dataset", *names]


def test_an_empty_dataset_is_refused_beside_the_field_and_a_success_clears_it(page: Page, server):
    sent: list[str] = []
    page.on("request", lambda r: r.method == "PUT" and sent.append(r.url))
    page.goto("/#/budgets")
    page.fill("input[name=total]", "5")
    page.click("button:has-text('Set budget')")
    error = page.locator(".field[data-field=dataset] .error")
    expect(error).to_have_text("dataset: choose the dataset the budget is for.")
    assert page.evaluate("document.activeElement.name") == "dataset"
    assert sent == []
    # adult: no other browser test runs on it (a budget makes a dataset's runs protected)
    page.select_option("select[name=dataset]", "adult")
    page.fill("input[name=total]", "-1")
    page.click("button:has-text('Set budget')")
    total_error = page.locator(".field[data-field=total] .error")
    expect(total_error).to_have_text('total ε: must be a number ≥ 0; got "-1".')
    expect(error).to_have_text("")
    page.fill("input[name=total]", "7")
    page.fill("input[name=delta]", "2")
    page.click("button:has-text('Set budget')")
    expect(page.locator(".field[data-field=delta] .error")).to_have_text(
        'δ: must be a number in (0, 1); got "2".'
    )
    page.fill("input[name=delta]", "1e-6")
    page.click("button:has-text('Set budget')")
    expect(page.locator(".card[data-dataset=adult] .remaining")).to_have_text("7")
    expect(page.locator(".card[data-dataset=adult] .unit")).to_have_text(
        "ε at δ = 1e-6, per the notion of the first run charged"
    )
    assert httpx.get(f"{server}/api/budgets/adult").json()["delta"] == 1e-6
    expect(page.locator(".card[data-dataset=adult] .test-split")).to_have_text(
        "withheld: the test split is under the budget"
    )
    expect(page.locator(".field .error")).to_have_text(["", "", "", ""])
    expect(page.locator(".form-error")).to_have_text("")
    assert httpx.delete(f"{server}/api/budgets/adult").status_code == 204  # later tests run unbudgeted


def test_delete_shows_its_refusal_then_removes_a_budget(page: Page, server):
    assert httpx.put(f"{server}/api/budgets/heart", json={"total_epsilon": 3.0}).status_code == 200
    page.goto("/#/budgets")
    delete = page.get_by_role("button", name="delete the budget of heart")
    expect(delete).to_be_visible()
    assert httpx.delete(f"{server}/api/budgets/heart").status_code == 204  # behind the page's back
    delete.click()
    # the API lists the datasets that still have a budget (other tests' budgets among them)
    expect(page.locator(".card[data-dataset=heart] .delete-error")).to_have_text(
        re.compile(r"^Could not delete the budget: dataset .heart. has no privacy budget; datasets with one")
    )
    assert httpx.put(f"{server}/api/budgets/heart", json={"total_epsilon": 3.0}).status_code == 200
    page.reload()
    page.get_by_role("button", name="delete the budget of heart").click()
    expect(page.locator(".card[data-dataset=heart]")).to_have_count(0)
    assert httpx.get(f"{server}/api/budgets/heart").status_code == 404
