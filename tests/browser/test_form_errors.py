"""The New run form says what is wrong beside the field the user sees, in the form's words; a blank
box says what it means; settings that run and mislead get a warning before the run."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser


def error_of(page: Page, field: str):
    return page.locator(f".field[data-field='{field}'] .error")


def test_errors_land_beside_the_fields_the_user_sees(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    # a blank ε: beside the ε box, not under the advanced box
    page.fill("[name='privacy.epsilon']", "")
    expect(error_of(page, "privacy.epsilon")).to_have_text(
        "is blank; give ε, or choose another target above."
    )
    expect(error_of(page, "advanced")).to_have_text("")
    page.fill("[name='privacy.epsilon']", "3")
    # partition pairs on a two-class dataset: beside silos
    page.locator("[name='dataset.name']").select_option("breast_cancer")
    page.locator("[name='dataset.partition.kind']").select_option("pairs")
    expect(error_of(page, "dataset.silos")).to_have_text(
        "must be 1 for kind 'pairs' on 2 classes (1 even x 1 odd); got 10."
    )
    page.locator("[name='dataset.partition.kind']").select_option("iid")
    page.locator("[name='dataset.name']").select_option("digits")
    # natural users on data without user ids: beside the users menu
    page.locator("[name='algorithm']").select_option("uldp_avg")
    page.locator("[name='dataset.users.kind']").select_option("natural")
    expect(error_of(page, "dataset.users.kind")).to_have_text(
        "is 'natural', but dataset 'digits' has no user ids; allocate users with another kind (uniform, "
        "zipf), or upload a CSV with a user-id column."
    )
    # PCA for kNN-DPFL: beside the PCA box (the spec's field is dataset.features)
    page.locator("[name='algorithm']").select_option("knn_dpfl")
    page.locator("[name='dataset.users.kind']").select_option("none")
    page.click("details.more-settings summary")
    page.fill("[name='dataset.features.pca']", "20")
    expect(error_of(page, "dataset.features.pca")).to_contain_text("must be empty for knn_dpfl")
    expect(error_of(page, "advanced")).to_have_text("")


def test_a_blank_box_says_its_default_and_implausible_settings_are_warned_of(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    assert page.get_attribute("[name=rounds]", "placeholder") == "20"
    assert page.get_attribute("[name='dataset.silos']", "placeholder") == "10"
    expect(page.locator(".field[data-field='params.lr'] small.muted")).to_contain_text("blank: ")
    page.fill("[name='privacy.delta']", "0.5")
    expect(page.locator(".implausible-warning")).to_have_text(
        "Check: δ = 0.5 is at least 1/n = 1/1,438 (n: the training records): a mechanism that publishes "
        "one record outright with probability δ meets it; take δ well below 1/n, e.g. 1e-05."
    )
    page.fill("[name='privacy.delta']", "1e-5")
    expect(page.locator(".implausible-warning")).to_have_count(0)
    page.locator("[name='algorithm']").select_option("uldp_avg")
    page.fill("[name='dataset.users.count']", "100000")
    expect(page.locator(".implausible-warning").first).to_contain_text(
        "Check: 100,000 users for 1,438 training records: most users hold no record"
    )


def test_tab_reaches_start_run_past_the_fields_and_nothing_else(page: Page):
    # uldp_avg took 39 presses: ten of them the partition preview's chart buttons
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε", timeout=30_000)
    page.locator("[name='algorithm']").select_option("uldp_avg")
    page.wait_for_function("() => document.getElementById('chart-partition-preview')?.data?.length > 0")
    page.focus("[name='algorithm']")
    passed = []
    while len(passed) < 60 and not page.evaluate("document.activeElement.type === 'submit'"):
        page.keyboard.press("Tab")
        passed.append(page.evaluate("document.activeElement.name || document.activeElement.tagName"))
    assert passed[-1] == "BUTTON" and len(passed) == 26, passed
    assert passed.count("BUTTON") == 1 and "epsilon-slider" not in passed
    assert passed.count("SUMMARY") == 3  # the upload, the folded settings, the advanced box
