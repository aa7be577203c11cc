"""Both workloads in Flower's simulation (flwr 1.42, Message API, Ray backend).

- `isrl_mbsgd`: every silo is a SuperNode; each round its ClientApp takes one DP-SGD step with
  a fresh Opacus GradSampleModule and DPOptimizer (as Flower's Opacus example builds them per
  round) at its own σ_i, calibrated once by Opacus (RDP) for its Poisson rate q_i = K / n_i; the
  server's FedAvg takes their unweighted mean. ε: Opacus RDP of each silo's R steps (the largest).
- `dp_fedavg`: 100 SuperNodes; each round FedAvg samples 20 (fraction_train = 0.2), each runs
  local SGD, and `DifferentialPrivacyServerSideFixedClipping` clips their updates to S, averages
  and adds N(0, (σS/20)²), σ calibrated by Opacus's RDP for Poisson q = 0.2 (Flower samples 20
  of 100 without replacement, the usual stand-in). Flower's own accountant is attached with the
  only sampling it allows here, none: its ε (no amplification) is reported beside ours.

Usage: python flower_sim.py --data W.npz --runs EPS:SEED[,...] [--rounds R]
Prints one JSON line: per run ε, accuracy; the rounds' seconds summed (from the centralised
evaluation's calls before round 1 and after round R, which do no work in between).
"""

from __future__ import annotations

import logging
import os
import time
import warnings

import torch
from common import accuracy, arg, load, mlp, report, set_flat
from flower_client import client
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg
from flwr.simulation import run_simulation
from opacus.accountants import RDPAccountant
from opacus.accountants.utils import get_noise_multiplier

warnings.filterwarnings("ignore")


def run(work, *, epsilon: float, seed: int, rounds: int) -> dict:
    """Returns one simulation's ε, accuracy and its rounds' seconds."""
    s = work.settings
    torch.manual_seed(seed)
    times, result = {}, {}
    if s["algorithm"] == "isrl_mbsgd":
        rates = [min(1.0, s["batch_size"] / len(i)) for i in work.silos]
        sigmas = [_calibrate(epsilon, s["delta"], q, rounds) for q in rates]
        nodes = len(work.silos)
        strategy = FedAvg(
            fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=nodes, min_available_nodes=nodes
        )
        accountants = [RDPAccountant() for _ in rates]
        for a, q, sigma in zip(accountants, rates, sigmas, strict=True):
            a.history = [(sigma, q, rounds)]
        result["epsilon"] = max(a.get_epsilon(delta=s["delta"]) for a in accountants)
        extra = {"sigmas": sigmas}
        result |= {"sigma": sigmas, "rates": rates}
    else:
        from flwr.supercore.privacy_accounting import NeighboringRelation, PrivacyConfig, SamplingMethod
        from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant as FlowerRDP

        nodes, q = len(work.silos), s["sample_rate"]
        sampled = round(q * nodes)
        sigma = _calibrate(epsilon, s["delta"], q, rounds)
        own = FlowerRDP(
            PrivacyConfig(
                target_delta=s["delta"],
                population_size=nodes,
                neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                sampling_method=SamplingMethod.NO_AMPLIFICATION,
            )
        )
        inner = FedAvg(
            fraction_train=q, fraction_evaluate=0.0, min_train_nodes=sampled, min_available_nodes=nodes
        )
        strategy = DifferentialPrivacyServerSideFixedClipping(
            inner,
            noise_multiplier=sigma,
            clipping_norm=s["clip"],
            num_sampled_clients=sampled,
            accountant=own,
        )
        accountant = RDPAccountant()
        accountant.history = [(sigma, q, rounds)]
        result["epsilon"] = accountant.get_epsilon(delta=s["delta"])
        extra = {}
        result["sigma"] = sigma
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        model = mlp(work)

        def evaluate(r: int, arrays: ArrayRecord) -> MetricRecord:
            times[r] = time.perf_counter()
            if r == rounds:
                set_flat(model, arrays.to_numpy_ndarrays())
                result["accuracy"] = accuracy(model, work)
            return MetricRecord({})

        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord([p.detach().numpy() for p in model.parameters()]),
            num_rounds=rounds,
            train_config=ConfigRecord({"seed": seed, **extra}),
            evaluate_fn=evaluate,
        )
        if s["algorithm"] != "isrl_mbsgd":
            result["flower_epsilon"] = strategy.privacy_spent().epsilon

    run_simulation(
        server_app=server,
        client_app=client,
        num_supernodes=nodes,
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}},
    )
    return result | {"seed": seed, "target": epsilon, "train_s": times[rounds] - times[0]}


_cache: dict = {}


def _calibrate(epsilon: float, delta: float, q: float, steps: int) -> float:
    key = (epsilon, delta, q, steps)
    if key not in _cache:  # once per setting, as a researcher's script would
        _cache[key] = get_noise_multiplier(
            target_epsilon=epsilon, target_delta=delta, sample_rate=q, steps=steps, accountant="rdp"
        )
    return _cache[key]


def main() -> None:
    logging.disable(logging.WARNING)
    os.environ["PEERS_DATA"] = os.path.abspath(arg("data"))  # the ClientApps (Ray actors) read it
    work = load(os.environ["PEERS_DATA"])
    rounds = int(arg("rounds", str(work.settings["rounds"])))
    runs = []
    for pair in arg("runs").split(","):
        eps, seed = pair.split(":")
        runs.append(run(work, epsilon=float(eps), seed=int(seed), rounds=rounds))
    report(tool="flower", runs=runs, rounds=rounds, train_s=sum(r["train_s"] for r in runs))


if __name__ == "__main__":
    main()
