"""The dashboard's Plotly bundle (backend/vendor/plotly.min.js) draws every figure we build.

It holds only the trace types scripts/plotly-bundle/entry.js registers; a figure that used
another would draw nothing in the browser, without an error. The browser test
`test_the_served_plotly_knows_exactly_the_bundled_trace_types` checks the built file against
entry.js.
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly

from backend.assets import PLOTLY_FILE, PLOTLY_URL

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "scripts" / "plotly-bundle" / "entry.js"


def bundled_trace_types() -> set[str]:
    # Plotly's core always carries scatter
    return {"scatter"} | set(re.findall(r"require\('plotly\.js/lib/(\w+)'\)", ENTRY.read_text())) - {"core"}


def test_every_trace_type_our_figures_build_is_in_the_bundle():
    built = set()
    for path in [*ROOT.joinpath("dpfl").rglob("*.py"), *ROOT.joinpath("backend").rglob("*.py")]:
        built |= {name.lower() for name in re.findall(r"\bgo\.([A-Z]\w*)\(", path.read_text())}
    traces = built - {"figure", "layout"}
    assert traces == {"scatter", "bar", "parcoords"}, traces  # a new one: add it to entry.js
    assert traces <= bundled_trace_types()


def test_the_bundle_is_the_plotly_js_that_the_installed_plotly_writes_figures_for():
    # figure JSON from plotly.py follows the schema of the plotly.js it ships
    shipped = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    version = re.compile(rb"plotly\.js v([\w.]+)")
    ours = version.search(PLOTLY_FILE.read_bytes()[:200]).group(1)
    assert ours == version.search(shipped.read_bytes()[:200]).group(1)
    assert PLOTLY_URL.startswith(f"/vendor/plotly-{ours.decode()}-")
