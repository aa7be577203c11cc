"""Your own data from the browser: upload a CSV choosing its label and user-id columns from its header,
see its classes by their values, run on it by name, and find it in the Budgets and Runs menus."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import wait_finished

pytestmark = pytest.mark.browser

LINES = ["patient_id,age,outcome"] + [
    f"p{i % 40},{20 + i % 50},{'sick' if i % 3 else 'well'}" for i in range(240)
]


def upload_csv(page: Page, filename: str, name: str | None = None) -> None:
    page.click("details.upload summary")
    page.set_input_files(
        "[name='upload.file']",
        files=[{"name": filename, "mimeType": "text/csv", "buffer": ("\n".join(LINES) + "\n").encode()}],
    )
    expect(page.locator("[name='upload.label'] option")).to_have_text(["patient_id", "age", "outcome"])
    page.locator("[name='upload.label']").select_option("outcome")
    page.locator("[name='upload.user_id']").select_option("patient_id")
    if name is not None:
        page.fill("[name='upload.name']", name)
    page.click("button.upload-button")


def test_an_upload_from_the_browser_is_a_dataset_by_name_in_every_menu(page: Page, server):
    page.goto("/#/new")
    upload_csv(page, "Patients 2026.csv")
    expect(page.locator("[name='upload.name']")).to_have_value("patients_2026")  # from the file name
    expect(page.locator(".upload-status")).to_have_text(
        "Stored patients_2026: 240 rows, classes sick (160), well (80); users from patient_id. "
        "It is chosen above."
    )
    expect(page.locator("[name='dataset.name']")).to_have_value("patients_2026")
    expect(page.locator("[name='dataset.users.kind']")).to_have_value("natural")
    # the partition preview names the classes by their values
    page.wait_for_function(
        "() => { const c = document.getElementById('chart-partition-preview'); "
        "return c && c.data && c.data.map(t => t.name).join() === 'sick,well'; }",
        timeout=60_000,
    )
    # user-level DP over its own users: uldp_avg, users natural (the upload's patient_id)
    page.locator("[name='algorithm']").select_option("uldp_avg")
    expect(page.locator("[name='dataset.name']")).to_have_value("patients_2026")
    expect(page.locator("[name='dataset.users.kind']")).to_have_value("natural")
    page.fill("[name='rounds']", "2")
    page.fill("[name='dataset.silos']", "2")
    page.click("button[type=submit]")
    page.wait_for_url("**/#/runs/*")
    run_id = page.url.rsplit("/", 1)[-1]
    spec = httpx.get(f"{server}/api/runs/{run_id}/spec").json()
    assert spec["dataset"]["name"] == "csv" and spec["dataset"]["options"] == {"upload": "patients_2026"}
    assert spec["dataset"]["users"]["kind"] == "natural" and spec["algorithm"] == "uldp_avg"
    assert httpx.get(f"{server}/api/runs/{run_id}").json()["dataset"] == "patients_2026"
    # finished before the budget below: a budget that appears while a run waits fails it (its
    # ledger must then cover the CSV's standardisation, which it does not)
    finished = wait_finished(server, run_id)
    assert finished["status"] == "succeeded", finished["error"]

    # a second upload of that name is refused beside the name field, and nothing is replaced
    page.goto("/#/new")
    upload_csv(page, "other.csv", name="patients_2026")
    name_field = page.locator(".field[data-field='upload.name']")
    expect(name_field.locator(".error")).to_have_text(
        "an upload named 'patients_2026' exists; uploads are never replaced, so choose another name"
    )

    # a budget on it from the Budgets page, by its name
    page.goto("/#/budgets")
    expect(page.locator("select[name=dataset] option", has_text="patients_2026 (your upload)")).to_have_count(
        1
    )
    options = page.locator("select[name=dataset] option").all_inner_texts()
    assert "patients_2026 (your upload)" in options and "csv" not in options
    page.select_option("select[name=dataset]", "patients_2026")
    page.fill("input[name=total]", "50")
    page.click("button:has-text('Set budget')")
    expect(page.locator(".card[data-dataset=patients_2026] h2")).to_contain_text("patients_2026")
    assert httpx.get(f"{server}/api/budgets/patients_2026").json()["total_epsilon"] == 50
    page.goto("/#/runs")
    page.locator("select[name=dataset]").select_option("patients_2026")
    expect(page.locator(f"tr[data-run='{run_id}']")).to_be_visible()
    assert (
        httpx.delete(f"{server}/api/budgets/patients_2026").status_code == 204
    )  # later tests run unbudgeted
