"""DP-FedAvg with central DP in pfl-research (pfl 0.6.0, PyTorch backend, SimulatedBackend).

100 users (our silos), cohorts of 20 (pfl's sampling probability 20/100 = 0.2), 10 local SGD
steps of batch 32 each, every user weighted alike (`WeightByUser`), updates clipped to S and
Gaussian noise on their sum (`CentrallyAppliedPrivacyMechanism(GaussianMechanism)`), σ from
pfl's RDP accountant for ε over R iterations (the accountant ours uses), the averaged update
applied by SGD with learning rate 1.

Usage: python pfl_central.py --data W2.npz --runs EPS:SEED[,...] [--rounds R]
Prints one JSON line: per run ε (pfl's accountant), accuracy; the rounds' seconds summed.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import torch
from common import accuracy, arg, load, mlp, report
from pfl.aggregate.simulate import SimulatedBackend
from pfl.aggregate.weighting import WeightByUser
from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
from pfl.callback.base import TrainingProcessCallback
from pfl.data.dataset import Dataset
from pfl.data.federated_dataset import FederatedDataset
from pfl.data.sampling import get_user_sampler
from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
from pfl.metrics import Metrics, Weighted
from pfl.model.pytorch import PyTorchModel
from pfl.privacy import CentrallyAppliedPrivacyMechanism, GaussianMechanism, RDPPrivacyAccountant

warnings.filterwarnings("ignore")


class Net(torch.nn.Module):
    """The MLP with the `loss` and `metrics` pfl's PyTorchModel asks of a module."""

    def __init__(self, work) -> None:
        super().__init__()
        self.net = mlp(work)

    def forward(self, x):
        return self.net(x)

    def loss(self, x, y, eval=False):
        self.eval() if eval else self.train()
        return torch.nn.functional.cross_entropy(self(x), y)

    def metrics(self, x, y, eval=False):
        with torch.no_grad():
            correct = float((self(x).argmax(1) == y).sum())
        return {"accuracy": Weighted(correct, len(y))}


class Timer(TrainingProcessCallback):
    """Notes when training begins and when the last central iteration ends."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def on_train_begin(self, *, model):
        self.times = [time.perf_counter()]
        return Metrics()

    def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
        self.times.append(time.perf_counter())
        return False, Metrics()


def run(work, *, epsilon: float, seed: int, rounds: int) -> dict:
    """Returns one run's ε, accuracy and its rounds' seconds."""
    s = work.settings
    torch.manual_seed(seed)
    np.random.seed(seed)
    users = list(range(len(work.silos)))
    cohort = round(s["sample_rate"] * len(users))
    accountant = RDPPrivacyAccountant(
        num_compositions=rounds,
        sampling_probability=cohort / len(users),
        mechanism="gaussian",
        epsilon=epsilon,
        delta=s["delta"],
    )
    privacy = CentrallyAppliedPrivacyMechanism(
        GaussianMechanism.from_privacy_accountant(accountant=accountant, clipping_bound=s["clip"])
    )

    def user_data(u: int) -> Dataset:
        # pfl's Dataset reads its batches in order: shuffled each time the user is sampled, so
        # that local steps see random minibatches of the user's records, as ours and Flower's do
        rows = work.silos[u][torch.randperm(len(work.silos[u]))]
        return Dataset(raw_data=[work.x_train[rows], work.y_train[rows]])

    data = FederatedDataset(make_dataset_fn=user_data, user_sampler=get_user_sampler("random", users))
    backend = SimulatedBackend(training_data=data, val_data=None, postprocessors=[WeightByUser(), privacy])
    net = Net(work)
    model = PyTorchModel(
        model=net,
        local_optimizer_create=torch.optim.SGD,
        central_optimizer=torch.optim.SGD(net.parameters(), lr=s["server_lr"]),
    )
    timer = Timer()
    FederatedAveraging().run(
        algorithm_params=NNAlgorithmParams(
            central_num_iterations=rounds,
            evaluation_frequency=rounds,
            train_cohort_size=cohort,
            val_cohort_size=0,
        ),
        backend=backend,
        model=model,
        model_train_params=NNTrainHyperParams(
            local_num_epochs=None,
            local_learning_rate=s["lr"],
            local_batch_size=s["batch_size"],
            local_num_steps=s["local_steps"],
        ),
        model_eval_params=NNEvalHyperParams(local_batch_size=None),
        callbacks=[timer],
    )
    sigma = accountant.cohort_noise_parameter
    spent = RDPPrivacyAccountant(  # the ε of the σ it ran with, not the target it was asked for
        num_compositions=rounds,
        sampling_probability=cohort / len(users),
        mechanism="gaussian",
        noise_parameter=sigma,
        delta=s["delta"],
    )
    return {
        "epsilon": spent.epsilon,
        "sigma": sigma,
        "seed": seed,
        "target": epsilon,
        "accuracy": accuracy(net.net, work),
        "train_s": timer.times[-1] - timer.times[0],
    }


def main() -> None:
    logging.disable(logging.WARNING)
    work = load(arg("data"))
    rounds = int(arg("rounds", str(work.settings["rounds"])))
    runs = []
    for pair in arg("runs").split(","):
        eps, seed = pair.split(":")
        runs.append(run(work, epsilon=float(eps), seed=int(seed), rounds=rounds))
    report(tool="pfl", runs=runs, rounds=rounds, train_s=sum(r["train_s"] for r in runs))


if __name__ == "__main__":
    main()
