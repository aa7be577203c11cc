"""axe-core in the page: the accessibility check the browser tests run on every page.

axe.min.js is the copy the installed `axe-playwright-python` package ships; only the script is
used, injected into the page and run there, not that package's Python API.
"""

from __future__ import annotations

from pathlib import Path

import axe_playwright_python
from playwright.sync_api import Page

AXE_JS = Path(axe_playwright_python.__file__).parent / "axe.min.js"
SERIOUS = ("serious", "critical")


def serious_violations(page: Page) -> list[str]:
    """Runs axe on the page as it is; returns its serious and critical violations, one line each
    (rule, impact, the first offending nodes)."""
    page.add_script_tag(path=str(AXE_JS))
    violations = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — " + "; ".join(n["target"][0] for n in v["nodes"][:3])
        for v in violations
        if v["impact"] in SERIOUS
    ]
