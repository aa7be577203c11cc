"""The new-run form: a clone keeps every field, errors are seen where the user is, the ε box,
the projection's state, values the browser refuses before asking the API, names from the
registries (GET /api/options, GET /api/algorithms), only the fields that matter shown, and an
algorithm's choice moving the model, dataset and users to ones it accepts."""

from __future__ import annotations

import json
import math
import re

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import serious_violations
from tests.browser.conftest import create_run

pytestmark = pytest.mark.browser

# Fields the form shows since the options come from GET /api/options: partition.min_size,
# users.zipf_alpha and main_silo_probability; fields it does not: the loader's options,
# privacy.noise_source.
RICH_SPEC = {
    "algorithm": "isrl_mbsgd",
    "params": {"lr": 0.3},
    "dataset": {
        "name": "logistic",
        "silos": 3,
        "partition": {"kind": "dirichlet", "alpha": 0.7, "min_size": 5},
        "users": {"kind": "zipf", "count": 30, "zipf_alpha": 1.5, "main_silo_probability": 0.6},
        "options": {"num_samples": 2000, "num_test": 500},
    },
    "model": {"name": "logreg"},
    "rounds": 1,
    "privacy": {"noise_multiplier": 1.5, "delta": 1e-5, "noise_source": "seeded"},
}


def spec(server: str, run_id: str) -> dict:
    return httpx.get(f"{server}/api/runs/{run_id}/spec").json()


def in_viewport(page: Page, selector: str) -> bool:
    return page.evaluate(
        """s => { const r = document.querySelector(s).getBoundingClientRect();
                  return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }""",
        selector,
    )


def test_a_clone_submitted_unchanged_has_the_identical_spec(page: Page, server):
    source = create_run(server, RICH_SPEC)
    page.goto(f"/#/new?from={source}")
    advanced = page.locator("textarea[name=advanced]")
    expect(advanced).not_to_have_value("", timeout=20_000)
    # the partition's and the users' options are real fields now; the rest stays in the box
    assert json.loads(advanced.input_value()) == {
        "dataset": {"options": {"num_samples": 2000, "num_test": 500}},
        "privacy": {"noise_source": "seeded"},
    }
    shown = {
        "dataset.partition.alpha": "0.7",
        "dataset.partition.min_size": "5",
        "dataset.users.count": "30",
        "dataset.users.zipf_alpha": "1.5",
        "dataset.users.main_silo_probability": "0.6",
    }
    for name, value in shown.items():
        expect(page.locator(f"[name='{name}']")).to_be_visible()
        expect(page.locator(f"[name='{name}']")).to_have_value(value)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    clone = page.url.rsplit("/", 1)[1]
    assert clone != source
    assert spec(server, clone) == spec(server, source)


def test_the_advanced_box_is_merged_and_its_errors_are_shown_beside_it(page: Page, server):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.click("details.advanced-settings summary")  # folded: most runs leave it empty
    page.fill("textarea[name=advanced]", "[1, 2]")
    page.click("button[type=submit]")
    error = page.locator(".field[data-field=advanced] .error")
    expect(error).to_have_text(
        'advanced fields must be a JSON object such as {"dataset": {"options": {}}}; got [1,2].'
    )
    page.fill("textarea[name=advanced]", '{"dataset": {"partition": {"min_size": 4}}, "rounds": 1}')
    expect(error).to_have_text("")
    page.select_option("select[name='dataset.partition.kind']", "dirichlet")  # a kind that takes min_size
    page.fill("[name='dataset.silos']", "2")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    made = spec(server, page.url.rsplit("/", 1)[1])
    assert (made["dataset"]["partition"]["min_size"], made["rounds"], made["dataset"]["silos"]) == (4, 1, 2)
    httpx.post(f"{server}/api/runs/{page.url.rsplit('/', 1)[1]}/cancel")


REFUSED_ROUNDS = "Could not start run: rounds: input should be greater than or equal to 1; got 0."


def test_a_refused_submit_shows_an_alert_beside_the_button_and_focuses_the_field(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("[name=rounds]", "0")
    page.click("button[type=submit]")
    alert = page.locator(".submit-error")
    # named there: on a phone the field is screens above the button
    expect(alert).to_have_text(REFUSED_ROUNDS)
    assert alert.get_attribute("role") == "alert"
    assert in_viewport(page, ".submit-error")
    assert page.evaluate("document.activeElement.name") == "rounds"
    expect(page.locator(".field[data-field=rounds] .error")).to_have_text(
        "input should be greater than or equal to 1; got 0."
    )


def test_hidden_layers_that_are_not_numbers_are_refused_beside_the_field(page: Page):
    posted: list[str] = []
    page.on("request", lambda r: r.method == "POST" and r.url.endswith("/api/runs") and posted.append(r.url))
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("[name='model.hidden']", "abc")
    page.click("button[type=submit]")
    expect(page.locator(".field[data-field='model.hidden'] .error")).to_have_text(
        'hidden layers must be positive integers separated by commas, e.g. 64, 32; got "abc".'
    )
    expect(page.locator(".submit-error")).to_have_text(
        "Could not start run: hidden layers: hidden layers must be positive integers separated by commas, "
        'e.g. 64, 32; got "abc".'
    )
    assert page.evaluate("document.activeElement.name") == "model.hidden"
    assert posted == []


def test_the_epsilon_box_and_the_slider_follow_each_other(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("[name='privacy.epsilon']", "8")
    expect(page.locator(".projection")).to_contain_text("projected ε = 8 at", timeout=30_000)
    slider = page.locator("[name=epsilon-slider]")
    assert slider.input_value() == str(round(1000 * math.log(8 / 0.1) / math.log(1000)))  # 634
    slider.fill("1000")
    expect(page.locator("[name='privacy.epsilon']")).to_have_value("100")
    expect(page.locator(".projection")).to_contain_text("projected ε = 100 at", timeout=30_000)


def test_the_projection_says_when_it_is_computing_and_stale(page: Page):
    page.goto("/#/new")
    projection = page.locator(".projection")
    expect(projection).to_contain_text("projected ε = 3", timeout=30_000)
    expect(page.locator(".projection-state")).to_have_text("")
    page.fill("[name='privacy.epsilon']", "5")
    expect(projection).to_have_attribute("aria-busy", "true")
    expect(projection).to_have_class(re.compile(r"\bstale\b"))
    expect(page.locator(".projection-state")).to_have_text("computing…")
    expect(projection).to_contain_text("projected ε = 5 at", timeout=30_000)
    expect(page.locator(".projection-state")).to_have_text("")
    expect(projection).not_to_have_attribute("aria-busy", "true")
    expect(projection).not_to_have_class(re.compile(r"\bstale\b"))


def test_an_answer_to_an_older_form_does_not_end_computing(page: Page):
    """The answer for ε = 4 arrives while ε = 8 waits out its 300 ms: it is dropped, and the page
    says "computing…" until the answer for ε = 8 (before, it showed ε = 4 beside a box reading 8)."""
    page.goto("/#/new")
    projection = page.locator(".projection")
    expect(projection).to_contain_text("projected ε = 3", timeout=30_000)
    held = []
    page.route("**/api/privacy/project", lambda route: held.append(route))

    def release() -> None:  # the projection request held last, once it is sent
        for _ in range(200):
            if held:
                held.pop().continue_()
                return
            page.wait_for_timeout(50)
        raise AssertionError("no projection was asked for in 10 s")

    page.fill("[name='privacy.epsilon']", "4")
    for _ in range(200):  # until ε = 4's request is held
        if held:
            break
        page.wait_for_timeout(50)
    page.fill("[name='privacy.epsilon']", "8")
    release()  # ε = 4's answer, inside ε = 8's 300 ms
    page.wait_for_timeout(100)
    expect(page.locator(".projection-state")).to_have_text("computing…")
    expect(projection).not_to_contain_text("projected ε = 4")
    release()
    expect(projection).to_contain_text("projected ε = 8 at", timeout=30_000)
    expect(page.locator(".projection-state")).to_have_text("")


def projected(page: Page, posted: list[dict]) -> dict:
    """Waits until the projection answers the form as it is; returns the spec it was asked for.
    Playwright may report the request after the page has drawn its answer: the spec is the last
    one posted once no more arrive for a while."""
    expect(page.locator(".projection-state")).to_have_text("", timeout=30_000)
    expect(page.locator(".projection")).not_to_have_class(re.compile(r"\bstale\b"))
    count = -1
    while count != len(posted):
        count = len(posted)
        page.wait_for_timeout(400)
    return posted[-1]


def record_projections(page: Page) -> list[dict]:
    """The specs the page posts to /api/privacy/project, in order."""
    posted: list[dict] = []
    page.on(
        "request",
        lambda r: r.url.endswith("/api/privacy/project") and posted.append(r.post_data_json),
    )
    return posted


def options_of(page: Page, name: str) -> list[str]:
    return page.eval_on_selector_all(f"select[name='{name}'] option", "os => os.map(o => o.value)")


def test_every_name_the_form_offers_comes_from_the_registries(page: Page, server):
    catalogue = httpx.get(f"{server}/api/options").json()
    algorithms = httpx.get(f"{server}/api/algorithms").json()
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    assert options_of(page, "privacy.accountant") == [a["name"] for a in catalogue["accountants"]]
    assert options_of(page, "dataset.partition.kind") == [k["name"] for k in catalogue["partition_kinds"]]
    assert options_of(page, "dataset.users.kind") == ["none"] + [k["name"] for k in catalogue["user_kinds"]]
    assert options_of(page, "model.name") == [m["name"] for m in catalogue["models"]]
    assert options_of(page, "algorithm") == [a["name"] for a in algorithms]
    # pate can never give the headline ε; gdp only for plans it accounts exactly
    pate = page.locator("select[name='privacy.accountant'] option[value=pate]")
    expect(pate).to_have_text("pate (never a headline: data-dependent)")
    expect(pate).to_be_disabled()
    gdp = page.locator("select[name='privacy.accountant'] option[value=gdp]")
    expect(gdp).to_have_text("gdp (only for plans it accounts exactly)")
    expect(gdp).to_be_enabled()
    expect(page.locator("select[name='privacy.accountant'] option[value=rdp]")).to_have_text("rdp")


def test_a_partition_kind_shows_and_sends_only_its_options(page: Page):
    posted = record_projections(page)
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    options = ["alpha", "labels_per_silo", "min_size"]
    field = {o: page.locator(f".field[data-field='dataset.partition.{o}']") for o in options}
    for o in options:
        expect(field[o]).to_be_hidden()
    assert projected(page, posted)["dataset"]["partition"] == {"kind": "iid"}
    page.select_option("select[name='dataset.partition.kind']", "dirichlet")
    expect(field["alpha"]).to_be_visible()
    expect(field["min_size"]).to_be_visible()
    expect(field["labels_per_silo"]).to_be_hidden()
    expect(page.locator("[name='dataset.partition.min_size']")).to_have_attribute("placeholder", "1")
    page.fill("[name='dataset.partition.min_size']", "3")
    assert projected(page, posted)["dataset"]["partition"] == {"kind": "dirichlet", "min_size": 3}
    page.select_option("select[name='dataset.partition.kind']", "shards")
    expect(field["labels_per_silo"]).to_be_visible()
    expect(field["min_size"]).to_be_hidden()
    # the hidden min_size keeps its value but is not sent
    assert projected(page, posted)["dataset"]["partition"] == {"kind": "shards"}


def test_only_the_fields_that_matter_are_shown_and_sent(page: Page):
    posted = record_projections(page)
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    users = ["count", "zipf_alpha", "silo_alpha", "main_silo_probability"]
    user_field = {o: page.locator(f".field[data-field='dataset.users.{o}']") for o in users}
    for o in users:
        expect(user_field[o]).to_be_hidden()
    page.select_option("select[name='dataset.users.kind']", "uniform")
    expect(user_field["count"]).to_be_visible()
    expect(user_field["silo_alpha"]).to_be_visible()
    expect(user_field["zipf_alpha"]).to_be_hidden()
    assert projected(page, posted)["dataset"]["users"] == {"kind": "uniform", "count": 100}
    page.select_option("select[name='dataset.users.kind']", "zipf")
    page.fill("[name='dataset.users.zipf_alpha']", "1.5")
    assert projected(page, posted)["dataset"]["users"] == {"kind": "zipf", "count": 100, "zipf_alpha": 1.5}
    page.select_option("select[name='dataset.users.kind']", "none")
    assert "users" not in projected(page, posted)["dataset"]
    # hidden layers for the mlp only
    expect(page.locator(".field[data-field='model.hidden']")).to_be_visible()
    page.select_option("select[name='model.name']", "logreg")
    expect(page.locator(".field[data-field='model.hidden']")).to_be_hidden()
    assert projected(page, posted)["model"] == {"name": "logreg"}
    # of ε, σ and μ only the target's box
    targets = ("epsilon", "noise_multiplier", "mu")
    target = {t: page.locator(f".field[data-field='privacy.{t}']") for t in targets}
    expect(target["epsilon"]).to_be_visible()
    expect(target["noise_multiplier"]).to_be_hidden()
    expect(target["mu"]).to_be_hidden()
    page.check("input[name=target][value=noise_multiplier]")
    expect(target["noise_multiplier"]).to_be_visible()
    expect(target["epsilon"]).to_be_hidden()
    privacy = projected(page, posted)["privacy"]
    assert (privacy["noise_multiplier"], "epsilon" in privacy, "mu" in privacy) == (1.0, False, False)
    # no privacy fieldset for an algorithm that is not private
    page.select_option("select[name=algorithm]", "fedavg")
    expect(page.locator("fieldset.privacy")).to_be_hidden()
    assert "privacy" not in projected(page, posted)
    expect(page.locator(".projection")).to_have_text("not private: no ε is spent")


def test_gdp_localnewton_switches_the_model_and_dataset_and_says_so(page: Page, server):
    algorithms = httpx.get(f"{server}/api/algorithms").json()
    algorithm = next(a for a in algorithms if a["name"] == "gdp_localnewton")
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.select_option("select[name=algorithm]", "gdp_localnewton")
    expect(page.locator("select[name='model.name']")).to_have_value("logreg")
    expect(page.locator("select[name='dataset.name']")).to_have_value("breast_cancer")
    expect(page.locator(".switched")).to_have_text(
        "model switched to logreg: gdp_localnewton needs it; dataset switched to breast_cancer: "
        f"gdp_localnewton takes only {', '.join(algorithm['datasets'])}"
    )
    expect(page.locator("select[name='model.name'] option[value=mlp]")).to_be_disabled()
    expect(page.locator("select[name='dataset.name'] option[value=digits]")).to_be_disabled()
    expect(page.locator(".projection")).to_contain_text("gdp-level", timeout=30_000)
    # an algorithm that takes the current choices changes nothing, and says nothing
    page.select_option("select[name=algorithm]", "fedavg")
    expect(page.locator(".switched")).to_have_text("")
    expect(page.locator("select[name='model.name']")).to_have_value("logreg")


def test_uldp_avg_sets_users(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.select_option("select[name=algorithm]", "uldp_avg")
    expect(page.locator("select[name='dataset.users.kind']")).to_have_value("uniform")
    expect(page.locator("[name='dataset.users.count']")).to_have_value("100")
    expect(page.locator(".switched")).to_have_text("users set to uniform (100 users): uldp_avg needs users")
    expect(page.locator("select[name='dataset.users.kind'] option[value=none]")).to_be_disabled()
    expect(page.locator(".projection")).to_contain_text("user-level", timeout=30_000)


def test_a_known_slow_setting_is_named_before_submit(page: Page):
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.select_option("select[name=algorithm]", "uldp_avg_w")
    expect(page.locator(".projection")).to_contain_text("user-level", timeout=30_000)
    expect(page.locator(".slow-warnings .slow-warning")).to_have_count(0)
    page.select_option("select[name='params.secure_weighting']", "true")
    expect(page.locator(".slow-warnings .slow-warning")).to_contain_text(
        "Slow: the private weighting protocol computes Paillier exponentiations", timeout=30_000
    )


def test_a_choice_that_breaks_the_guarantee_is_named_before_submit(page: Page):
    # issue 40: breast_cancer's loader standardises with the training rows' statistics
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    expect(page.locator(".slow-warnings .guarantee-warning")).to_have_count(0)
    page.select_option("select[name='dataset.name']", "breast_cancer")
    expect(page.locator(".slow-warnings .guarantee-warning")).to_have_text(
        "Not guaranteed: features standardised with the training rows' mean and standard deviation, "
        'without noise: not covered by the ledger; give dataset.options {"standardise": "none"} to fit '
        "nothing on the records; its ε would not bound what the run leaks.",
        timeout=30_000,
    )


# One algorithm per notion is submitted: each run is a real job for the shared worker.
SUBMITTED = {"isrl_mbsgd", "uldp_avg", "dp_fedavg", "dp_fedsgd", "gdp_gd", "fedavg"}


@pytest.mark.slow
def test_every_registered_algorithm_gets_valid_defaults_from_the_form(page: Page, server):
    algorithms = httpx.get(f"{server}/api/algorithms").json()
    assert {a["name"] for a in algorithms} >= SUBMITTED
    for algorithm in algorithms:
        page.goto(f"/#/new?walk={algorithm['name']}")
        expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
        page.select_option("select[name=algorithm]", algorithm["name"])
        # uldp_group's projection calibrates group-privacy curves on the whole accountant: 15–18 s
        # alone on a slow machine, past 30 s beside the other test workers (a CI run saw it)
        expect(page.locator(".projection-state")).to_have_text("", timeout=120_000)
        projection = page.locator(".projection")
        if algorithm["private"]:
            # a dataset another test budgeted adds what the run would leave of that budget
            level = rf"^σ = .*, {algorithm['notion']}-level\)( · budget: this run needs .* remaining on .+)?$"
            expect(projection).to_contain_text(re.compile(level))
        else:
            expect(projection).to_have_text("not private: no ε is spent")
        if algorithm["name"] in SUBMITTED:
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
            run_id = page.url.rsplit("/", 1)[1]
            assert httpx.get(f"{server}/api/runs/{run_id}/spec").json()["algorithm"] == algorithm["name"]
            httpx.post(f"{server}/api/runs/{run_id}/cancel")


def test_the_form_with_its_kind_options_shown_fits_a_phone_and_passes_axe(phone: Page):
    phone.goto("/#/new")
    expect(phone.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    phone.select_option("select[name=algorithm]", "uldp_avg")
    phone.select_option("select[name='dataset.partition.kind']", "dirichlet")
    phone.select_option("select[name='dataset.users.kind']", "zipf")
    expect(phone.locator("[name='dataset.users.main_silo_probability']")).to_be_visible()
    expect(phone.locator(".projection-state")).to_have_text("", timeout=30_000)
    assert phone.evaluate("document.scrollingElement.scrollWidth") <= 390
    assert serious_violations(phone) == []


def test_a_refused_submit_on_a_phone_names_the_field_where_it_is_read(phone: Page):
    phone.goto("/#/new")
    expect(phone.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    phone.fill("[name=rounds]", "0")
    phone.click("button[type=submit]")
    expect(phone.locator(".submit-error")).to_have_text(REFUSED_ROUNDS)
    assert in_viewport(phone, ".submit-error")  # the field itself is screens above


def test_a_double_click_on_start_run_creates_one_run(page: Page, server):
    before = httpx.get(f"{server}/api/runs", params={"limit": 1}).json()["total"]
    posts: list[dict] = []
    page.on(
        "request",
        lambda r: posts.append(r.headers) if r.method == "POST" and r.url.endswith("/api/runs") else None,
    )
    page.goto("/#/new")
    expect(page.locator(".projection")).to_contain_text("projected ε = 3", timeout=30_000)
    page.fill("[name=rounds]", "1")
    page.dblclick("button[type=submit]")
    page.wait_for_url(re.compile(r"#/runs/[0-9a-f]+$"))
    assert len(posts) == 1 and len(posts[0]["idempotency-key"]) == 32
    assert httpx.get(f"{server}/api/runs", params={"limit": 1}).json()["total"] == before + 1
    httpx.post(f"{server}/api/runs/{page.url.rsplit('/', 1)[1]}/cancel")
