"""Retakes the README's picture, docs/screenshots/compare-demo.png: the Compare page of a fresh
`dpfl up --demo` once its demo sweep has finished, in Debian's Chromium (as the browser tests).

Usage: python scripts/readme_screenshot.py [--out PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.server import dpfl_up  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "compare-demo.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, dpfl_up(Path(home), demo=True) as url:
        deadline = time.time() + 600
        while True:
            sweeps = httpx.get(f"{url}/api/sweeps").json()["items"]
            if sweeps and sweeps[0]["counts"].get("succeeded") == sweeps[0]["num_runs"]:
                break
            if time.time() > deadline:
                sys.exit(f"the demo sweep did not finish in 10 minutes: {sweeps}")
            time.sleep(1)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{url}/#/compare?sweep={sweeps[0]['id']}&log=1")
            page.locator("#chart-tradeoff .main-svg").first.wait_for()
            time.sleep(1)  # Plotly's transition
            page.screenshot(path=str(args.out))
            browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
