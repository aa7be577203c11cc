"""ISRL-DP algorithms of Lowy, Ghafelebashi & Razaviyayn (seed 000; reference/000_isrl_dp.md).

Inter-silo record-level DP: every message a silo sends is DP with respect to that silo's
records, so the server and other silos need not be trusted. Each silo is its own party in
the ledger and is accounted on its own; the run's ε is the least private silo's.

One module per algorithm: `mbsgd` (ISRL-DP minibatch SGD, the shared base), `proxsgd`
(noisy prox-SGD, with the proximal operators in `prox`), `spider` (FedProx-SPIDER), `spider_alt`
(the paper's alternate Fed-SPIDER, Alg. 11),
`localsgd` (ISRL-DP Local SGD) and `shuffle` (shuffle-DP minibatch SGD, with Duchi et al.'s
ℓ2-ball randomizer or Cheu et al.'s binomial vector sum from `vector_sum`).
"""

from dpfl.algorithms.base import silo_party
from dpfl.algorithms.isrl.localsgd import ISRLLocalSGD
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD
from dpfl.algorithms.isrl.proxsgd import ISRLProxSGD
from dpfl.algorithms.isrl.shuffle import SDPMinibatchSGD
from dpfl.algorithms.isrl.spider import ISRLSpider
from dpfl.algorithms.isrl.spider_alt import ISRLSpiderAlt

__all__ = [
    "ISRLLocalSGD",
    "ISRLMinibatchSGD",
    "ISRLProxSGD",
    "ISRLSpider",
    "ISRLSpiderAlt",
    "SDPMinibatchSGD",
    "silo_party",
]
