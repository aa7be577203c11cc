"""The ULDP-FL family (seed 004): user-level DP when one person's records sit in several silos.

`fedavg_2lr` (the paper's non-private DEFAULT), `uldp_naive`, `uldp_group`, `uldp_sgd`,
`uldp_avg` and `uldp_avg_w` (with the private weighting protocol in `secure`).
"""

from dpfl.algorithms.uldp.fedavg_2lr import FedAvg2LR
from dpfl.algorithms.uldp.group import ULDPGroup
from dpfl.algorithms.uldp.naive import ULDPNaive
from dpfl.algorithms.uldp.weighted import ULDPSGD, ULDPAvg, ULDPAvgW

__all__ = ["ULDPSGD", "FedAvg2LR", "ULDPAvg", "ULDPAvgW", "ULDPGroup", "ULDPNaive"]
