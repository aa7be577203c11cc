"""Every peer accountant's ε for the same Poisson-sampled Gaussian schedules (σ, q, steps, δ).

Opacus 1.6 (RDP, PRV), pfl 0.6 (RDP, PLD, PRV: each given σ, q and steps, asked for ε), and
Flower 1.42's own RDP accountant with the sampling its fixed-clipping DP wrapper requires,
`no-amplification`: each round's Gaussian counted at full strength, whatever q.

Usage: python accountants.py '[{"sigma": 1.0, "q": 0.01, "steps": 1000, "delta": 1e-5}, ...]'
Prints one JSON line: a dict of ε per accountant for each case, in order.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings

from flwr.supercore.privacy_accounting import (
    GaussianPrivacyEvent,
    NeighboringRelation,
    PrivacyConfig,
    SamplingMethod,
)
from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant as FlowerRDP
from opacus.accountants import PRVAccountant, RDPAccountant
from pfl.privacy import PLDPrivacyAccountant, PRVPrivacyAccountant, RDPPrivacyAccountant

warnings.filterwarnings("ignore")


def _opacus(accountant, sigma: float, q: float, steps: int, delta: float) -> float:
    accountant.history = [(sigma, q, steps)]
    return float(accountant.get_epsilon(delta=delta))


def _pfl(cls, sigma: float, q: float, steps: int, delta: float) -> float:
    return float(
        cls(
            num_compositions=steps,
            sampling_probability=q,
            mechanism="gaussian",
            noise_parameter=sigma,
            delta=delta,
        ).epsilon
    )


def _flower(sigma: float, q: float, steps: int, delta: float) -> float:
    population = 1000
    accountant = FlowerRDP(
        PrivacyConfig(
            target_delta=delta,
            population_size=population,
            neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
            sampling_method=SamplingMethod.NO_AMPLIFICATION,
        )
    )
    event = GaussianPrivacyEvent(
        noise_multiplier=sigma, sample_size=max(1, round(q * population)), population_size=population
    )
    accountant.compose(event, count=steps)
    return float(accountant.get_epsilon(delta))


def epsilons(case: dict) -> dict[str, float]:
    """Returns each peer accountant's ε of the case."""
    args = (case["sigma"], case["q"], case["steps"], case["delta"])
    out = {
        "opacus_rdp": _opacus(RDPAccountant(), *args),
        "opacus_prv": _opacus(PRVAccountant(), *args),
        "pfl_rdp": _pfl(RDPPrivacyAccountant, *args),
        "pfl_pld": _pfl(PLDPrivacyAccountant, *args),
        "pfl_prv": _pfl(PRVPrivacyAccountant, *args),
        "flower_no_amplification": _flower(*args),
    }
    return out


def main() -> None:
    logging.disable(logging.WARNING)
    print(json.dumps([epsilons(case) for case in json.loads(sys.argv[1])]), flush=True)


if __name__ == "__main__":
    main()
