"""A plugin's algorithm is one of the app's: `dpfl up` with `DPFL_PLUGINS=tests.toy_plugin` offers
the toy in the new-run form, and its worker trains a run of it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import create_run, wait_finished
from tests.server import dpfl_up
from tests.toys import NAME

pytestmark = pytest.mark.browser


@pytest.mark.slow
def test_a_plugin_algorithm_is_in_the_form_and_trains(browser, tmp_path):
    with dpfl_up(tmp_path, env={"DPFL_PLUGINS": "tests.toy_plugin"}) as url:
        run_id = create_run(url, {"algorithm": NAME, "dataset": {"name": "digits", "silos": 2}, "rounds": 2})
        context = browser.new_context(base_url=url)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("/#/new")
        select = page.locator("select[name='algorithm']")
        expect(select.locator(f"option[value='{NAME}']")).to_have_count(1)
        select.select_option(NAME)
        expect(page.locator(".about")).to_have_text(
            "federated averaging, registered by a test · privacy: none · paper: a test's toy"
        )
        expect(page.locator(".projection")).to_have_text("not private: no ε is spent", timeout=20_000)
        page.goto("/#/new?mode=sweep")  # and among a sweep's algorithms
        expect(page.locator(f"input[name='sweep.algorithms'][value='{NAME}']")).to_have_count(1)
        context.close()
        assert errors == []
        assert wait_finished(url, run_id)["status"] == "succeeded"
