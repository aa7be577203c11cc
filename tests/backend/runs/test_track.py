"""`dpfl.track` against a real server on a port, and without one (a file imported later)."""

from __future__ import annotations

import json

import dp_accounting
import httpx
import pytest

from backend.main import create_app
from dpfl import track
from dpfl.errors import SpecError
from dpfl.privacy.events import GaussianEvent
from tests.backend.served import serve

pytestmark = pytest.mark.service

STEPS = dp_accounting.SelfComposedDpEvent(
    dp_accounting.PoissonSampledDpEvent(0.02, dp_accounting.GaussianDpEvent(1.2)), 50
)
RUN = {"algorithm": "my dp-fedavg", "dataset": "adult", "notion": "record", "delta": 1e-5}


def expected_epsilon(rounds: int) -> float:
    """dp-accounting's RDP ε after `rounds` rounds: the larger of a client's (STEPS a round) and the
    server's (one Gaussian, σ = 5, a round); parties hold disjoint data, so the run's ε is the max."""
    client, server = dp_accounting.rdp.RdpAccountant(), dp_accounting.rdp.RdpAccountant()
    client.compose(STEPS, rounds)
    server.compose(dp_accounting.GaussianDpEvent(5.0), rounds)
    return max(client.get_epsilon(1e-5), server.get_epsilon(1e-5))


def log(run: track.TrackedRun, rounds: int) -> list[dict]:
    return [
        run.log_round(
            r,
            accuracy=0.6 + r / 100,
            loss=0.9 / r,
            metrics={"train_loss": 0.8 / r},
            events={
                "client_0": STEPS,
                "client_1": [STEPS, dp_accounting.NoOpDpEvent()],
                "server": GaussianEvent(5.0),
            },
            reported_epsilon=0.1 * r,
        )
        for r in range(1, rounds + 1)
    ]


def test_a_loop_logs_its_rounds_to_a_server_that_recomputes_their_epsilon(settings):
    with serve(create_app(settings)) as url:
        with track.start_run(**RUN, server=url, params={"lr": 0.05}) as run:
            answers = log(run, 3)
        got = httpx.get(f"{url}/api/runs/{run.id}").json()
        ledger = httpx.get(f"{url}/api/runs/{run.id}/ledger").json()
    assert [a["epsilon"] for a in answers] == pytest.approx(
        [expected_epsilon(r) for r in (1, 2, 3)], abs=1e-6
    )
    assert (got["status"], got["source"], got["reported_epsilon"], got["current_round"]) == (
        "succeeded",
        "external",
        pytest.approx(0.3),
        3,
    )
    assert got["epsilon"] == pytest.approx(expected_epsilon(3), abs=1e-6)
    assert "smaller than 'rdp''s ε" in got["warning"]
    client = dp_accounting.rdp.RdpAccountant().compose(STEPS, 3)
    assert ledger["parties"]["client_1"][-1] == pytest.approx(client.get_epsilon(1e-5), abs=1e-6)


def test_an_exception_in_the_loop_ends_the_run_failed(settings):
    with serve(create_app(settings)) as url:
        with pytest.raises(RuntimeError), track.start_run(**RUN, server=url) as run:
            log(run, 1)
            raise RuntimeError("out of memory")
        got = httpx.get(f"{url}/api/runs/{run.id}").json()
    assert (got["status"], got["error"], got["current_round"]) == ("failed", "RuntimeError: out of memory", 1)


def test_a_bad_value_fails_in_the_loop_naming_the_field_and_sends_nothing(settings):
    with serve(create_app(settings)) as url:
        run = track.start_run(**RUN, server=url)
        with pytest.raises(SpecError) as caught:
            run.log_round(1, events={"client_0": {"kind": "gaussian", "noise_multiplier": -1.0}})
        assert (
            str(caught.value) == "`events.client_0.0.noise_multiplier` must be a finite number > 0; got -1.0."
        )
        assert httpx.get(f"{url}/api/runs/{run.id}/metrics").json() == []
        run.finish()


def test_a_server_with_tokens_refuses_a_run_without_one(settings):
    with serve(create_app(settings.model_copy(update={"api_tokens": "s3cret"}))) as url:
        with pytest.raises(track.TrackingError) as caught:
            track.start_run(**RUN, server=url)
        assert str(caught.value) == (
            "the server answered 401: this server requires a bearer token for writes: "
            "send 'Authorization: Bearer <token>'"
        )
        with track.start_run(**RUN, server=url, token="s3cret") as run:
            log(run, 1)
        assert httpx.get(f"{url}/api/runs/{run.id}").json()["status"] == "succeeded"


def test_without_a_server_the_run_is_written_to_a_file_and_imported_later(settings, tmp_path):
    path = tmp_path / "run.json"
    with track.start_run(**RUN, path=path, reported_by="my loop") as run:
        log(run, 2)
        written = json.loads(path.read_text())
        assert [r["round"] for r in written["rounds"]] == [1, 2] and written["end"] is None
    written = json.loads(path.read_text())
    assert written["end"] == {"status": "succeeded"}
    assert written["rounds"][0]["events"]["client_1"] == [written["rounds"][0]["events"]["client_0"][0]]
    with serve(create_app(settings)) as url:
        got = track.upload(path, url)
        metrics = httpx.get(f"{url}/api/runs/{got['id']}/metrics").json()
    assert (got["status"], got["source"], got["rounds"]) == ("succeeded", "external", 2)
    assert got["epsilon"] == pytest.approx(expected_epsilon(2), abs=1e-6)
    assert [m["diagnostics"] for m in metrics] == [{"train_loss": 0.8}, {"train_loss": 0.4}]
