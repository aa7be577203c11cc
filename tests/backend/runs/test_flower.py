"""A Flower simulation logged through `dpfl.adapters.flower` to a real server (issue 45, item 3): a
3-round DP-FedAvg on digits with Flower's server-side DP wrapper, whose rounds, metrics and events
arrive, whose ε is dp-accounting's for a fixed-size sample without replacement (replace-one), and
whose reported ε sits beside ours."""

from __future__ import annotations

import logging

import dp_accounting
import flwr
import httpx
import numpy as np
import pytest
from flwr.client import ClientApp, NumPyClient
from flwr.common import Context
from flwr.server import ServerApp, ServerConfig
from flwr.server.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg
from flwr.simulation import run_simulation

from backend.main import create_app
from dpfl import track
from dpfl.adapters.flower import FlowerLedger
from dpfl.data import load_dataset
from tests.backend.served import serve

pytestmark = [pytest.mark.service, pytest.mark.slow]

DELTA = 1e-5
CLIENTS = 5  # supernodes, 60 of digits' training records each: 300 in all
SAMPLED = 3  # FedAvg samples 3 of the 5 without replacement each round
RECORDS = 60
NOISE = 0.8  # z: Flower adds N(0, (z·C/n)²) to the mean of clipped updates
CLIP = 1.0
ROUNDS = 3
LR, STEPS = 0.5, 10  # local full-batch gradient steps of softmax regression a round
# a small Ray: two CPUs, no dashboard, the smallest object store, one CPU a client
BACKEND = {
    "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
    "init_args": {
        "num_cpus": 2,
        "include_dashboard": False,
        "object_store_memory": 80 * 1024 * 1024,
        "log_to_driver": False,
    },
}


def sound_epsilon(rounds: int) -> float:
    """dp-accounting's RDP ε of `rounds` rounds, composed here without our code: a fixed-size sample of
    3 of 5 clients without replacement, each round a Gaussian of σ = z/2 (replace-one sensitivity 2C/n
    against noise z·C/n), under the replace-one relation that event's bound holds for."""
    accountant = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    event = dp_accounting.SampledWithoutReplacementDpEvent(
        CLIENTS, SAMPLED, dp_accounting.GaussianDpEvent(NOISE / 2)
    )
    accountant.compose(event, rounds)
    return accountant.get_epsilon(DELTA)


def naive_epsilon(rounds: int) -> float:
    """The ε a Flower user often prints: Poisson amplification at q = m/N of a Gaussian of σ = z, under
    add-or-remove; neither holds for Flower's fixed-size sample and mean of m updates."""
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(SAMPLED / CLIENTS, dp_accounting.GaussianDpEvent(NOISE)), rounds
    )
    return accountant.get_epsilon(DELTA)


def softmax_regression(digits):
    """Returns the ClientApp and the centralised evaluation of a softmax regression on digits."""

    def loss_and_grad(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray):
        logits = x @ w + b
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        p[np.arange(len(y)), y] -= 1
        return loss, x.T @ p / len(y), p.mean(0)

    class Client(NumPyClient):
        def __init__(self, x: np.ndarray, y: np.ndarray):
            self.x, self.y = x, y

        def fit(self, parameters, config):
            w, b = (p.copy() for p in parameters)
            for _ in range(STEPS):
                _, gw, gb = loss_and_grad(w, b, self.x, self.y)
                w -= LR * gw
                b -= LR * gb
            return [w, b], RECORDS, {"train_loss": float(loss_and_grad(w, b, self.x, self.y)[0])}

        def evaluate(self, parameters, config):
            w, b = parameters
            loss, _, _ = loss_and_grad(w, b, self.x, self.y)
            accuracy = float(((self.x @ w + b).argmax(1) == self.y).mean())
            return float(loss), RECORDS, {"accuracy": accuracy}

    def client_fn(context: Context):
        i = int(context.node_config["partition-id"])
        part = slice(i * RECORDS, (i + 1) * RECORDS)
        return Client(digits.x_train[part].astype(np.float64), digits.y_train[part]).to_client()

    def evaluate(server_round, parameters, config):
        w, b = parameters
        loss, _, _ = loss_and_grad(w, b, digits.x_test, digits.y_test)
        return float(loss), {"accuracy": float(((digits.x_test @ w + b).argmax(1) == digits.y_test).mean())}

    return ClientApp(client_fn=client_fn), evaluate


def weighted_accuracy(metrics):
    total = sum(n for n, _ in metrics)
    return {"accuracy": sum(n * m["accuracy"] for n, m in metrics) / total}


def test_a_flower_simulation_with_a_dp_strategy_logs_its_rounds_metrics_and_events(settings):
    np.random.seed(0)  # Flower's DP noise and client sampling draw from numpy's and random's globals
    digits = load_dataset("digits")
    client_app, evaluate = softmax_regression(digits)
    fedavg = FedAvg(
        fraction_fit=SAMPLED / CLIENTS,
        min_fit_clients=SAMPLED,
        fraction_evaluate=0.4,
        min_evaluate_clients=2,
        min_available_clients=CLIENTS,
        evaluate_fn=evaluate,
        initial_parameters=flwr.common.ndarrays_to_parameters(
            [np.zeros((digits.x_train.shape[1], 10)), np.zeros(10)]
        ),
        evaluate_metrics_aggregation_fn=weighted_accuracy,
        fit_metrics_aggregation_fn=lambda m: {"train_loss": float(np.mean([x["train_loss"] for _, x in m]))},
    )
    dp = DifferentialPrivacyServerSideFixedClipping(
        fedavg, noise_multiplier=NOISE, clipping_norm=CLIP, num_sampled_clients=SAMPLED
    )
    with serve(create_app(settings)) as url:
        with track.start_run(
            algorithm="dp-fedavg (flower)",
            dataset="digits",
            notion="agent",
            delta=DELTA,
            params={"noise_multiplier": NOISE, "clipping_norm": CLIP, "clients": CLIENTS, "sampled": SAMPLED},
            rounds=ROUNDS,
            reported_by=f"flower {flwr.__version__}, poisson rdp at q = m/N",
            server=url,
        ) as run:
            strategy = FlowerLedger(dp, run, reported_epsilon=naive_epsilon)
            run_simulation(
                server_app=ServerApp(config=ServerConfig(num_rounds=ROUNDS), strategy=strategy),
                client_app=client_app,
                num_supernodes=CLIENTS,
                backend_config=BACKEND,
            )
            strategy.flush()
        got = httpx.get(f"{url}/api/runs/{run.id}").json()
        ledger = httpx.get(f"{url}/api/runs/{run.id}/ledger").json()
        metrics = httpx.get(f"{url}/api/runs/{run.id}/metrics").json()
    logging.getLogger("flwr").handlers.clear()  # Flower's console handler outlives the simulation

    answers = strategy.logged
    assert [a["round"] for a in answers] == [1, 2, 3]
    expected = [sound_epsilon(r) for r in (1, 2, 3)]
    assert [a["epsilon"] for a in answers] == pytest.approx(expected, abs=1e-6)
    assert got["epsilon"] == pytest.approx(expected[-1], abs=1e-6)
    assert ledger["parties"]["server"][-1] == pytest.approx(expected[-1], abs=1e-6)
    release = {
        "kind": "sampled_without_replacement",
        "population_size": CLIENTS,
        "sample_size": SAMPLED,
        "event": {"kind": "gaussian", "noise_multiplier": pytest.approx(NOISE / 2, rel=1e-12)},
    }
    assert ledger["events"] == [{"round": r, "party": "server", "events": [release]} for r in (1, 2, 3)]
    # the reported ε (Poisson at q = 3/5, σ = z) is below the sound one: shown beside ours, flagged
    assert (got["status"], got["source"], got["notion"]) == ("succeeded", "external", "agent")
    assert got["reported_epsilon"] == pytest.approx(naive_epsilon(ROUNDS), rel=1e-12)
    assert got["reported_epsilon"] < got["epsilon"]
    assert [m["round"] for m in metrics] == [1, 2, 3]
    for m in metrics:  # the clients' evaluation (accuracy, loss); the rest, as reported, with diagnostics
        assert 0 <= m["accuracy"] <= 1 and np.isfinite(m["loss"])
        assert {"fit.train_loss", "evaluate.accuracy", "server.accuracy", "server.loss"} <= set(
            m["diagnostics"]
        )
    print(f"ε ours {got['epsilon']:.6f}, reported {got['reported_epsilon']:.6f}")
