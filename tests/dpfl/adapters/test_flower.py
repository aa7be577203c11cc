"""The Flower adapter without a simulation: each round's release as the event we account (replace-one,
a fixed-size sample without replacement), its hooks driven by hand, and the strategies it refuses."""

from __future__ import annotations

import json

import dp_accounting
import numpy as np
import pytest
from flwr.common import Code, FitRes, Status, ndarrays_to_parameters
from flwr.server.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    FedMedian,
)

from dpfl import track
from dpfl.adapters.flower import FlowerLedger, round_event
from dpfl.errors import SpecError
from dpfl.privacy.events import GaussianEvent, GDPEvent, SampledWithoutReplacementEvent, to_json
from dpfl.privacy.ledger import Ledger

RUN = {"algorithm": "dp-fedavg (flower)", "dataset": "digits", "notion": "agent", "delta": 1e-5}


def test_a_round_is_a_replace_one_gaussian_of_z_over_twice_the_largest_weight():
    # 3 of 10 sampled, equal sizes: Δ = 2C/3 against noise z·C/3, so σ = z/2
    assert round_event(
        noise_multiplier=1.2, num_sampled_clients=3, num_examples=[5, 5, 5], population=10
    ) == (SampledWithoutReplacementEvent(10, 3, GaussianEvent(0.6)))
    # unequal sizes: the largest FedAvg weight (1/2) sets Δ = 2C·½ = C, so σ = (z·C/3)/C = z/3
    uneven = round_event(noise_multiplier=1.2, num_sampled_clients=3, num_examples=[10, 5, 5], population=10)
    assert uneven.event.noise_multiplier == pytest.approx(0.4)
    # two of the three answered: Flower still divides the noise by 3, the mean by 2
    short = round_event(noise_multiplier=1.2, num_sampled_clients=3, num_examples=[5, 5], population=10)
    assert (short.sample_size, short.event.noise_multiplier) == (2, pytest.approx(0.4))
    # everyone, every round: nothing sampled, a replace-one Gaussian
    assert round_event(noise_multiplier=1.2, num_sampled_clients=4, num_examples=[1] * 4, population=4) == (
        GDPEvent(1 / 0.6, neighbouring="replace_one")
    )
    with pytest.raises(SpecError, match=r"^`strategy.noise_multiplier` is 0.0: a release without noise"):
        round_event(noise_multiplier=0.0, num_sampled_clients=3, num_examples=[1] * 3, population=5)


def test_our_epsilon_of_the_rounds_is_dp_accountings_for_sampling_without_replacement():
    event = round_event(noise_multiplier=1.0, num_sampled_clients=10, num_examples=[1] * 10, population=100)
    book = Ledger()
    for r in range(1, 21):
        book.record(r, "server", event)
    accountant = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    accountant.compose(
        dp_accounting.SampledWithoutReplacementDpEvent(100, 10, dp_accounting.GaussianDpEvent(0.5)), 20
    )
    assert book.epsilon(delta=1e-5, accountant="rdp") == pytest.approx(accountant.get_epsilon(1e-5), abs=1e-6)


class Clients:
    """A client manager of `n` available clients that samples the first `m`."""

    def __init__(self, n: int):
        self.n = n

    def num_available(self) -> int:
        return self.n

    def sample(self, num_clients, min_num_clients=None, criterion=None):
        return [f"client_{i}" for i in range(num_clients)]


def fit_res(update: float, size: int) -> FitRes:
    return FitRes(Status(Code.OK, ""), ndarrays_to_parameters([np.full(4, update)]), size, {"loss": 0.5})


def test_each_round_logs_its_release_and_metrics_once_it_ends(tmp_path):
    path = tmp_path / "run.json"
    fedavg = FedAvg(
        fraction_fit=0.5,
        min_fit_clients=2,
        min_available_clients=4,
        fraction_evaluate=0.0,
        fit_metrics_aggregation_fn=lambda m: {"loss": float(np.mean([x["loss"] for _, x in m]))},
    )
    dp = DifferentialPrivacyServerSideFixedClipping(fedavg, 1.0, clipping_norm=1.0, num_sampled_clients=2)
    start = ndarrays_to_parameters([np.zeros(4)])
    with track.start_run(**RUN, path=path) as run:
        strategy = FlowerLedger(dp, run, reported_epsilon=lambda r: 0.1 * r)
        for r in (1, 2):
            assert len(strategy.configure_fit(r, start, Clients(4))) == 2
            strategy.aggregate_fit(r, [(None, fit_res(3.0, 10)), (None, fit_res(-3.0, 10))], [])
            assert strategy.configure_evaluate(r, start, Clients(4)) == []  # no evaluation: logged now
        assert [logged["round"] for logged in strategy.logged] == [1, 2]
    stored = json.loads(path.read_text())
    release = to_json(SampledWithoutReplacementEvent(4, 2, GaussianEvent(0.5)))
    assert [(x["round"], x["events"], x["reported_epsilon"]) for x in stored["rounds"]] == [
        (1, {"server": [release]}, 0.1),
        (2, {"server": [release]}, 0.2),
    ]
    assert stored["rounds"][0]["metrics"] == {"fit.loss": 0.5}
    assert stored["end"] == {"status": "succeeded"}


def test_a_strategy_whose_releases_cannot_be_accounted_is_refused_naming_it(tmp_path):
    with track.start_run(**RUN, path=tmp_path / "run.json") as run:
        with pytest.raises(SpecError, match=r"^`strategy` is a FedAvg without Flower's DP wrapper"):
            FlowerLedger(FedAvg(), run)
        with pytest.raises(
            SpecError, match=r"^`strategy` is DifferentialPrivacyServerSideAdaptiveClipping: its noise"
        ):
            FlowerLedger(DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(), 0.5, 40), run)
        with pytest.raises(SpecError, match=r"^`strategy.strategy` is a FedMedian: the sensitivity"):
            FlowerLedger(DifferentialPrivacyClientSideFixedClipping(FedMedian(), 1.0, 1.0, 3), run)
        FlowerLedger(DifferentialPrivacyClientSideFixedClipping(FedAvg(), 1.0, 1.0, 3), run)  # accepted
    with track.start_run(**{**RUN, "notion": "none", "delta": None}, path=tmp_path / "plain.json") as run:
        FlowerLedger(FedAvg(), run)  # a run that claims no privacy may log a plain strategy's metrics
