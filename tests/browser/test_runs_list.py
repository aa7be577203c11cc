"""The runs list: runs created elsewhere appear, CSV export of every matching run, labelled
checkboxes and sortable headers a keyboard can use; chosen columns, search, tag and sweep
filters, archived runs, bulk archive, delete and tag."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import serious_violations
from tests.browser.conftest import SMALL_RUN, create_run, wait_finished

pytestmark = pytest.mark.browser


def test_a_run_created_elsewhere_appears_without_a_reload(page: Page, server, small_runs):
    page.goto("/#/runs")
    expect(page.locator("table.runs tbody tr[data-run]").first).to_be_visible(timeout=20_000)
    page.evaluate("window.sameDocument = true")
    run_id = create_run(server, SMALL_RUN)
    expect(page.locator(f"table.runs tr[data-run='{run_id}']")).to_be_visible()
    assert page.evaluate("window.sameDocument === true")
    wait_finished(server, run_id)


def test_export_csv_is_every_run_matching_the_filters_from_the_server(page: Page, server, small_runs):
    page.goto("/#/runs?status=succeeded")
    expect(page.locator("table.runs tbody tr[data-run]").first).to_be_visible(timeout=20_000)
    link = page.get_by_role("link", name="Export CSV")
    assert link.get_attribute("href") == "/api/runs.csv?status=succeeded&sort=-created_at"
    with page.expect_download() as info:
        link.click()
    sent = Path(info.value.path()).read_bytes()
    expected = httpx.get(f"{server}/api/runs.csv", params={"status": "succeeded", "sort": "-created_at"})
    assert sent == expected.content
    total = int(expected.headers["x-total-count"])
    assert total >= 2 and len(sent.splitlines()) == total + 1


def test_checkboxes_are_labelled_with_their_run(page: Page, small_runs):
    page.goto("/#/runs")
    rows = page.locator("table.runs tbody tr[data-run]")
    expect(rows.first).to_be_visible(timeout=20_000)
    labels = page.evaluate(
        """() => [...document.querySelectorAll("table.runs tbody tr[data-run]")]
                 .map(tr => [tr.dataset.run,
                             tr.querySelector("input[type=checkbox]").getAttribute("aria-label")])"""
    )
    assert labels and all(label == f"select run {run}" for run, label in labels)


def test_sortable_headers_are_buttons_with_aria_sort_and_an_arrow(page: Page, small_runs):
    page.goto("/#/runs")
    expect(page.locator("table.runs tbody tr[data-run]").first).to_be_visible(timeout=20_000)

    def sorts():
        return page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll("table.runs th[aria-sort]")]
                     .map(th => [th.querySelector("button").textContent, th.getAttribute("aria-sort")]))"""
        )

    assert sorts() == {
        "name": "none",
        "status": "none",
        "algorithm": "none",
        "dataset": "none",
        "ε target": "none",
        "ε spent": "none",
        "accuracy": "none",
        "duration": "none",
        "created ▼": "descending",
    }
    page.get_by_role("button", name="accuracy").focus()
    page.keyboard.press("Enter")
    expect(page.locator("th[aria-sort=descending]")).to_have_text("accuracy ▼")
    assert "sort=-final_accuracy" in page.url
    assert page.evaluate("document.activeElement.textContent") == "accuracy ▼"  # focus stays on it
    page.keyboard.press("Enter")
    expect(page.locator("th[aria-sort=ascending]")).to_have_text("accuracy ▲")
    assert "sort=final_accuracy" in page.url
    assert sorts()["created"] == "none"


def test_a_balanced_accuracy_column_shows_the_servers_value_and_sorts_by_it(page: Page, server, small_runs):
    run = httpx.get(f"{server}/api/runs/{small_runs['small']}").json()
    assert run["final_balanced_accuracy"] is not None
    page.goto(f"/#/runs?q={run['id']}&cols=name,final_accuracy,final_balanced_accuracy")
    cell = page.locator(f"tr[data-run='{run['id']}'] td[data-col='final_balanced_accuracy']")
    expect(cell).to_have_text(f"{run['final_balanced_accuracy']:.3g}", timeout=20_000)
    page.get_by_role("button", name="balanced accuracy").click()
    expect(page.locator("th[aria-sort=descending]")).to_have_text("balanced accuracy ▼")
    assert "sort=-final_balanced_accuracy" in page.url


def test_a_live_runs_balanced_accuracy_follows_its_events(page: Page, server):
    # long enough (evaluated at rounds 100 … 400) to be listed before it ends
    run_id = create_run(server, {**SMALL_RUN, "rounds": 400, "eval_every": 100})
    page.goto(f"/#/runs?q={run_id}&cols=status,final_accuracy,final_balanced_accuracy")
    row = page.locator(f"tr[data-run='{run_id}']")
    expect(row).to_be_visible()
    assert row.locator(".status .chip").inner_text() != "succeeded"  # listed live: events patch it
    expect(row.locator(".status .chip")).to_have_text("succeeded", timeout=120_000)
    run = httpx.get(f"{server}/api/runs/{run_id}").json()
    for column in ("final_accuracy", "final_balanced_accuracy"):
        expect(row.locator(f"td[data-col='{column}']")).to_have_text(f"{run[column]:.3g}")


ROWS = "table.runs tbody tr[data-run]"
SWEEP = {
    "name": "runs page sweep",
    "base": {**SMALL_RUN, "rounds": 1},
    "grid": {"seed": [0, 1]},
}
# a dataset with a budget: its runs spend it, so they cannot be deleted (not digits: later tests
# read digits runs' diagnostics, which a budget withholds)
BUDGET_RUN = {**SMALL_RUN, "dataset": {"name": "synthetic", "silos": 2}}


@pytest.fixture(scope="module")
def own_runs(server) -> list[str]:
    """Three finished runs of this module's own, which its tests rename, tag and archive."""
    ids = [create_run(server, SMALL_RUN) for _ in range(3)]
    for run_id in ids:
        assert wait_finished(server, run_id)["status"] == "succeeded"
    return ids


@pytest.fixture(scope="module")
def sweep(server) -> tuple[str, list[str]]:
    """A finished sweep of two one-round runs: its id and its run ids."""
    res = httpx.post(f"{server}/api/sweeps", json=SWEEP, timeout=60)
    assert res.status_code == 201, res.text
    body = res.json()
    for run_id in body["run_ids"]:
        assert wait_finished(server, run_id)["status"] == "succeeded"
    return body["id"], body["run_ids"]


def patch(server: str, run_id: str, **changes) -> dict:
    res = httpx.patch(f"{server}/api/runs/{run_id}", json=changes)
    assert res.status_code == 200, res.text
    return res.json()


def test_a_params_column_chosen_from_the_menu_survives_a_reload(page: Page, server, small_runs):
    # the two runs on one page, however many runs earlier tests made
    for run_id in small_runs.values():
        patch(server, run_id, tags=[*httpx.get(f"{server}/api/runs/{run_id}").json()["tags"], "columns"])
    page.goto("/#/runs?tag=columns")
    expect(page.locator(ROWS)).to_have_count(2, timeout=20_000)
    summary = page.locator("details.columns-menu summary")
    summary.focus()
    page.keyboard.press("Enter")  # the menu opens from the keyboard
    box = page.get_by_role("checkbox", name="params.queries")
    box.focus()
    page.keyboard.press("Space")
    header = page.locator("table.runs thead th", has_text="params.queries")
    expect(header).to_have_count(1)
    queries = "td[data-col='params.queries']"
    expect(page.locator(f"tr[data-run='{small_runs['voting']}'] {queries}")).to_have_text("20")
    expect(page.locator(f"tr[data-run='{small_runs['small']}'] {queries}")).to_have_text("–")
    assert "params.queries" in page.url
    assert page.evaluate("document.activeElement.value") == "params.queries"  # focus stays in the menu
    page.reload()
    expect(header).to_have_count(1, timeout=20_000)
    page.goto("/#/runs?tag=columns")  # no columns in the URL: this browser's last choice
    expect(page.locator(ROWS)).to_have_count(2, timeout=20_000)
    expect(header).to_have_count(1)
    summary.click()
    page.get_by_role("checkbox", name="params.queries").uncheck()
    expect(header).to_have_count(0)


def test_search_narrows_the_list_to_a_named_run(page: Page, server, own_runs):
    patch(server, own_runs[0], name="needle in the runs")
    page.goto("/#/runs")
    expect(page.locator(ROWS).first).to_be_visible(timeout=20_000)
    assert page.locator(ROWS).count() > 1
    page.get_by_role("searchbox", name="search").fill("NEEDLE in")
    expect(page.locator(ROWS)).to_have_count(1)
    expect(page.locator(ROWS)).to_have_attribute("data-run", own_runs[0])
    expect(page.locator(f"{ROWS} a").first).to_have_text("needle in the runs")
    assert "q=NEEDLE+in" in page.url
    page.reload()
    expect(page.locator(ROWS)).to_have_count(1, timeout=20_000)
    expect(page.get_by_role("searchbox", name="search")).to_have_value("NEEDLE in")


def test_a_filter_expression_narrows_the_list_survives_a_reload_and_says_what_is_wrong(page: Page, server):
    run_id = create_run(server, SMALL_RUN | {"params": {"lr": 0.25}})
    assert wait_finished(server, run_id)["status"] == "succeeded"
    page.goto("/#/runs")
    expect(page.locator(ROWS).first).to_be_visible(timeout=20_000)
    box = page.get_by_role("textbox", name="filter")
    box.fill("params.lr = 0.25 and epsilon > 0")
    box.press("Enter")
    expect(page.locator(ROWS)).to_have_count(1)
    expect(page.locator(ROWS)).to_have_attribute("data-run", run_id)
    assert "filter=params.lr" in page.url
    page.reload()
    expect(page.locator(ROWS)).to_have_count(1, timeout=20_000)
    expect(page.get_by_role("textbox", name="filter")).to_have_value("params.lr = 0.25 and epsilon > 0")
    box = page.get_by_role("textbox", name="filter")
    box.fill("epsilon <=")
    box.press("Enter")
    refused = "filter expected a value after epsilon <=; got the end."
    expect(page.locator("#filter-error")).to_have_text(refused)
    expect(box).to_have_attribute("aria-invalid", "")
    expect(page.locator("#banner")).to_be_hidden()  # beside the field, not a page error
    box.fill("")
    box.press("Enter")
    expect(page.locator("#filter-error")).to_have_text("")
    assert page.locator(ROWS).count() > 1


def test_a_tag_chip_filters_by_its_tag(page: Page, server, own_runs):
    patch(server, own_runs[1], tags=["chip-filter", "other"])
    page.goto("/#/runs")
    row = page.locator(f"tr[data-run='{own_runs[1]}']")
    expect(row).to_be_visible(timeout=20_000)
    row.get_by_role("button", name="filter by tag chip-filter").click()
    expect(page.locator(ROWS)).to_have_count(1)
    expect(page.locator(ROWS)).to_have_attribute("data-run", own_runs[1])
    assert "tag=chip-filter" in page.url
    link = page.get_by_role("link", name="Export CSV")
    assert link.get_attribute("href") == "/api/runs.csv?sort=-created_at&tag=chip-filter"
    row.get_by_role("button", name="filter by tag other").click()  # both tags: still that run
    expect(page.get_by_role("button", name="remove filter tag other")).to_be_visible()
    assert link.get_attribute("href") == "/api/runs.csv?sort=-created_at&tag=chip-filter&tag=other"
    expect(page.locator(ROWS)).to_have_count(1)
    page.get_by_role("button", name="remove filter tag other").click()
    remove = page.get_by_role("button", name="remove filter tag chip-filter")
    expect(remove).to_have_text("tag chip-filter ✕")
    remove.click()
    expect(page.locator(ROWS).nth(1)).to_be_visible()
    assert "tag=" not in page.url


def test_a_runs_sweep_cell_names_its_sweep_and_links_to_the_list_of_that_sweep(page: Page, sweep):
    sweep_id, run_ids = sweep
    page.goto("/#/runs")
    link = page.locator(f"tr[data-run='{run_ids[0]}'] td.sweep a")
    expect(link).to_have_text(SWEEP["name"], timeout=20_000)
    link.click()
    expect(page.locator(ROWS)).to_have_count(2)
    assert sorted(page.locator(ROWS).evaluate_all("rows => rows.map(r => r.dataset.run)")) == sorted(run_ids)
    assert page.url.endswith(f"sweep={sweep_id}") or f"sweep={sweep_id}&" in page.url
    compare = page.get_by_role("link", name="compare this sweep")
    assert compare.get_attribute("href") == f"#/compare?sweep={sweep_id}"


def test_archive_hides_a_run_and_show_archived_shows_it(page: Page, server, own_runs):
    run_id = own_runs[2]
    page.goto("/#/runs")
    row = page.locator(f"tr[data-run='{run_id}']")
    expect(row).to_be_visible(timeout=20_000)
    page.get_by_label(f"select run {run_id}").check()
    page.get_by_role("button", name="Archive selected").click()
    expect(page.locator(".bulk-result")).to_have_text("archived: 1 of 1 run")
    expect(row).to_have_count(0)
    assert httpx.get(f"{server}/api/runs/{run_id}").json()["archived"] is True
    page.get_by_label("show archived").check()
    expect(row.locator(".chip.archived")).to_have_text("archived")
    assert "archived=all" in page.url


def test_bulk_add_tag_tags_every_selected_run(page: Page, server, own_runs):
    page.goto("/#/runs")
    expect(page.locator(f"tr[data-run='{own_runs[0]}']")).to_be_visible(timeout=20_000)
    before = httpx.get(f"{server}/api/runs/{own_runs[0]}").json()["tags"]
    for run_id in own_runs[:2]:
        page.get_by_label(f"select run {run_id}").check()
    page.get_by_label("tag to add to the selected runs").fill("bulk-tagged")
    page.keyboard.press("Enter")
    expect(page.locator(".bulk-result")).to_have_text("tagged bulk-tagged: 2 of 2 runs")
    assert httpx.get(f"{server}/api/runs/{own_runs[0]}").json()["tags"] == [*before, "bulk-tagged"]
    assert "bulk-tagged" in httpx.get(f"{server}/api/runs/{own_runs[1]}").json()["tags"]
    expect(page.locator(f"tr[data-run='{own_runs[0]}'] .tag-chip", has_text="bulk-tagged")).to_have_count(1)


def test_bulk_delete_shows_each_refusal_and_deletes_a_finished_run(page: Page, server):
    httpx.put(f"{server}/api/budgets/synthetic", json={"total_epsilon": 100.0})
    spent, finished = create_run(server, BUDGET_RUN), create_run(server, SMALL_RUN)
    for run_id in (spent, finished):
        assert wait_finished(server, run_id)["status"] == "succeeded"
    refusal = httpx.delete(f"{server}/api/runs/{spent}")
    assert refusal.status_code == 409
    assert "so archive it instead (PATCH archived: true)" in refusal.json()["detail"]
    page.goto("/#/runs")
    expect(page.locator(f"tr[data-run='{spent}']")).to_be_visible(timeout=20_000)
    for run_id in (spent, finished):
        page.get_by_label(f"select run {run_id}").check()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete selected").click()
    expect(page.locator(".bulk-result p")).to_have_text("deleted: 1 of 2 runs")
    message = f"{spent[:8]}: {refusal.json()['detail']}"
    expect(page.locator(f".bulk-errors li[data-run='{spent}']")).to_have_text(message)
    expect(page.locator(f"tr[data-run='{finished}']")).to_have_count(0)
    assert httpx.get(f"{server}/api/runs/{finished}").status_code == 404
    assert httpx.get(f"{server}/api/runs/{spent}").status_code == 200


def test_the_new_controls_pass_axe_and_fit_a_phone(browser, server, small_runs, sweep):
    context = browser.new_context(base_url=server, viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        page.goto("/#/runs?cols=name,tags,sweep,params.queries")
        expect(page.locator(ROWS).first).to_be_visible(timeout=20_000)
        page.locator(f"tr[data-run='{sweep[1][0]}'] td.sweep a").click()
        expect(page.get_by_role("link", name="compare this sweep")).to_be_visible()
        page.locator("details.columns-menu summary").click()  # the columns stay the URL's
        expect(page.get_by_role("checkbox", name="params.queries")).to_be_checked()
        width = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width
        assert serious_violations(page) == []
    finally:
        context.close()


def test_a_named_view_saves_the_filter_and_columns_and_opens_them_again(page: Page, server, small_runs):
    page.goto("/#/runs?filter=rounds%20%3E%3D%201&cols=name,status,best_accuracy,final_loss")
    expect(page.locator("table.runs thead th", has_text="best accuracy")).to_have_count(1, timeout=20_000)
    expect(page.locator("table.runs thead th", has_text="loss")).to_have_count(1)
    page.locator("details.views-menu summary").click()
    page.fill("input[name=view-name]", "long runs")
    page.click("button:has-text('Save this view')")
    expect(page.locator(".views-said")).to_have_text("saved “long runs”.")
    page.goto("/#/runs")  # elsewhere: the default view
    expect(page.locator("input[name=filter]")).to_have_value("", timeout=20_000)
    page.locator("details.views-menu summary").click()
    page.locator(".views-list a", has_text="long runs").click()
    expect(page.locator("input[name=filter]")).to_have_value("rounds >= 1")
    expect(page.locator("table.runs thead th", has_text="best accuracy")).to_have_count(1)
    page.locator("details.views-menu summary").click()
    page.get_by_role("button", name="forget the view long runs").click()
    expect(page.locator(".views-list")).to_have_text("none saved yet")
