"""External runs (issue 45): described, appended round by round, ended or imported whole; their ε
recomputed from the events they report, equal to dp-accounting's RDP ε for the same history."""

from __future__ import annotations

import json

import dp_accounting
import pytest
from fastapi.testclient import TestClient

from backend.main import create_app
from backend.runs.external import REPORTED_CAVEAT

pytestmark = pytest.mark.service

DESCRIPTION = {
    "source": "external",
    "algorithm": "opacus dp-sgd",
    "dataset": "adult",
    "notion": "record",
    "delta": 1e-5,
    "params": {"lr": 0.1, "clip": 1.0},
    "reported_by": "opacus 1.5, prv",
}
# one client's round: 20 DP-SGD steps on a Poisson sample of 5 % of its records, σ = 1.1
STEPS = {
    "kind": "self_composed",
    "count": 20,
    "event": {
        "kind": "poisson_sampled",
        "sampling_rate": 0.05,
        "event": {"kind": "gaussian", "noise_multiplier": 1.1},
    },
}
DPA_STEPS = dp_accounting.SelfComposedDpEvent(
    dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(1.1)), 20
)


def round_body(r: int, **extra) -> dict:
    return {
        "round": r,
        "accuracy": 0.5 + r / 100,
        "loss": 1.0 / r,
        "events": {"c0": [STEPS], "c1": [STEPS]},
    } | extra


def dpa_epsilons(rounds: int, delta: float = 1e-5) -> list[float]:
    """dp-accounting's RDP ε after each round of the same history (each client's is the same)."""
    accountant, out = dp_accounting.rdp.RdpAccountant(), []
    for _ in range(rounds):
        accountant.compose(DPA_STEPS)
        out.append(accountant.get_epsilon(delta))
    return out


def create(client, **changes) -> str:
    res = client.post("/api/runs", json=DESCRIPTION | changes)
    assert res.status_code == 201, res.text
    return res.json()["id"]


def test_an_appended_history_has_dp_accountings_rdp_epsilon_and_its_reported_one_beside(client):
    run_id = create(client)
    run = client.get(f"/api/runs/{run_id}").json()
    assert (run["source"], run["status"], run["algorithm"], run["dataset"]) == (
        "external",
        "running",
        "opacus dp-sgd",
        "adult",
    )
    assert run["caveats"] == [{"kind": "reported", "text": REPORTED_CAVEAT, "breaks_guarantee": False}]
    expected = dpa_epsilons(5)
    for r in range(1, 6):
        res = client.post(f"/api/runs/{run_id}/rounds", json=round_body(r, reported_epsilon=0.5 * r))
        assert res.status_code == 201, res.text
        assert res.json()["epsilon"] == pytest.approx(expected[r - 1], abs=1e-6)
        assert res.json()["replayed"] is False
    metrics = client.get(f"/api/runs/{run_id}/metrics").json()
    assert [m["epsilon"] for m in metrics] == pytest.approx(expected, abs=1e-6)
    assert metrics[-1]["accuracy"] == 0.55
    # the tool's 2.5 is below RDP's 3.31 for the same releases: flagged
    res = client.post(f"/api/runs/{run_id}/finish", json={"status": "succeeded"})
    assert res.status_code == 200, res.text
    run = res.json()
    assert (run["status"], run["progress"], run["rounds"], run["reported_epsilon"]) == (
        "succeeded",
        1.0,
        5,
        2.5,
    )
    assert run["epsilon"] == pytest.approx(3.312208013803673, abs=1e-6)
    assert run["warning"] == (
        "the ε its tool reported (2.5) is smaller than 'rdp''s ε for the same releases (3.312): check its "
        "accounting (a tighter sound accountant such as pld may give less; see the ledger with another "
        "accountant)"
    )
    ledger = client.get(f"/api/runs/{run_id}/ledger").json()
    assert ledger["parties"]["c1"] == pytest.approx(expected, abs=1e-6)
    assert ledger["events"][0] == {"round": 1, "party": "c0", "events": [STEPS]}
    # a finished external run takes no more rounds, and is never audited
    assert client.post(f"/api/runs/{run_id}/rounds", json=round_body(6)).json() == {
        "detail": f"run {run_id!r} is succeeded; a finished run takes no more rounds",
        "error": "Conflict",
    }
    res = client.post(f"/api/runs/{run_id}/audit", json={})
    assert res.status_code == 409
    assert "executed outside this server (ledger as reported)" in res.json()["detail"]


def test_a_reported_epsilon_at_least_ours_is_not_flagged(client):
    run_id = create(client, reported_epsilon=9.0)
    client.post(f"/api/runs/{run_id}/rounds", json=round_body(1))
    run = client.post(f"/api/runs/{run_id}/finish", json={"status": "succeeded"}).json()
    assert run["reported_epsilon"] == 9.0 and run["warning"] is None


def test_a_round_sent_again_is_stored_once_and_other_values_are_refused(client):
    run_id = create(client)
    first = client.post(f"/api/runs/{run_id}/rounds", json=round_body(1))
    again = client.post(f"/api/runs/{run_id}/rounds", json=round_body(1))
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json() | {"replayed": True}
    res = client.post(f"/api/runs/{run_id}/rounds", json=round_body(1, accuracy=0.9))
    assert res.status_code == 409
    assert res.json()["detail"] == (
        f"round 1 of run {run_id!r} was recorded with other metrics or events; a retry must send the "
        "same round, a new round a new number"
    )
    client.post(f"/api/runs/{run_id}/rounds", json=round_body(3))
    res = client.post(f"/api/runs/{run_id}/rounds", json=round_body(2))
    assert res.status_code == 409
    assert res.json()["detail"] == (
        f"round 2 of run {run_id!r} comes after round 3; rounds are appended in increasing order"
    )
    assert [m["round"] for m in client.get(f"/api/runs/{run_id}/metrics").json()] == [1, 3]


GAUSS = {"kind": "gaussian", "noise_multiplier": 1.0}


@pytest.mark.parametrize(
    ("body", "loc", "msg"),
    [
        (
            {"events": {"c0": [{"kind": "gausian", "noise_multiplier": 1.0}]}},
            ["events", "c0", "0", "kind"],
            "must be one of approx_dp, composed, gaussian, gdp, group, laplace, parallel, poisson_sampled, "
            "sampled_without_replacement, self_composed, shuffle, vote; got 'gausian'.",
        ),
        (
            {"events": {"c0": [GAUSS, {"kind": "gaussian", "noise_multiplier": -0.5}]}},
            ["events", "c0", "1", "noise_multiplier"],
            "must be a finite number > 0; got -0.5.",
        ),
        (
            {"events": {"c0": [{"kind": "poisson_sampled", "sampling_rate": 1.5, "event": GAUSS}]}},
            ["events", "c0", "0", "sampling_rate"],
            "must be in (0, 1]; got 1.5.",
        ),
        (
            {"events": {"c0": [{"kind": "poisson_sampled", "sampling_rate": 0, "event": GAUSS}]}},
            ["events", "c0", "0", "sampling_rate"],
            "must be in (0, 1]; got 0.",
        ),
        (
            {"events": {"c0": [{**STEPS, "event": {**STEPS["event"], "event": {"kind": "gaussian"}}}]}},
            ["events", "c0", "0", "event", "event", "noise_multiplier"],
            "is required in a 'gaussian' event.",
        ),
        ({"loss": "NaN"}, ["loss"], "input should be a finite number; got nan."),
        (
            {"metrics": {"train_loss": "Infinity"}},
            ["metrics", "train_loss"],
            "input should be a finite number; got inf.",
        ),
        ({"accuracy": 1.5}, ["accuracy"], "input should be less than or equal to 1; got 1.5."),
        ({"round": 0}, ["round"], "input should be greater than or equal to 1; got 0."),
    ],
)
def test_bad_round_input_is_422_naming_the_field_and_stores_nothing(client, body, loc, msg):
    run_id = create(client)
    # NaN and Infinity as JSON tokens (Python's json writes them; Starlette reads them)
    text = (
        json.dumps({"round": 1, "accuracy": 0.5} | body)
        .replace('"NaN"', "NaN")
        .replace('"Infinity"', "Infinity")
    )
    res = client.post(
        f"/api/runs/{run_id}/rounds", content=text, headers={"content-type": "application/json"}
    )
    assert res.status_code == 422, res.text
    assert res.json() == {
        "detail": [{"loc": ["body", *loc], "msg": msg, "type": "value_error"}],
        "error": "SpecError",
    }
    assert client.get(f"/api/runs/{run_id}/metrics").json() == []
    assert client.get(f"/api/runs/{run_id}/ledger").json()["events"] == []
    assert client.get(f"/api/runs/{run_id}").json()["current_round"] == 0


@pytest.mark.parametrize(
    ("change", "loc", "msg"),
    [
        ({"delta": None}, ["delta"], "is required for a private run (notion 'record'); give δ in (0, 1)."),
        (
            {"notion": "silo"},
            ["notion"],
            "input should be 'none', 'record', 'user', 'agent', 'instance' or 'gdp'; got 'silo'.",
        ),
        (
            {"accountant": "pate"},
            ["accountant"],
            "must be data-independent: 'pate' reads private data; use rdp or pld.",
        ),
        (
            {"reported_epsilon": -1.0},
            ["reported_epsilon"],
            "input should be greater than or equal to 0; got -1.0.",
        ),
        ({"colour": "red"}, ["colour"], "is not a known field."),
    ],
)
def test_a_bad_description_is_422_naming_the_field_and_adds_no_run(client, change, loc, msg):
    res = client.post("/api/runs", json={k: v for k, v in (DESCRIPTION | change).items() if v is not None})
    assert res.status_code == 422, res.text
    assert res.json()["detail"] == [{"loc": ["body", *loc], "msg": msg, "type": "value_error"}]
    assert client.get("/api/runs").json()["total"] == 0


def test_an_import_adds_the_whole_run_or_nothing_of_it(client):
    whole = {
        "run": DESCRIPTION,
        "rounds": [round_body(r) for r in (1, 2, 3)],
        "end": {"reported_epsilon": 2.0},
    }
    bad = whole | {
        "rounds": [round_body(1), round_body(2, events={"c0": [{"kind": "gaussian", "noise_multiplier": 0}]})]
    }
    res = client.post("/api/runs/import", json=bad)
    assert res.status_code == 422
    assert res.json()["detail"][0]["loc"] == ["body", "rounds", "1", "events", "c0", "0", "noise_multiplier"]
    assert client.get("/api/runs").json()["total"] == 0
    res = client.post("/api/runs/import", json=whole)
    assert res.status_code == 201, res.text
    run = res.json()
    assert (run["status"], run["source"], run["reported_epsilon"]) == ("succeeded", "external", 2.0)
    assert run["epsilon"] == pytest.approx(dpa_epsilons(3)[-1], abs=1e-6)
    metrics = client.get(f"/api/runs/{run['id']}/metrics").json()
    assert [m["epsilon"] for m in metrics] == pytest.approx(dpa_epsilons(3), abs=1e-6)


def test_only_external_runs_take_rounds_and_cancel_ends_one_at_once(client):
    native = client.post(
        "/api/runs",
        json={"algorithm": "fedavg", "dataset": {"name": "digits", "silos": 2}, "rounds": 1},
    ).json()["id"]
    res = client.post(f"/api/runs/{native}/rounds", json=round_body(1))
    assert res.status_code == 409 and "only external runs" in res.json()["detail"]
    run_id = create(client)
    assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
    assert client.post(f"/api/runs/{run_id}/rounds", json=round_body(1)).status_code == 409


def test_external_writes_need_a_token_when_tokens_are_set(settings):
    app = create_app(settings.model_copy(update={"api_tokens": "s3cret"}))
    with TestClient(app) as strict:
        assert strict.post("/api/runs", json=DESCRIPTION).status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        run_id = strict.post("/api/runs", json=DESCRIPTION, headers=auth).json()["id"]
        assert strict.post(f"/api/runs/{run_id}/rounds", json=round_body(1)).status_code == 401
        assert strict.post(f"/api/runs/{run_id}/finish", json={}).status_code == 401
        assert strict.post("/api/runs/import", json={"run": DESCRIPTION}).status_code == 401
        assert strict.post(f"/api/runs/{run_id}/rounds", json=round_body(1), headers=auth).status_code == 201


def test_compare_marks_an_external_run(client):
    run_id = create(client, algorithm="isrl_mbsgd")
    client.post(f"/api/runs/{run_id}/rounds", json=round_body(1))
    client.post(f"/api/runs/{run_id}/finish", json={})
    points = client.get("/api/figures/tradeoff/points", params={"runs": run_id}).json()
    assert [p["series"] for p in points] == ["isrl_mbsgd · external"]
