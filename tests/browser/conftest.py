"""Browser fixtures: `dpfl up` on a free port (embedded SQLite + filesystem broker) and a real
headless Chromium (Debian's, driven by Playwright) that fails the test on any console error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.server import dpfl_up

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
# Flags this machine needs: no sandbox as root, and no background traffic to the closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# How long an `expect` waits for the page to get there. Playwright's 5 s default is a timing
# threshold in disguise: with three test workers on two cores, a PATCH and its redraw once took
# longer (a sweep panel's "Restore" was drawn after the assertion gave up). Tests assert what
# the page shows, not how fast; benchmarks time the pages.
expect.set_options(timeout=20_000)


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[str]:
    """The whole app as a user starts it: `dpfl up` with its own DPFL_HOME; yields the base URL."""
    # uldp_group's projection (group-privacy curves on the whole accountant) took 15–18 s alone
    # on a slow machine and hit the server's 30 s limit beside the other test workers
    with dpfl_up(tmp_path_factory.mktemp("dpfl-home"), env={"DPFL_PROJECTION_TIMEOUT_S": "120"}) as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; scripts/ensure-chromium.sh installs Debian's chromium")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[pytest.TestReport]:
    """Keeps the test's own report on its item, so that `page` knows whether it failed."""
    report = yield
    if report.when == "call":
        item.report_call = report
    return report


def _expected_http(text: str) -> bool:
    return text.startswith("Failed to load resource: the server responded with a status of 4")


@pytest.fixture
def page(browser, server, request) -> Iterator[Page]:
    """A fresh page on the app; console errors and uncaught exceptions fail the test."""
    context = browser.new_context(base_url=server, viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    # A 4xx the app asked for (a 422 it shows beside a field) is logged by Chromium as a failed
    # resource; it is not an error of the page. Everything else is.
    pg.on(
        "console",
        lambda msg: errors.append(msg.text) if msg.type == "error" and not _expected_http(msg.text) else None,
    )
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    call = getattr(request.node, "report_call", None)
    if call is not None and call.failed:  # what the page showed when the test failed
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert errors == [], f"console errors: {errors}"


@pytest.fixture
def phone(browser, server) -> Iterator[Page]:
    """A fresh page on the app in a phone's viewport (390×844)."""
    context = browser.new_context(base_url=server, viewport={"width": 390, "height": 844})
    try:
        yield context.new_page()
    finally:
        context.close()


def shoot(page: Page, name: str) -> None:
    """Saves a screenshot of a view as a test artifact (tests/artifacts, not tracked): a test
    run never rewrites the tracked files under docs/."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def create_run(server: str, spec: dict) -> str:
    """Creates a run over HTTP (not through the form); returns its id."""
    res = httpx.post(f"{server}/api/runs", json=spec, timeout=60)  # the first run loads the dataset
    assert res.status_code == 201, res.text
    return res.json()["id"]


def wait_finished(server: str, run_id: str, timeout_s: float = 120) -> dict:
    """Polls the run until it has ended; returns it."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        run = httpx.get(f"{server}/api/runs/{run_id}").json()
        if run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} did not finish in {timeout_s} s")


SMALL_RUN = {
    "algorithm": "isrl_mbsgd",
    "dataset": {"name": "digits", "silos": 2},
    "rounds": 2,
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
}
VOTING_RUN = {
    "algorithm": "ae_dpfl",
    "dataset": {"name": "digits", "silos": 4},
    "rounds": 2,
    "params": {"queries": 20, "public_pool": 100, "student_epochs": 2},
    "privacy": {"noise_multiplier": 20.0, "delta": 1e-5},
}


@pytest.fixture(scope="session")
def small_runs(server) -> dict[str, str]:
    """Finished runs the page tests share, created over HTTP once: `small` (isrl_mbsgd on 2
    silos) and `voting` (ae_dpfl, whose ledger cells hold 20 identical votes)."""
    ids = {"small": create_run(server, SMALL_RUN), "voting": create_run(server, VOTING_RUN)}
    for run_id in ids.values():
        assert wait_finished(server, run_id)["status"] == "succeeded"
    return ids
