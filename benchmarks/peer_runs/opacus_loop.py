"""ISRL-DP minibatch SGD as a researcher writes it with Opacus: a Python loop over the silos.

Each silo has its own model (`GradSampleModule`), its own `DPOptimizer` and its own RDP
accountant, at its own noise multiplier σ_i calibrated by Opacus to the target ε for its
Poisson rate q_i = K / n_i over R steps. Each round every silo loads the server's model, draws
a Poisson minibatch, takes one DP-SGD step (clipped per-sample gradients summed, N(0, σ_i²C²)
added, divided by the expected batch q_i n_i, times the server's learning rate); the server
averages the silos' models, which is our w − η·mean of the silos' noisy mean gradients.

Usage: python opacus_loop.py --data W1.npz --runs EPS:SEED[,EPS:SEED...] [--rounds R]
Prints one JSON line: per run its ε (the largest silo's, Opacus RDP), accuracy and training
seconds; the rounds' seconds summed.
"""

from __future__ import annotations

import functools
import warnings

import torch
from common import Clock, accuracy, arg, load, mlp, report
from opacus.accountants import RDPAccountant
from opacus.accountants.utils import get_noise_multiplier
from opacus.grad_sample import GradSampleModule
from opacus.optimizers import DPOptimizer

warnings.filterwarnings("ignore")  # Opacus warns about secure RNG and the optimizer's state


@functools.cache
def calibrate(epsilon: float, delta: float, q: float, steps: int) -> float:
    """Returns Opacus's σ for (ε, δ) at rate q over `steps` (RDP), once per setting: runs of a sweep
    that differ only in seed reuse it, as a researcher's script would."""
    return get_noise_multiplier(
        target_epsilon=epsilon, target_delta=delta, sample_rate=q, steps=steps, accountant="rdp"
    )


def run(work, *, epsilon: float, seed: int, rounds: int, clock: Clock) -> dict:
    """Returns one run's ε, accuracy and σ's, its rounds timed on `clock`."""
    s = work.settings
    torch.manual_seed(seed)
    sampling = torch.Generator().manual_seed(seed)
    silos = []
    for idx in work.silos:
        q = min(1.0, s["batch_size"] / len(idx))
        sigma = calibrate(epsilon, s["delta"], q, rounds)
        model = GradSampleModule(mlp(work), loss_reduction="mean")
        optimizer = DPOptimizer(
            torch.optim.SGD(model.parameters(), lr=s["lr"]),
            noise_multiplier=sigma,
            max_grad_norm=s["clip"],
            expected_batch_size=q * len(idx),
            loss_reduction="mean",  # divides the noisy sum by expected_batch_size
        )
        silos.append((work.x_train[idx], work.y_train[idx], q, sigma, model, optimizer, RDPAccountant()))
    server = mlp(work)
    loss = torch.nn.CrossEntropyLoss()
    for _ in range(rounds):
        with clock:
            start = [p.detach().clone() for p in server.parameters()]
            total = [torch.zeros_like(p) for p in start]
            for x, y, q, sigma, model, optimizer, accountant in silos:
                with torch.no_grad():
                    for p, w in zip(model.parameters(), start, strict=True):
                        p.copy_(w)
                chosen = torch.rand(len(y), generator=sampling) < q
                optimizer.zero_grad()
                loss(model(x[chosen]), y[chosen]).backward()
                optimizer.step()
                accountant.step(noise_multiplier=sigma, sample_rate=q)
                for t, p in zip(total, model.parameters(), strict=True):
                    t += p.detach()
            with torch.no_grad():
                for p, t in zip(server.parameters(), total, strict=True):
                    p.copy_(t / len(silos))
    return {
        "epsilon": max(a.get_epsilon(delta=s["delta"]) for *_, a in silos),
        "seed": seed,
        "target": epsilon,
        "accuracy": accuracy(server, work),
        "sigma": [silo[3] for silo in silos],
        "rates": [silo[2] for silo in silos],
    }


def main() -> None:
    work = load(arg("data"))
    rounds = int(arg("rounds", str(work.settings["rounds"])))
    torch.set_num_threads(int(arg("threads", str(torch.get_num_threads()))))
    clock = Clock()
    runs = []
    for pair in arg("runs").split(","):
        eps, seed = pair.split(":")
        runs.append(run(work, epsilon=float(eps), seed=int(seed), rounds=rounds, clock=clock))
    report(tool="opacus", runs=runs, rounds=rounds, train_s=clock.seconds)


if __name__ == "__main__":
    main()
