"""Retakes docs/screenshots/: each page of a fresh `dpfl up --demo` once its demo sweep has
finished, in Debian's Chromium (as the browser tests). compare-demo.png is the README's picture.

Usage: python scripts/screenshots.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.server import dpfl_up  # noqa: E402

DESKTOP = {"width": 1400, "height": 900}
PHONE = {"width": 390, "height": 844}


def finished_demo(url: str) -> dict:
    """Waits for the demo sweep to finish; returns it."""
    deadline = time.time() + 600
    while True:
        sweeps = httpx.get(f"{url}/api/sweeps").json()["items"]
        if sweeps and sweeps[0]["counts"].get("succeeded") == sweeps[0]["num_runs"]:
            return sweeps[0]
        if time.time() > deadline:
            sys.exit(f"the demo sweep did not finish in 10 minutes: {sweeps}")
        time.sleep(1)


def shoot(page: Page, path: str, ready: str, out: Path, name: str, *, full_page: bool = False) -> None:
    page.goto(path)
    page.locator(ready).first.wait_for(timeout=60_000)
    time.sleep(1)  # Plotly's transitions
    page.screenshot(path=str(out / name), full_page=full_page)
    print(f"wrote {out / name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home, dpfl_up(Path(home), demo=True) as url:
        sweep = finished_demo(url)
        run = httpx.get(f"{url}/api/runs", params={"sweep": sweep["id"], "algorithm": "isrl_mbsgd"}).json()[
            "items"
        ][0]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            desktop = browser.new_page(viewport=DESKTOP, base_url=url)
            shoot(
                desktop,
                f"/#/compare?sweep={sweep['id']}&log=1",
                "#chart-tradeoff .main-svg",
                args.out,
                "compare-demo.png",
            )
            shoot(desktop, "/#/runs", "table.runs tbody tr[data-run]", args.out, "runs.png")
            shoot(
                desktop,
                "/#/new",
                "#chart-partition-preview .main-svg",
                args.out,
                "new-run.png",
                full_page=True,
            )
            shoot(
                desktop,
                f"/#/runs/{run['id']}",
                "#chart-learning .main-svg",
                args.out,
                "run.png",
                full_page=True,
            )
            shoot(desktop, "/#/budgets", "main h1", args.out, "budgets.png")
            phone = browser.new_page(viewport=PHONE, base_url=url)
            shoot(phone, f"/#/runs/{run['id']}", "#chart-learning .main-svg", args.out, "run-phone.png")
            browser.close()


if __name__ == "__main__":
    main()
