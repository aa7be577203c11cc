"""Browser fixtures: `dpfl up` on a free port (embedded SQLite + filesystem broker) and a real
headless Chromium (Debian's, driven by Playwright) that fails the test on any console error."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
SCREENSHOTS = ROOT / "docs" / "screenshots"
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[str]:
    """The whole app as a user starts it: `dpfl up` with its own DPFL_HOME; yields the base URL."""
    home = tmp_path_factory.mktemp("dpfl-home")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPFL_") or k == "DPFL_DATA_DIR"}
    env |= {"DPFL_HOME": str(home), "DPFL_PORT": str(port)}
    log = (home / "up.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "dpfl", "up"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            if httpx.get(f"{url}/api/runs", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"dpfl up did not start:\n{(home / 'up.log').read_text()[-3000:]}")
        time.sleep(0.3)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; scripts/ensure-chromium.sh installs Debian's chromium")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


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
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert errors == [], f"console errors: {errors}"


def shoot(page: Page, name: str) -> None:
    """Saves a screenshot as a test artifact and as the README's current one."""
    ARTIFACTS.mkdir(exist_ok=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=False)
