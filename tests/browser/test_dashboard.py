"""The dashboard in a real Chromium against `dpfl up`: submit, watch, compare, cancel, errors."""

from __future__ import annotations

import os
import re
import time

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import SMALL_RUN, create_run, shoot, wait_finished

pytestmark = pytest.mark.browser

SMALL = {"rounds": "6", "dataset.silos": "4", "eval_every": "1"}


def fill_form(page: Page, values: dict[str, str]) -> None:
    for name, value in values.items():
        page.fill(f"[name='{name}']", value)


def wait_projection(page: Page, silos: int) -> None:
    """Waits until the projection answers the form as filled (its partition has `silos` silos), so a
    click does not race the chart's re-render; the last field is left first (its change event
    asks for one more projection)."""
    page.evaluate("() => document.activeElement?.blur()")
    page.wait_for_function(
        "n => { const c = document.getElementById('chart-partition-preview'); "
        "return c && c.data && c.data.length > 0 && c.data[0].x.length === n; }",
        arg=silos,
        timeout=60_000,
    )
    expect(page.locator(".projection")).to_contain_text("σ = ")


def wait_status(page: Page, statuses: str, timeout_s: float = 90) -> str:
    chip = page.locator("h1 .chip")
    expect(chip).to_have_text(re.compile(statuses), timeout=timeout_s * 1000)
    return chip.inner_text()


@pytest.mark.slow
def test_submit_a_run_from_the_form_and_watch_it_finish(page: Page, server):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    # long enough (several seconds) that the live progress bar must be seen between 0 and 100
    fill_form(page, SMALL | {"rounds": "300", "eval_every": "50"})
    wait_projection(page, silos=4)
    shoot(page, "new-run")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    seen = set()
    deadline = time.time() + 120
    while time.time() < deadline:
        seen.add(int(page.locator("[role=progressbar]").first.get_attribute("aria-valuenow")))
        if page.locator("h1 .chip").inner_text() in ("succeeded", "failed"):
            break
        time.sleep(0.2)
    assert wait_status(page, "succeeded") == "succeeded"
    assert page.locator("[role=progressbar]").first.get_attribute("aria-valuenow") == "100"
    assert len(seen - {0, 100}) >= 1, f"the progress bar never showed an intermediate value: {sorted(seen)}"
    # `dpfl up` with one worker gives its run every core
    threads = len(os.sched_getaffinity(0))
    expect(page.locator(".duration")).to_have_text(
        re.compile(
            r"^[\d.]+ s \(setup [\d.]+ s, training [\d.]+ s, evaluation [\d.]+ s; "
            + rf"{threads} torch threads?\)$"
        )
    )
    expect(page.locator("#chart-learning .main-svg").first).to_be_visible(timeout=20_000)
    expect(page.locator("#chart-epsilon .main-svg").first).to_be_visible()
    # what the ε rests on, and what is not private, are said on the page
    expect(page.locator(".noise-source")).to_have_text("simulation: seeded from the spec")
    expect(page.locator("ul.caveats li").first).to_contain_text("simulation: noise, sampling and")
    expect(page.locator("dl.diagnostics")).to_contain_text("train loss")
    expect(page.locator("dl.diagnostics")).to_contain_text("clip fraction")
    expect(page.get_by_role("heading", name="Diagnostics: not private")).to_be_visible()
    expect(page.locator(".ledger-eps")).to_contain_text("(rdp)")
    expect(page.locator("table.ledger td.releases").first).to_have_text(
        re.compile(r"^Poisson-sampled \(q = 0\.\d+\) Gaussian σ = \d+(\.\d+)?$")
    )
    page.select_option("select[name=accountant]", "gdp")
    expect(page.locator(".ledger-eps")).to_contain_text("(gdp)", timeout=20_000)
    # the CLT on Poisson-sampled releases is an approximation: labelled, never a plain ε
    expect(page.locator(".ledger-eps")).to_contain_text("— approximate, not the run's guarantee")
    expect(page.locator(".ledger-notes")).to_contain_text("GDP central limit theorem")
    assert "accountant=gdp" in page.url
    shoot(page, "run-detail")


def test_bad_field_shows_the_api_message_beside_it(page: Page):
    page.goto("/#/new")
    fill_form(page, {"rounds": "0"})
    page.click("button[type=submit]")
    field = page.locator(".field[data-field='rounds']")
    expect(field.locator(".error")).to_have_text("input should be greater than or equal to 1; got 0.")
    expect(field).to_have_class(re.compile("invalid"))
    expect(page.locator(".submit-error")).to_have_text(
        "Could not start run: rounds: input should be greater than or equal to 1; got 0."
    )


def test_sweep_draws_one_trace_per_algorithm_with_bands_and_the_url_reproduces_it(
    page: Page, server, browser
):
    page.goto("/#/new?mode=sweep")
    fill_form(page, SMALL | {"sweep.privacy.epsilon": "1, 8", "sweep.seed": "0, 1"})
    page.click("button[type=submit]")
    # the Compare page may already have written its view into the URL (`?log=1&sweeps=…`) by the
    # time the wait looks: either form names the new sweep
    page.wait_for_url(re.compile(r"#/compare\?(.*&)?sweeps?=[0-9a-f]+"))
    sweep = re.search(r"sweeps?=([0-9a-f]+)", page.url).group(1)
    deadline = time.time() + 180
    while time.time() < deadline:
        counts = httpx.get(f"{server}/api/sweeps/{sweep}/summary").json()["counts"]
        if counts["queued"] == counts["preparing"] == counts["running"] == 0:
            break
        time.sleep(1)
    assert counts["succeeded"] == 6, counts  # isrl_mbsgd at 2 ε × 2 seeds, fedavg once per seed
    page.wait_for_function(
        "() => { const c = document.getElementById('chart-tradeoff'); "
        "return c && c.data && c.data.some(t => t.meta && t.meta.role === 'band'); }",
        timeout=30_000,
    )
    roles = page.evaluate(
        "document.getElementById('chart-tradeoff').data.map(t => [t.meta?.role, t.meta?.algorithm])"
    )
    assert ["mean", "isrl_mbsgd"] in roles and ["band", "isrl_mbsgd"] in roles
    assert len([r for r in roles if r[0] == "mean"]) == 1  # one line per private algorithm
    assert page.evaluate("document.getElementById('chart-tradeoff').layout.xaxis.type") == "log"
    page.uncheck("input[name=log]")
    page.wait_for_function("() => document.getElementById('chart-tradeoff').layout.xaxis.type === 'linear'")
    shoot(page, "compare")
    link = page.url
    assert "log=0" in link
    other = browser.new_page(viewport={"width": 1400, "height": 900})
    other.goto(link)
    other.wait_for_function(
        "() => { const c = document.getElementById('chart-tradeoff'); return c && c.layout && "
        "c.layout.xaxis.type === 'linear' && c.data.length > 0; }",
        timeout=30_000,
    )
    checked = "[...document.querySelectorAll('input[name=sweep]:checked')].map(b => b.value)"
    assert other.evaluate(checked) == [sweep]
    other.close()


def test_cancel_a_running_run(page: Page, server):
    spec = {
        "algorithm": "isrl_mbsgd",
        "dataset": {"name": "digits", "silos": 4},
        "rounds": 1500,
        "eval_every": 50,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
    }
    run_id = create_run(server, spec)
    page.goto(f"/#/runs/{run_id}")
    wait_status(page, "running")
    # a run cancelled during its setup stops at round 0; cancel one that has rounds to keep
    expect(page.locator(".round")).to_have_text(re.compile(r"^round [1-9]\d* of 1500$"), timeout=60_000)
    page.click("button:has-text('Cancel')")
    assert wait_status(page, "cancelled") == "cancelled"
    body = httpx.get(f"{server}/api/runs/{run_id}").json()
    assert body["status"] == "cancelled" and 0 < body["current_round"] < 1500


def test_runs_and_budgets_pages(page: Page, server, small_runs):
    # not digits: a budget makes a dataset protected, and later tests read digits runs' diagnostics
    httpx.put(f"{server}/api/budgets/synthetic", json={"total_epsilon": 100.0})
    cancelled = create_run(server, SMALL_RUN | {"rounds": 500})
    assert httpx.post(f"{server}/api/runs/{cancelled}/cancel").status_code == 200
    assert wait_finished(server, cancelled)["status"] == "cancelled"
    page.goto("/#/runs")
    expect(page.locator("table.runs tbody tr").first).to_be_visible()
    expect(page.locator("table.runs .chip").first).to_be_visible()
    shoot(page, "runs")
    page.select_option("select[name=status]", "cancelled")
    cancelled = httpx.get(f"{server}/api/runs", params={"status": "cancelled", "limit": 25}).json()["items"]
    assert cancelled  # the run cancelled here, and those other tests cancelled
    expect(page.locator("table.runs tbody .chip[data-status]")).to_have_text(["cancelled"] * len(cancelled))
    assert "status=cancelled" in page.url
    page.goto("/#/budgets")
    expect(page.locator(".card[data-dataset='synthetic'] .remaining")).to_be_visible()
    shoot(page, "budgets")


def test_a_user_level_run_from_the_form_shows_its_users(page: Page, server):
    page.goto("/#/new")
    page.select_option("select[name=algorithm]", "uldp_avg_w")
    expect(page.locator("select[name='params.weighting']")).to_have_value("records")
    expect(page.locator("select[name='params.secure_weighting']")).to_have_value("false")
    page.select_option("select[name='model.name']", "logreg")
    page.select_option("select[name='dataset.users.kind']", "zipf")
    fill_form(
        page, SMALL | {"dataset.users.count": "20", "params.local_epochs": "1", "params.global_lr": "20"}
    )
    wait_projection(page, silos=4)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    assert wait_status(page, "succeeded|failed") == "succeeded"
    expect(page.locator("#chart-users .main-svg").first).to_be_visible(timeout=20_000)
    expect(page.locator("dd").filter(has_text="user-level")).to_be_visible()
    shoot(page, "run-detail-users")


def test_a_mu_target_from_the_form_runs_gdp_localnewton(page: Page, server):
    page.goto("/#/new")
    page.select_option("select[name=algorithm]", "gdp_localnewton")
    page.select_option("select[name='dataset.name']", "breast_cancer")
    page.select_option("select[name='model.name']", "logreg")
    page.check("input[name=target][value=mu]")
    expect(page.locator("select[name='privacy.accountant']")).to_have_value("gdp")
    fill_form(page, SMALL | {"privacy.mu": "2"})
    wait_projection(page, silos=4)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    assert wait_status(page, "succeeded|failed") == "succeeded"
    expect(page.locator("dd.eps")).to_contain_text("9.9")  # μ = 2 is ε = 9.997 at δ = 1e-5


def test_ledger_events_and_per_silo_noise_read_as_words(page: Page):
    page.goto("/")
    described = page.evaluate(
        """async () => {
          const m = await import("/js/pages/run-detail.js");
          const header = await import("/js/pages/run-header.js");
          const g = { kind: "gaussian", noise_multiplier: 1.5 };
          const sampled = { kind: "poisson_sampled", sampling_rate: 0.01, event: g };
          const approx = { kind: "approx_dp", epsilon: 1, delta: 1e-6 };
          return [
            m.describeEvent({ kind: "self_composed", count: 3, event: sampled }),
            m.describeEvent({ kind: "group", group_size: 4, event: { kind: "parallel", events: [g, g] } }),
            m.describeEvent({ kind: "composed", events: [{ kind: "gdp", mu: 0.5 }, approx] }),
            m.describeEvent({ kind: "vote", noise_std: 40, sensitivity: 1.4142, counts: null }),
            m.describeEvent({ kind: "shuffle", local_epsilon: 2, num_users: 100 }),
            m.describeEvent({ kind: "new_kind", x: 1 }),
            header.noiseMultiplier([1.5727, 1.5749, 1.5749]),
            header.noiseMultiplier([2, 2]),
            header.noiseMultiplier(0.9187),
          ];
        }"""
    )
    assert described == [
        "3 × Poisson-sampled (q = 0.01) Gaussian σ = 1.5",
        "group of 4: parallel over 2 disjoint parts: Gaussian σ = 1.5",
        "0.5-GDP + (1, 1e-6)-DP release",  # δ written one way (deltaText)
        "noisy-argmax vote σ = 40, sensitivity 1.414",
        "shuffle of 100 reports, each ε₀ = 2",
        '{"kind":"new_kind","x":1}',
        "1.573–1.575 (per silo)",
        "2 (every silo)",
        "0.9187",
    ]


def test_audit_a_private_run_from_its_page(page: Page, server):
    spec = {
        "algorithm": "isrl_mbsgd",
        "dataset": {"name": "digits", "silos": 4},
        "rounds": 2,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
    }
    run_id = create_run(server, spec)
    page.goto(f"/#/runs/{run_id}")
    wait_status(page, "succeeded")
    expect(page.locator(".audit-status")).to_have_text("not audited")
    page.click("button.audit-button")
    lines = page.locator("ul.audit li")
    expect(lines).to_have_count(5, timeout=180_000)  # one release per silo, and the black box
    *releases, black = lines.all_inner_texts()
    for text in releases:
        assert re.fullmatch(r"silo-\d: audited: ε ≥ [\d.]+ \(99 %\) — ledger ε [\d.]+ ✓", text), text
    # the Dirac canary sits in the last silo
    assert re.fullmatch(
        r"silo-3: black box, 2 rounds, 1,000 runs per side: TPR ≥ [\d.]+ at FPR ≤ [\d.]+ \(99 %\) — within "
        r"the ledger's profile ✓",
        black,
    ), black
    audit = httpx.get(f"{server}/api/runs/{run_id}/audit").json()
    assert audit["status"] == "succeeded" and (audit["trials"], audit["black_box_trials"]) == (
        1_000_000,
        1_000,
    )
    shoot(page, "run-detail-audit")

    verdict = page.evaluate(
        """async () => {
          const m = await import("/js/pages/run-detail.js");
          return m.auditVerdict({ release: "silo-0", epsilon_lower: 2.5, epsilon_ledger: 2.0,
                                  max_sensitivity_ratio: 1.5, sound: false });
        }"""
    )
    assert verdict == (
        "audited: ε ≥ 2.5 (95 %) — ledger ε 2 ✗ (a neighbour moves it 1.5 × the claimed sensitivity; "
        "the lower bound exceeds the ledger's ε)"
    )
    inconclusive = page.evaluate(
        """async () => {
          const m = await import("/js/pages/run-detail.js");
          return m.auditVerdict({ release: "silo-0", epsilon_lower: 1.9, epsilon_lower_each: 2.05,
                                  epsilon_ledger: 2.0, max_sensitivity_ratio: 1.0, sound: true,
                                  verdict: "inconclusive" });
        }"""
    )
    assert inconclusive == (
        "audited: ε ≥ 1.9 (95 %) — ledger ε 2 ? (inconclusive: one test's bound 2.05 is above the "
        "ledger's ε; audit with more seeds)"
    )
