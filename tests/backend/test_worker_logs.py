"""The worker logs dp-accounting's "failed to converge" warning once per run, not once per order.

Runs rarely reach those orders now (the pruned RDP search skips the small orders where the
series gives up), so the filter is exercised here on dp-accounting's own warning directly."""

from __future__ import annotations

import logging

from dp_accounting import GaussianDpEvent, PoissonSampledDpEvent
from dp_accounting.rdp import RdpAccountant

from worker import logs


def test_a_non_converging_order_is_logged_once_per_run(caplog):
    logs.install()
    logs.install()  # installing twice adds one filter
    assert sum(isinstance(f, logs.OncePerRun) for f in logging.getLogger("absl").filters) == 1
    with caplog.at_level(logging.WARNING, logger="absl"):
        for run in ("run-a", "run-b"):
            with logs.running(run):
                for _ in range(3):  # q = 0.2, σ = 0.7: orders 1.1 and 1.2 do not converge
                    RdpAccountant(orders=[1.1, 1.2, 8.0]).compose(
                        PoissonSampledDpEvent(0.2, GaussianDpEvent(0.7))
                    )
    lines = [r.getMessage() for r in caplog.records if "failed to converge" in r.getMessage()]
    assert [sum(line.startswith(f"{run}: ") for line in lines) for run in ("run-a", "run-b")] == [1, 1], lines
    assert len(lines) == 2 and all("logged once per run" in line for line in lines)
