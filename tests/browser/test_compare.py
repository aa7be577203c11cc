"""The Compare page: several sweeps and picked runs on one chart, the notion warning, the drill-down
from a point (by click or from the keyboard table), the sweep panel, PNG export, phone and axe.

Two small sweeps are created over HTTP once for the module: "record" (isrl_mbsgd at ε 1 and 8 and
fedavg, seeds 0 and 1) and "user" (uldp_avg_w at ε 1 and 8, seeds 0 and 1), so the notions mix.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import serious_violations
from tests.browser.conftest import create_run, shoot

pytestmark = pytest.mark.browser

BASE = {
    "params": {"lr": 0.5, "batch_size": 64},
    "dataset": {"name": "digits", "silos": 2},
    "model": {"name": "mlp", "hidden": [16]},
    "rounds": 2,
    "privacy": {"delta": 1e-5},
}
RECORD = {
    "name": "cmp record",
    "base": BASE,
    "grid": {"algorithm": ["isrl_mbsgd", "fedavg"], "privacy.epsilon": [1, 8], "seed": [0, 1]},
}
USER_DATASET = {"name": "digits", "silos": 4, "users": {"kind": "uniform", "count": 20}}
USER = {
    "name": "cmp user",
    "base": BASE | {"algorithm": "uldp_avg_w", "params": {}, "dataset": USER_DATASET},
    "grid": {"privacy.epsilon": [1, 8], "seed": [0, 1]},
}
MIXED_WARNING = (
    "These runs use 2 privacy notions (record-level DP, user-level DP). Their ε are different units, "
    "so each notion has its own panel: do not compare ε across panels."
)
CHART = "document.getElementById('chart-tradeoff')"


@pytest.fixture(scope="module")
def sweeps(server) -> dict[str, str]:
    """The two sweeps' ids by name ("record", "user"), every run finished."""
    ids = {}
    for key, body in (("record", RECORD), ("user", USER)):
        res = httpx.post(f"{server}/api/sweeps", json=body, timeout=60)
        assert res.status_code == 201, res.text
        ids[key] = res.json()["id"]
    deadline = time.time() + 180
    for sweep_id in ids.values():
        while True:
            counts = httpx.get(f"{server}/api/sweeps/{sweep_id}").json()["counts"]
            if all(counts.get(s, 0) == 0 for s in ("queued", "preparing", "running")):
                break
            assert time.time() < deadline, f"sweep {sweep_id} did not finish: {counts}"
            time.sleep(0.5)
        assert set(counts) <= {"succeeded", "queued", "running"} or counts.get("failed", 0) == 0, counts
    return ids


def wait_drawn(page: Page, panels: int) -> None:
    """Waits until the trade-off chart shows `panels` notion panels."""
    page.wait_for_function(
        f"() => {{ const c = {CHART}; return c && c.layout && c.layout.meta "
        f"&& c.layout.meta.notions.length === {panels} && c.data.length > 0; }}",
        timeout=30_000,
    )


def hash_params(page: Page) -> dict[str, str]:
    """The query of the page's hash (the view's state)."""
    return dict(parse_qsl(urlsplit(page.url).fragment.partition("?")[2]))


def mean_points(page: Page) -> list[list]:
    """The customdata of every mean point of the trade-off chart: [algorithm, ε, run_ids]."""
    return page.evaluate(f"{CHART}.data.filter(t => t.meta?.role === 'mean').flatMap(t => t.customdata)")


def test_two_sweeps_draw_a_panel_per_notion_with_the_warning_and_the_url_keeps_them(page: Page, sweeps):
    page.goto("/#/compare")
    search = page.get_by_role("searchbox", name="search sweeps")
    search.fill("no such sweep")
    expect(page.locator(".sweep-list li")).to_have_text(["No sweep matches “no such sweep”."])
    search.fill("cmp user")
    expect(page.locator(".sweep-list li")).to_have_text(["cmp user 4 runs"])
    search.fill("cmp")
    page.get_by_role("checkbox", name="cmp record").check()
    page.get_by_role("checkbox", name="cmp user").check()
    wait_drawn(page, 2)
    assert page.evaluate(f"{CHART}.layout.meta.notions") == ["record", "user"]
    expect(page.locator(".notion-warning[role=status]")).to_have_text(MIXED_WARNING)
    assert hash_params(page) == {"log": "1", "sweeps": f"{sweeps['record']},{sweeps['user']}"}
    page.reload()
    wait_drawn(page, 2)
    expect(page.get_by_role("checkbox", name="cmp record")).to_be_checked()
    expect(page.get_by_role("checkbox", name="cmp user")).to_be_checked()
    expect(page.locator(".notion-warning[role=status]")).to_have_text(MIXED_WARNING)


def test_an_old_sweep_link_still_draws_that_sweep_alone(page: Page, sweeps):
    page.goto(f"/#/compare?sweep={sweeps['user']}")
    wait_drawn(page, 1)
    assert page.evaluate(f"{CHART}.layout.meta.notions") == ["user"]
    expect(page.get_by_role("checkbox", name="cmp user")).to_be_checked()
    expect(page.locator(".notion-warning")).to_be_hidden()
    assert hash_params(page) == {"log": "1", "sweeps": sweeps["user"]}


def test_runs_left_out_are_named_with_their_status(page: Page, server, sweeps):
    spec = {**BASE, "algorithm": "isrl_mbsgd", "rounds": 1500, "privacy": {"epsilon": 1, "delta": 1e-5}}
    run_id = create_run(server, spec)
    page.goto(f"/#/compare?sweeps={sweeps['user']}&runs={run_id}")
    wait_drawn(page, 1)
    # still on its way: not "left out", drawn once it succeeds
    expect(page.locator(".left-out")).to_have_text(
        re.compile(
            rf"Not finished yet \(drawn when they succeed\): {run_id[:8]} \((queued|preparing|running)\)"
        )
    )
    assert httpx.post(f"{server}/api/runs/{run_id}/cancel").status_code == 200
    deadline = time.time() + 60
    while httpx.get(f"{server}/api/runs/{run_id}").json()["status"] != "cancelled":
        assert time.time() < deadline
        time.sleep(0.3)
    page.reload()
    wait_drawn(page, 1)
    expect(page.locator(".left-out")).to_have_text(
        f"Left out (not succeeded, so nothing to plot): {run_id[:8]} (cancelled)"
    )
    expect(page.locator(f".left-out a[href='#/runs/{run_id}']")).to_be_visible()


def check_drilldown(page: Page, point: list) -> None:
    """The panel under the chart lists exactly the point's runs, with their curves and ledger lines."""
    run_ids = point[2]
    panel = page.locator("section.drilldown")
    expect(panel.locator("h2")).to_have_text(f"{point[0]} at ε = {point[1]:.3g}: {len(run_ids)} runs")
    expect(panel.locator("tbody tr")).to_have_count(len(run_ids))
    assert panel.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.run)") == run_ids
    for run_id in run_ids:
        expect(panel.locator(f"tr[data-run='{run_id}'] a[href='#/runs/{run_id}']")).to_be_visible()
    page.wait_for_function(
        "() => { const c = document.getElementById('chart-curves'); return c && c.data && c.data.length; }",
        timeout=20_000,
    )
    drawn = page.evaluate("document.getElementById('chart-curves').data.map(t => t.meta.run_id)")
    assert sorted(drawn) == sorted(run_ids)
    ledger = panel.locator("ul.ledger-lines li")
    expect(ledger).to_have_count(len(run_ids))
    run = httpx.get(f"{page.url.split('/#')[0]}/api/runs/{run_ids[0]}").json()
    expect(ledger.first).to_have_text(
        f"{run_ids[0][:8]}: ε = {run['epsilon']:.3g}, δ = 1e-5, accountant {run['accountant']}, "
        f"σ = {run['noise_multiplier']:.3g}"
    )


def test_clicking_a_point_opens_the_runs_behind_it(page: Page, sweeps):
    page.goto(f"/#/compare?sweeps={sweeps['record']}")
    wait_drawn(page, 1)
    points = mean_points(page)
    # at the ε spent: the calibration puts it a hair under each target
    assert sorted((p[0], round(p[1], 3), len(p[2])) for p in points) == [
        ("isrl_mbsgd", 1.0, 2),
        ("isrl_mbsgd", 8.0, 2),
    ]
    point = next(p for p in points if round(p[1], 3) == 8.0)
    page.evaluate(
        f"""() => {{ const c = {CHART}; const t = c.data.findIndex(t => t.meta?.role === 'mean');
                    const i = c.data[t].customdata.findIndex(d => Math.abs(d[1] - 8) < 1e-3);
                    c.emit('plotly_click', {{points: [{{curveNumber: t, pointNumber: i,
                                                       customdata: c.data[t].customdata[i]}}]}}); }}"""
    )
    check_drilldown(page, point)


def test_the_points_table_opens_the_same_panel_from_the_keyboard(page: Page, sweeps):
    page.goto(f"/#/compare?sweeps={sweeps['record']},{sweeps['user']}")
    wait_drawn(page, 2)
    rows = page.locator("table.points tbody tr")
    expect(rows).to_have_count(4)
    cells = rows.evaluate_all("rs => rs.map(r => [...r.cells].slice(0, 4).map(c => c.textContent))")
    assert [(c[0], c[1], c[3]) for c in cells] == [
        ("isrl_mbsgd", "1", "2"),
        ("isrl_mbsgd", "8", "2"),
        ("uldp_avg_w", "1", "2"),
        ("uldp_avg_w", "8", "2"),
    ]
    assert all(re.fullmatch(r"0\.\d{3} ± 0\.\d{3}", c[2]) for c in cells), cells
    point = next(p for p in mean_points(page) if p[0] == "uldp_avg_w" and round(p[1], 3) == 1.0)
    rows.nth(2).get_by_role("button", name="runs of uldp_avg_w at ε = 1").focus()
    page.keyboard.press("Enter")
    check_drilldown(page, point)


def test_a_sweeps_name_tags_and_notes_are_edited_in_its_panel(page: Page, server, sweeps):
    sweep_id = sweeps["user"]
    page.goto(f"/#/compare?sweeps={sweep_id}")
    panel = page.locator("section.sweep-panel")
    link = panel.get_by_role("link", name="runs of this sweep")
    expect(link).to_have_attribute("href", f"#/runs?sweep={sweep_id}")
    expect(panel.locator(".counts")).to_have_text("4 runs: 4 succeeded")
    form = panel.locator("form.annotations")  # the editor runs and sweeps share
    form.get_by_label("name").fill("cmp user renamed")
    form.get_by_label("tags (comma-separated)").fill("paper, users")
    form.get_by_label("notes").fill("uniform users")
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".annotation-status")).to_have_text("saved")
    expect(page.get_by_role("checkbox", name="cmp user renamed")).to_be_checked()  # the picker follows
    body = httpx.get(f"{server}/api/sweeps/{sweep_id}").json()
    assert (body["name"], body["tags"], body["notes"]) == (
        "cmp user renamed",
        ["paper", "users"],
        "uniform users",
    )
    page.reload()
    expect(form.get_by_label("name")).to_have_value("cmp user renamed")
    expect(form.get_by_label("tags (comma-separated)")).to_have_value("paper, users")
    form.get_by_label("tags (comma-separated)").fill("ok, " + "x" * 41)
    form.get_by_role("button", name="Save").click()
    expect(form.locator(".annotation-tags .error")).to_have_text(
        f"tag 1 must be 1 to 40 characters after trimming, without commas; got '{'x' * 41}'"
    )
    expect(form.locator(".annotation-status")).to_have_text("not saved")
    httpx.patch(f"{server}/api/sweeps/{sweep_id}", json={"name": "cmp user", "tags": [], "notes": ""})


def test_a_sweeps_panel_shows_the_batches_its_runs_train_in(page: Page, server, sweeps):
    sweep_id = sweeps["record"]
    body = httpx.get(f"{server}/api/sweeps/{sweep_id}").json()
    [batch] = body["batches"]  # isrl_mbsgd at ε 1 and 8, seeds 0 and 1; fedavg alone
    assert len(batch["run_ids"]) == 4
    page.goto(f"/#/compare?sweeps={sweep_id}")
    batches = page.locator("section.sweep-panel .batches")
    expect(batches.locator("p")).to_have_text(
        "4 runs train in 1 batch (each batch in one worker task, one computation per round); 2 alone."
    )
    expect(batches.locator("li")).to_have_text(
        ["Batch 1 · isrl_mbsgd · 4 runs (ε 1, 8 · seeds 0, 1) · 4 succeeded"]
    )
    # a batched run's page says its training time is its share of the batch's
    page.goto(f"/#/runs/{batch['run_ids'][0]}")
    expect(page.locator(".duration")).to_contain_text("; trained in a batch of 4, training is its share)")
    page.goto(f"/#/compare?sweeps={sweeps['user']}")  # uldp_avg_w runs alone (its protocol)
    expect(batches.locator("p")).to_have_text(
        "Every run trains alone: no two share an algorithm that batches, "
        "its params, data, model and schedule."
    )


def test_a_sweep_can_be_archived_and_restored_from_its_panel(page: Page, server, sweeps):
    sweep_id = sweeps["record"]
    page.goto(f"/#/compare?sweeps={sweep_id}")
    panel = page.locator("section.sweep-panel")
    panel.get_by_role("button", name="Archive").click()
    expect(panel.get_by_role("button", name="Restore")).to_be_visible()
    item = page.locator(f".sweep-list li:has(input[value='{sweep_id}'])")
    expect(item).to_have_text("cmp record 6 runs (archived)")
    assert httpx.get(f"{server}/api/sweeps/{sweep_id}").json()["archived"] is True
    panel.get_by_role("button", name="Restore").click()
    expect(panel.get_by_role("button", name="Archive")).to_be_visible()
    expect(item).to_have_text("cmp record 6 runs")
    assert httpx.get(f"{server}/api/sweeps/{sweep_id}").json()["archived"] is False


def test_a_single_sweep_shows_its_parallel_coordinates_and_importance(page: Page, server, sweeps):
    sweep_id = sweeps["record"]
    page.goto(f"/#/compare?sweeps={sweep_id}")
    expect(page.locator("#chart-tradeoff .main-svg").first).to_be_visible(timeout=20_000)
    page.locator("#chart-importance").scroll_into_view_if_needed()  # drawn once scrolled to
    page.wait_for_function(  # importance may have no bar: this sweep varies only ε and the seed
        "() => document.getElementById('chart-parcoords')?.data?.length "
        "&& document.getElementById('chart-importance')?.layout?.meta?.importance",
        timeout=30_000,
    )
    assert page.evaluate("document.getElementById('chart-parcoords').data[0].type") == "parcoords"
    expected = httpx.get(f"{server}/api/sweeps/{sweep_id}/figures/importance").json()
    assert (
        page.evaluate("document.getElementById('chart-importance').layout.meta.importance")
        == (expected["layout"]["meta"]["importance"])
        == []  # ε and the seed are the sweep's axis and repetition, not hyperparameters
    )
    page.get_by_role("checkbox", name="cmp user").check()
    expect(page.locator("section.sweep-panel")).to_be_hidden()


def test_export_png_downloads_the_chart_with_its_subtitle(page: Page, sweeps):
    page.goto(f"/#/compare?sweeps={sweeps['record']}")
    wait_drawn(page, 1)
    subtitle = page.evaluate(f"{CHART}.layout.title.subtitle.text")
    assert subtitle == "digits · δ = 1e-5 · 2 rounds · rdp"
    with page.expect_download() as info:
        page.get_by_role("button", name="Export PNG").click()
    assert info.value.suggested_filename == "tradeoff.png"
    assert Path(info.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the PNG is rasterised from this SVG (Plotly.downloadImage → toImage): the subtitle is in it
    svg = page.evaluate(
        f"async () => decodeURIComponent(await Plotly.toImage({CHART}, "
        "{format: 'svg', width: 1200, height: 700}))"
    )
    assert subtitle in svg


def test_csv_and_json_export_the_points_of_a_view_of_several_sweeps(page: Page, sweeps):
    page.goto(f"/#/compare?sweeps={sweeps['record']},{sweeps['user']}&band=minmax")
    wait_drawn(page, 2)
    drawn = sorted((c[0], round(c[1], 9)) for c in mean_points(page))
    with page.expect_download() as info:
        page.get_by_role("button", name="Export CSV").click()
    assert info.value.suggested_filename == "compare-points.csv"
    table = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text())))
    private = [r for r in table if r["notion"] != "none"]
    assert sorted((r["algorithm"], round(float(r["epsilon"]), 9)) for r in private) == drawn
    assert {r["band"] for r in table} == {"minmax"} and {r["n"] for r in private} == {"2"}
    with page.expect_download() as info:
        page.get_by_role("button", name="Export JSON").click()
    rows = json.loads(Path(info.value.path()).read_text())
    assert [r["series"] for r in rows] == [r["series"] for r in table]


def page_width(page: Page) -> tuple[int, list[str]]:
    """The page's scroll width, and the first elements sticking out of a 390 px screen (to say why)."""
    return page.evaluate(
        """() => [document.scrollingElement.scrollWidth, [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > 390
              && !e.closest('.table-scroll, .js-plotly-plot'))
            .map(e => `${e.tagName}.${e.className}`).slice(0, 5)]"""
    )


def test_a_drawn_comparison_fits_a_phone_and_has_no_serious_accessibility_violations(browser, server, sweeps):
    context = browser.new_context(base_url=server, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.goto(f"/#/compare?sweeps={sweeps['record']},{sweeps['user']}")
        wait_drawn(page, 2)
        page.locator("table.points tbody tr").first.get_by_role("button").click()
        expect(page.locator("section.drilldown tbody tr")).to_have_count(2)
        page.wait_for_timeout(300)  # charts size themselves after the first draw
        width, wide = page_width(page)
        assert width <= 390, wide
        assert serious_violations(page) == []
        page.goto(f"/#/compare?sweeps={sweeps['record']}")
        expect(page.locator("section.sweep-panel .counts")).to_be_visible(timeout=20_000)
        page.locator("#chart-importance").scroll_into_view_if_needed()
        page.wait_for_function("() => document.getElementById('chart-importance')?.layout?.meta?.importance")
        width, wide = page_width(page)
        assert width <= 390, wide
        assert serious_violations(page) == []
    finally:
        context.close()


def test_a_line_search_run_is_hollow_named_off_the_frontier_and_hidden_by_the_toggle(page: Page, server):
    from tests.browser.conftest import wait_finished

    base = {
        "algorithm": "gdp_localnewton",
        # standardised with no statistics of the training rows: the fixed-step run is guaranteed
        "dataset": {"name": "breast_cancer", "silos": 4, "options": {"standardise": "none"}},
        "model": {"name": "logreg"},
        "rounds": 2,
        "privacy": {"mu": 2.0, "delta": 1e-5, "accountant": "gdp"},
    }
    fixed = create_run(server, base | {"params": {"step": "fixed"}})
    searched = create_run(
        server, base | {"params": {"step": "line_search"}, "privacy": base["privacy"] | {"mu": 1.0}}
    )
    for run_id in (fixed, searched):
        assert wait_finished(server, run_id)["status"] == "succeeded"
    page.goto(f"/#/compare?runs={fixed},{searched}")
    page.wait_for_function(f"() => {CHART}?.data?.some(t => t.meta?.role === 'mean')", timeout=30_000)
    means = page.evaluate(
        f"{CHART}.data.filter(t => t.meta?.role === 'mean').map(t => ({{name: t.name, "
        "symbol: t.marker.symbol, hover: t.hovertext, ids: t.customdata.flatMap(c => c[2])}))"
    )
    (hollow,) = [m for m in means if searched in m["ids"]]
    (solid,) = [m for m in means if fixed in m["ids"]]
    assert hollow["name"].endswith("(not guaranteed)") and all(s.endswith("-open") for s in hollow["symbol"])
    assert "not guaranteed: " in hollow["hover"][0] and "line search" in hollow["hover"][0]
    assert not any(s.endswith("-open") for s in solid["symbol"])
    frontier = page.evaluate(
        f"{CHART}.data.filter(t => t.meta?.role === 'pareto').flatMap(t => t.customdata.flatMap(c => c[2]))"
    )
    assert searched not in frontier and fixed in frontier  # the searched run has the lower ε

    page.get_by_role("checkbox", name="hide not guaranteed").check()
    expect(page.locator(".not-guaranteed-hidden")).to_have_text(
        "1 run hidden: not guaranteed (their ledger does not cover every release)."
    )
    drawn = f"{CHART}.data.filter(t => t.meta?.role === 'mean').flatMap(t => t.customdata.flatMap(c => c[2]))"
    page.wait_for_function(f"() => {drawn}.join() === '{fixed}'")
    assert hash_params(page)["guaranteed"] == "1"


def _layout_facts(page: Page) -> dict:
    """Each panel's plot width in px and its ε axis title's box, and the legend's box."""
    return page.evaluate(
        f"""() => {{
          const c = {CHART}, full = c._fullLayout;
          const axes = Object.keys(full).filter(k => /^xaxis\\d*$/.test(k)).sort();
          const box = (el) => {{
            const r = el.getBoundingClientRect();
            return [r.left, r.top, r.right, r.bottom];
          }};
          return {{
            widths: axes.map(k => full[k]._length),
            titles: [...c.querySelectorAll("[class^='g-x'][class$='title'] text")].map(box),
            legend: c.querySelector(".legend") ? box(c.querySelector(".legend")) : null,
          }};
        }}"""
    )


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


AGENT = {
    "name": "cmp agent",
    "base": BASE
    | {
        "dataset": {"name": "breast_cancer", "silos": 10, "options": {"standardise": "none"}},
        "params": {"lr": 0.5, "batch_size": 16},
    },
    "grid": {"algorithm": ["dp_fedavg", "dp_fedsgd"], "privacy.epsilon": [1, 8], "seed": [0]},
}


@pytest.fixture(scope="module")
def agent_sweep(server) -> str:
    """A third sweep, on another dataset, in two more notions (agent- and instance-level DP)."""
    res = httpx.post(f"{server}/api/sweeps", json=AGENT, timeout=60)
    assert res.status_code == 201, res.text
    sweep_id = res.json()["id"]
    deadline = time.time() + 180
    while (counts := httpx.get(f"{server}/api/sweeps/{sweep_id}").json()["counts"]).get("succeeded", 0) < 4:
        assert counts.get("failed", 0) == 0 and time.time() < deadline, counts
        time.sleep(0.5)
    return sweep_id


def _panel_lines(page: Page) -> list[dict]:
    """Each panel's notion, the series drawn in it, whether it has a frontier, and its reference lines."""
    return page.evaluate(
        f"""() => {{
          const c = {CHART}, notions = c.layout.meta.notions;
          const panel = (ref) => Number((ref.match(/^x(\\d*)/)[1]) || 1) - 1;
          return notions.map((notion, i) => ({{
            notion,
            series: c.data.filter(t => t.meta?.role === "mean" && t.meta.notion === notion)
              .map(t => t.meta.series),
            frontier: c.data.some(t => t.meta?.role === "pareto" && t.meta.notion === notion),
            lines: (c.layout.shapes || []).filter(s => s.name && panel(s.xref) === i).map(s => s.name),
          }}));
        }}"""
    )


@pytest.mark.parametrize(
    ("width", "height", "name"), [(1440, 900, "compare-desktop"), (390, 844, "compare-phone")]
)
def test_the_panels_are_legible_on_a_desktop_and_a_phone(
    browser, server, sweeps, agent_sweep, width, height, name
):
    """3 sweeps over 4 notions and 2 datasets: no axis title overlaps another, every plot area is
    at least 300 px wide (stacked on the phone), and each panel's reference lines are its own
    datasets' only."""
    context = browser.new_context(base_url=server, viewport={"width": width, "height": height})
    try:
        page = context.new_page()
        page.goto(f"/#/compare?sweeps={sweeps['record']},{sweeps['user']},{agent_sweep}")
        wait_drawn(page, 4)
        page.wait_for_timeout(300)  # charts size themselves after the first draw
        facts = _layout_facts(page)
        assert len(facts["widths"]) == 4 and min(facts["widths"]) >= 300, facts
        titles = facts["titles"]
        assert len(titles) == 4, facts
        assert not [(a, b) for i, a in enumerate(titles) for b in titles[i + 1 :] if _overlap(a, b)], facts
        if width < 700:  # the legend under the plots, clear of the axis titles
            assert facts["legend"][1] >= max(t[3] for t in titles) - 1, facts
        panels = _panel_lines(page)
        assert [p["notion"] for p in panels] == ["record", "instance", "agent", "user"], panels
        for p in panels:
            datasets = {s.split(" · ")[1] for s in p["series"]}
            assert datasets == ({"breast_cancer"} if p["notion"] in ("instance", "agent") else {"digits"}), p
            drawn = {d for line in p["lines"] for d in ("digits", "breast_cancer") if d in line}
            assert drawn == datasets, p  # its own datasets' lines, and every one of them
            assert p["frontier"], p  # one dataset per panel, every run guaranteed
        shoot(page, name)
    finally:
        context.close()


def test_sigma_per_silo_reads_as_its_mean_and_range_not_a_raw_array(page: Page):
    page.goto("/")
    words = page.evaluate(
        """async () => {
          const m = await import("/js/pages/compare/drilldown.js");
          return [m.sigmaText(1.0811956543171695), m.sigmaText([1.5, 1.25, 1.0]), m.sigmaText(null)];
        }"""
    )
    one, many, none = words
    assert len(one) <= 6 and one.startswith("1.08"), one
    assert re.fullmatch(r"1\.25 \(per silo 1–1\.5\)", many), many
    assert none == "–"


def test_delta_reads_one_way_everywhere(page: Page):
    page.goto("/")
    written = page.evaluate(
        """async () => {
          const { deltaText } = await import("/js/dom.js");
          return [1e-5, 0.00001, 2.5e-6, 0.001, 0.0001, 0.5, null].map(deltaText);
        }"""
    )
    assert written == ["1e-5", "1e-5", "2.5e-6", "0.001", "0.0001", "0.5", "–"]  # as the figures' δ


def test_the_band_and_each_run_are_chosen_on_the_page_and_kept_in_the_url(page: Page, sweeps):
    page.goto(f"/#/compare?sweeps={sweeps['record']}")
    wait_drawn(page, 1)
    page.get_by_label("band").select_option("ci95")
    page.wait_for_function(f"() => {CHART}.data.some(t => t.meta?.role === 'band' && t.meta.band === 'ci95')")
    page.get_by_role("checkbox", name="each run").check()
    page.wait_for_function(f"() => {CHART}.data.some(t => t.meta?.role === 'run')")
    runs = page.evaluate(
        f"{CHART}.data.filter(t => t.meta?.role === 'run').flatMap(t => t.customdata.map(c => c[2][0]))"
    )
    assert len(runs) == 4  # isrl_mbsgd at ε 1 and 8, two seeds each; fedavg is the reference line
    assert {k: hash_params(page)[k] for k in ("band", "individual")} == {"band": "ci95", "individual": "1"}
    page.reload()
    wait_drawn(page, 1)
    expect(page.get_by_label("band")).to_have_value("ci95")


def test_a_field_that_varies_splits_the_series_until_the_user_averages_over_it(page: Page, server):
    body = {
        "name": "cmp lr",
        "base": BASE | {"algorithm": "isrl_mbsgd", "privacy": {"epsilon": 8, "delta": 1e-5}},
        "grid": {"params.lr": [0.05, 0.5]},
    }
    res = httpx.post(f"{server}/api/sweeps", json=body, timeout=60)
    assert res.status_code == 201, res.text
    sweep_id = res.json()["id"]
    deadline = time.time() + 120
    while httpx.get(f"{server}/api/sweeps/{sweep_id}").json()["counts"].get("succeeded", 0) < 2:
        assert time.time() < deadline
        time.sleep(0.5)
    page.goto(f"/#/compare?sweeps={sweep_id}")
    names = f"{CHART}.data.filter(t => t.meta?.role === 'mean').map(t => t.name).sort().join('|')"
    page.wait_for_function(
        f"() => {CHART}?.data && {names} === 'isrl_mbsgd · lr = 0.05|isrl_mbsgd · lr = 0.5'"
    )
    page.locator(".average-over").get_by_role("checkbox", name="params.lr").check()
    page.wait_for_function(f"() => {names} === 'isrl_mbsgd · averaged over lr'")
    assert hash_params(page)["average"] == "params.lr"
