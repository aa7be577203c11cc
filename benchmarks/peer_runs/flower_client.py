"""Flower's ClientApp for both workloads (flower_sim.py): a module of its own, so that each Ray
actor imports it once and keeps the exported data loaded between rounds."""

from __future__ import annotations

import os
import warnings

import torch
from common import load, mlp, set_flat
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from opacus.grad_sample import GradSampleModule
from opacus.optimizers import DPOptimizer

warnings.filterwarnings("ignore")

_work = None


def _data():
    global _work
    if _work is None:  # once per actor process
        _work = load(os.environ["PEERS_DATA"])  # set by flower_sim.py; the actors inherit it
    return _work


client = ClientApp()


@client.train()
def train(msg: Message, context: Context) -> Message:
    """One silo's round: a DP-SGD step (isrl_mbsgd) or local SGD (dp_fedavg) from the server's model."""
    work, cfg = _data(), msg.content["config"]
    s, silo = work.settings, int(context.node_config["partition-id"])
    idx = work.silos[silo]
    x, y = work.x_train[idx], work.y_train[idx]
    rng = torch.Generator().manual_seed(int(cfg["seed"]) * 1_000_003 + silo * 1009 + int(cfg["server-round"]))
    model = mlp(work)
    set_flat(model, msg.content["arrays"].to_numpy_ndarrays())
    loss = torch.nn.CrossEntropyLoss()
    if s["algorithm"] == "isrl_mbsgd":
        q, sigma = min(1.0, s["batch_size"] / len(idx)), float(cfg["sigmas"][silo])
        model = GradSampleModule(model)
        opt = DPOptimizer(
            torch.optim.SGD(model.parameters(), lr=s["lr"]),
            noise_multiplier=sigma,
            max_grad_norm=s["clip"],
            expected_batch_size=q * len(idx),
        )
        chosen = torch.rand(len(y), generator=rng) < q
        opt.zero_grad()
        loss(model(x[chosen]), y[chosen]).backward()
        opt.step()
    else:
        opt = torch.optim.SGD(model.parameters(), lr=s["lr"])
        for _ in range(s["local_steps"]):
            rows = torch.randint(len(y), (s["batch_size"],), generator=rng)
            opt.zero_grad()
            loss(model(x[rows]), y[rows]).backward()
            opt.step()
    arrays = ArrayRecord([p.detach().numpy() for p in model.parameters()])
    return Message(RecordDict({"arrays": arrays, "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)
