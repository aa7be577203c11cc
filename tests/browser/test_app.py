"""What every page shares: titles, the API page offline, how Plotly is served and loaded, the
layout on a phone, and the automated accessibility check."""

from __future__ import annotations

import gzip
import re
from urllib.parse import urlparse

import httpx
import pytest
from playwright.sync_api import Page, expect

from backend.assets import PLOTLY_FILE, PLOTLY_URL
from tests.backend.test_plotly_bundle import bundled_trace_types
from tests.browser.axe import serious_violations

pytestmark = pytest.mark.browser


def pages(small_runs) -> dict[str, str]:
    """Each page of the app: its hash, and what shows once it has loaded."""
    return {
        "runs": ("#/runs", "table.runs tbody tr"),
        "new": ("#/new", ".projection-state:text-is('')"),
        "compare": ("#/compare", "h1"),
        "budgets": ("#/budgets", ".budget-form"),
        "run": (f"#/runs/{small_runs['voting']}", "table.ledger tbody tr"),
    }


def open_page(page: Page, hash_: str, ready: str) -> None:
    page.goto(f"/{hash_}")
    expect(page.locator(ready).first).to_be_attached(timeout=30_000)


def test_every_page_has_its_own_title(page: Page, small_runs):
    expected = {
        "#/runs": "Runs — DP-FL Explorer",
        "#/new": "New run — DP-FL Explorer",
        "#/new?mode=sweep": "New sweep — DP-FL Explorer",
        "#/compare": "Compare — DP-FL Explorer",
        "#/budgets": "Budgets — DP-FL Explorer",
        f"#/runs/{small_runs['small']}": "isrl_mbsgd on digits · succeeded — DP-FL Explorer",
    }
    for hash_, title in expected.items():
        page.goto(f"/{hash_}")
        expect(page).to_have_title(title)


def test_a_render_overtaken_by_a_later_route_draws_nothing_and_keeps_its_title_to_itself(page: Page, server):
    held = []  # the New run page's request for the algorithms, answered only after the user has left
    page.route("**/api/algorithms", lambda route: held.append(route))
    with page.expect_request("**/api/algorithms"):
        page.goto("/#/new")
    page.evaluate("location.hash = '#/budgets'")
    expect(page).to_have_title("Budgets — DP-FL Explorer")
    assert len(held) == 1
    with page.expect_response("**/api/algorithms"):
        held[0].continue_()
    page.unroute("**/api/algorithms")
    page.wait_for_timeout(500)  # the overtaken render, its last answer in, draws within this
    expect(page).to_have_title("Budgets — DP-FL Explorer")
    expect(page.locator("h1")).to_have_text(["Privacy budgets"])


def test_a_runs_list_answered_after_the_user_left_keeps_the_new_pages_url(page: Page, server):
    held = []  # the Runs page's list request, answered only once the user is on New sweep
    page.route("**/api/runs?*", lambda route: held.append(route))
    with page.expect_request("**/api/runs?*"):
        page.goto("/#/runs")
    page.evaluate("location.hash = '#/new?mode=sweep'")
    expect(page).to_have_title("New sweep — DP-FL Explorer")
    with page.expect_response("**/api/runs?*"):
        held[0].continue_()
    page.unroute("**/api/runs?*")
    page.wait_for_timeout(500)  # the overtaken list draws within this
    assert page.evaluate("location.hash") == "#/new?mode=sweep"
    expect(page).to_have_title("New sweep — DP-FL Explorer")


def test_api_page_references_no_other_host_and_its_assets_answer(server):
    html = httpx.get(f"{server}/docs").text
    urls = re.findall(r"""(?:src|href)=["']([^"']+)""", html)
    assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    for url in urls:
        assert httpx.get(f"{server}{url}").status_code == 200, url
    assert httpx.get(f"{server}/redoc").status_code == 404  # ReDoc exists only on a CDN


def test_api_page_renders_with_other_hosts_blocked(page: Page, server):
    own = urlparse(server).netloc
    outside: list[str] = []

    def only_own_host(route):
        if urlparse(route.request.url).netloc == own:
            return route.continue_()
        outside.append(route.request.url)
        return route.abort()

    page.route("**/*", only_own_host)
    page.goto("/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=20_000)
    expect(page.locator(".opblock-summary-path", has_text="/api/runs").first).to_be_visible()
    assert outside == []


def test_plotly_is_served_gzip_with_a_long_cache_at_a_versioned_url(server):
    res = httpx.get(f"{server}/vendor/plotly.min.js", follow_redirects=False)
    assert (res.status_code, res.headers["location"]) == (307, PLOTLY_URL)
    with httpx.stream("GET", f"{server}{PLOTLY_URL}", headers={"accept-encoding": "gzip"}) as res:
        raw = b"".join(res.iter_raw())  # as sent, not decoded
        assert res.status_code == 200
        assert res.headers["content-encoding"] == "gzip"
        assert res.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert res.headers["content-type"].startswith("text/javascript")
    assert len(raw) < 500_000  # 1.4 MB uncompressed
    assert gzip.decompress(raw) == PLOTLY_FILE.read_bytes()
    plain = httpx.get(f"{server}{PLOTLY_URL}", headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == PLOTLY_FILE.read_bytes()


def test_the_served_plotly_knows_exactly_the_bundled_trace_types(page: Page, small_runs):
    page.goto(f"/#/runs/{small_runs['small']}")
    expect(page.locator("#chart-learning .main-svg").first).to_be_visible(timeout=20_000)
    traces = page.evaluate("Object.keys(Plotly.PlotSchema.get().traces).sort()")
    assert traces == sorted(bundled_trace_types())


def test_pages_without_charts_never_fetch_plotly_and_charts_still_draw(page: Page, small_runs):
    requested: list[str] = []
    page.on("request", lambda req: requested.append(req.url))
    open_page(page, "#/runs", "table.runs tbody tr")
    open_page(page, "#/budgets", ".budget-form")
    assert [u for u in requested if "plotly" in u] == []
    page.goto(f"/#/runs/{small_runs['small']}")
    expect(page.locator("#chart-learning .main-svg").first).to_be_visible(timeout=20_000)
    assert [urlparse(u).path for u in requested if "plotly" in u] == ["/vendor/plotly.min.js", PLOTLY_URL]


@pytest.mark.parametrize("name", ["runs", "new", "compare", "budgets", "run"])
def test_no_page_is_wider_than_a_phone(browser, server, small_runs, name):
    context = browser.new_context(base_url=server, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        open_page(page, *pages(small_runs)[name])
        page.wait_for_timeout(300)  # charts size themselves after the first draw
        width = page.evaluate("document.scrollingElement.scrollWidth")
        assert width <= 390, f"{name} is {width} px wide at 390 px"
    finally:
        context.close()


@pytest.mark.parametrize("name", ["runs", "new", "compare", "budgets", "run"])
def test_no_serious_accessibility_violations(page: Page, small_runs, name):
    open_page(page, *pages(small_runs)[name])
    assert serious_violations(page) == []
