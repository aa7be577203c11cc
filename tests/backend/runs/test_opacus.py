"""An Opacus federation logged through `dpfl.adapters.opacus` to a real server (issue 45, item 3):
the dashboard's ε is dp-accounting's RDP ε of the engines' own histories, and the run sits on Compare
beside a native isrl_mbsgd sweep."""

from __future__ import annotations

import dp_accounting
import httpx
import numpy as np
import opacus
import pytest
import torch
from opacus import PrivacyEngine
from torch.utils.data import DataLoader, TensorDataset

from backend.main import create_app
from dpfl import track
from dpfl.adapters.opacus import OpacusLedger
from dpfl.data import load_dataset
from tests.backend.conftest import run_here
from tests.backend.served import serve
from tests.factories import service_spec

pytestmark = [
    pytest.mark.service,
    pytest.mark.slow,
    # Opacus's own notices: its RNG is not the cryptographic one (not needed to test accounting),
    # and a first layer's inputs need no gradient (its backward hook fires all the same)
    pytest.mark.filterwarnings("ignore:Secure RNG turned off", "ignore:Full backward hook is firing"),
]

DELTA = 1e-5
RECORDS = 100  # per client: 300 of digits' 1,437 training records in all
BATCH = 20  # Opacus's expected batch: q = 20/100 = 0.2, 5 steps an epoch
EPOCHS = 2  # local epochs a round: 10 steps
LR = 1.0
NOISE = {"client_0": 1.0, "client_1": 1.3, "client_2": 1.0}
ROUNDS = 3


def rdp_epsilon(history: list[tuple[float, float, int]]) -> float:
    """dp-accounting's RDP ε at δ of an Opacus history, composed here without our code."""
    accountant = dp_accounting.rdp.RdpAccountant()
    for noise_multiplier, sample_rate, count in history:
        accountant.compose(
            dp_accounting.PoissonSampledDpEvent(sample_rate, dp_accounting.GaussianDpEvent(noise_multiplier)),
            count,
        )
    return accountant.get_epsilon(DELTA)


class Client:
    """One client: its records, a linear model made private by its own PrivacyEngine (PRV, Opacus's
    default accountant) and two local epochs of DP-SGD a round."""

    def __init__(self, x: np.ndarray, y: np.ndarray, noise_multiplier: float):
        model = torch.nn.Linear(x.shape[1], 10)
        loader = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=BATCH)
        self.engine = PrivacyEngine(accountant="prv")
        self.model, self.optimizer, self.loader = self.engine.make_private(
            module=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=LR),
            data_loader=loader,
            noise_multiplier=noise_multiplier,
            max_grad_norm=1.0,
        )

    def train(self, weights: list[torch.Tensor]) -> list[torch.Tensor]:
        with torch.no_grad():
            for p, w in zip(self.model.parameters(), weights, strict=True):
                p.copy_(w)
        for _ in range(EPOCHS):
            for xb, yb in self.loader:
                self.optimizer.zero_grad()
                torch.nn.functional.cross_entropy(self.model(xb), yb).backward()
                self.optimizer.step()
        return [p.detach().clone() for p in self.model.parameters()]


@pytest.fixture
def native(settings) -> list[str]:
    """A small native isrl_mbsgd sweep on digits (ε 1 and 4, 3 rounds), run in this process."""
    with serve(create_app(settings)) as url:
        sweep = httpx.post(
            f"{url}/api/sweeps",
            json={"name": "native", "base": service_spec(), "grid": {"privacy.epsilon": [1, 4]}},
        ).json()
    for run_id in sweep["run_ids"]:
        run_here(settings, run_id)
    return sweep["run_ids"]


def test_an_opacus_federation_has_dp_accountings_rdp_epsilon_and_sits_on_compare(settings, native):
    torch.manual_seed(0)
    digits = load_dataset("digits")
    clients = {
        name: Client(
            digits.x_train[i * RECORDS : (i + 1) * RECORDS],
            digits.y_train[i * RECORDS : (i + 1) * RECORDS],
            sigma,
        )
        for i, (name, sigma) in enumerate(NOISE.items())
    }
    weights = [p.detach().clone() for p in clients["client_0"].model.parameters()]
    x_test, y_test = torch.from_numpy(digits.x_test), torch.from_numpy(digits.y_test)
    answers, histories, accuracies = [], [], []
    with serve(create_app(settings)) as url:
        with track.start_run(
            algorithm="opacus dp-fedavg",
            dataset="digits",
            delta=DELTA,
            params={"lr": LR, "clip": 1.0, "expected_batch": BATCH, "local_epochs": EPOCHS},
            rounds=ROUNDS,
            reported_by=f"opacus {opacus.__version__}, prv",
            server=url,
        ) as run:
            ledger = OpacusLedger(run)
            for r in range(1, ROUNDS + 1):
                if r == ROUNDS:  # client_2 adds noise in its last round: a second history entry
                    clients["client_2"].optimizer.noise_multiplier = 1.6
                trained = [c.train(weights) for c in clients.values()]
                weights = [torch.stack(ws).mean(0) for ws in zip(*trained, strict=True)]
                with torch.no_grad():
                    logits = torch.nn.functional.linear(x_test, weights[0], weights[1])
                accuracies.append((logits.argmax(1) == y_test).float().mean().item())
                engines = {name: c.engine for name, c in clients.items()}
                answers.append(ledger.log_round(r, engines, accuracy=accuracies[-1]))
                histories.append({name: list(c.engine.accountant.history) for name, c in clients.items()})
        got = httpx.get(f"{url}/api/runs/{run.id}").json()
        parties = httpx.get(f"{url}/api/runs/{run.id}/ledger").json()["parties"]
        metrics = httpx.get(f"{url}/api/runs/{run.id}/metrics").json()
        ids = ",".join([run.id, *native])
        figure = httpx.get(f"{url}/api/figures/tradeoff", params={"runs": ids}).json()
        points = httpx.get(f"{url}/api/figures/tradeoff/points", params={"runs": ids}).json()

    # Poisson sampling at q = 0.2: 5 steps an epoch, 10 a round
    assert histories[-1] == {
        "client_0": [(1.0, 0.2, 30)],
        "client_1": [(1.3, 0.2, 30)],
        "client_2": [(1.0, 0.2, 20), (1.6, 0.2, 10)],
    }
    expected = [max(rdp_epsilon(h) for h in round_histories.values()) for round_histories in histories]
    assert [a["epsilon"] for a in answers] == pytest.approx(expected, abs=1e-6)
    assert got["epsilon"] == pytest.approx(expected[-1], abs=1e-6)
    for name, history in histories[-1].items():
        assert parties[name][-1] == pytest.approx(rdp_epsilon(history), abs=1e-6)
    # Opacus's own ε (PRV) is shown beside ours
    prv = max(c.engine.get_epsilon(DELTA) for c in clients.values())
    assert (got["status"], got["source"], got["reported_epsilon"]) == (
        "succeeded",
        "external",
        pytest.approx(prv, rel=1e-12),
    )
    assert [m["accuracy"] for m in metrics] == pytest.approx(accuracies, rel=1e-12)
    assert accuracies[-1] > 0.5  # ten classes: a tenth by chance

    names = {t["name"] for t in figure["data"] if t["meta"]["role"] == "mean"}
    assert {"opacus dp-fedavg · external", "isrl_mbsgd"} <= names, names
    (mine,) = [p for p in points if p["series"] == "opacus dp-fedavg · external"]
    assert mine["epsilon"] == pytest.approx(expected[-1], abs=1e-6)
    assert len([p for p in points if p["series"] == "isrl_mbsgd"]) == 2
