"""A plugin module (`DPFL_PLUGINS=tests.blocking_plugin`): `blocking_mbsgd`, ISRL-DP minibatch SGD
whose round 2 blocks in C code (a long sleep), where no Python-level interrupt lands: what a hung
native call looks like to the worker."""

from __future__ import annotations

import time

from dpfl.algorithms import ALGORITHMS
from dpfl.algorithms.isrl.mbsgd import ISRLMinibatchSGD

BLOCK_S = 600


@ALGORITHMS.register("blocking_mbsgd")
class BlockingMinibatchSGD(ISRLMinibatchSGD):
    summary = "ISRL-DP minibatch SGD that hangs in round 2 (a test's plugin)"

    @classmethod
    def round_many(cls, runs, r):
        if r == 2:
            time.sleep(BLOCK_S)
        return super().round_many(runs, r)
