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


def upload(page: Page, out: Path) -> None:
    """The New run page after a CSV upload from the browser: its columns chosen, its classes shown."""
    lines = ["patient_id,age,outcome"] + [
        f"p{i % 40},{20 + i % 50},{'sick' if i % 3 else 'well'}" for i in range(240)
    ]
    page.goto("/#/new")
    page.click("details.upload summary")
    page.set_input_files(
        "[name='upload.file']",
        files=[
            {"name": "patients.csv", "mimeType": "text/csv", "buffer": ("\n".join(lines) + "\n").encode()}
        ],
    )
    page.locator("[name='upload.label']").select_option("outcome")
    page.locator("[name='upload.user_id']").select_option("patient_id")
    page.click("button.upload-button")
    page.locator(".upload-status", has_text="Stored").wait_for(timeout=60_000)
    page.locator("#chart-partition-preview .main-svg").first.wait_for(timeout=60_000)
    time.sleep(1)
    page.screenshot(path=str(out / "upload.png"), full_page=True)
    print(f"wrote {out / 'upload.png'}")


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
            shoot(desktop, "/#/new?mode=sweep", ".sweep-count", args.out, "new-sweep.png", full_page=True)
            picked = httpx.get(
                f"{url}/api/runs", params={"sweep": sweep["id"], "algorithm": "isrl_mbsgd"}
            ).json()
            three = ",".join(r["id"] for r in picked["items"][:3])
            shoot(
                desktop,
                f"/#/compare?runs={three}&metric=loss&smooth=0.3",
                "#chart-overlay .main-svg",
                args.out,
                "compare-overlay.png",
                full_page=True,
            )
            upload(desktop, args.out)
            phone = browser.new_page(viewport=PHONE, base_url=url)
            shoot(phone, f"/#/runs/{run['id']}", "#chart-learning .main-svg", args.out, "run-phone.png")
            browser.close()


if __name__ == "__main__":
    main()
