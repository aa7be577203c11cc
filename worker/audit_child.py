"""The process an audit runs in: `python -m worker.audit_child JOB OUT`.

An audit replays a run's first rounds thousands of times and builds neighbouring datasets, so
its memory grows with the data and the silos (a 500-silo MNIST audit took 19 GB, and the
kernel's OOM killer took the whole worker). It runs here, in a process of its own under an
address-space limit (`worker.audit`), so running out of memory fails the audit alone. JOB is
the audit as JSON; OUT receives ``{"result": …}`` or ``{"error": …}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MEMORY = "memory"  # the error a parent reads as "needed more than its limit"


def main(job_path: str, out_path: str) -> int:
    out = Path(out_path)
    try:
        # imported here, so that a limit too small to load torch is reported as one
        from dpfl.audit.rounds import audit_black_box, audit_first_round, audit_json
        from dpfl.errors import DpflError
        from dpfl.spec import parse_spec

        job = json.loads(Path(job_path).read_text())
        spec, dirs, seeds = parse_spec(job["spec"]), [Path(d) for d in job["data_dirs"]], job["seeds"]
        try:
            releases = audit_first_round(spec, data_dirs=dirs, trials=job["trials"], seeds=seeds)
            black = None
            if job["black_box_trials"]:
                black = audit_black_box(spec, data_dirs=dirs, trials=job["black_box_trials"], seeds=seeds)
        except DpflError as exc:
            out.write_text(json.dumps({"error": str(exc)}))
            return 0
        out.write_text(json.dumps({"result": audit_json(releases, black)}))
        return 0
    except MemoryError:
        out.write_text(json.dumps({"error": MEMORY}))
        return 0
    except RuntimeError as exc:  # torch's allocator: "DefaultCPUAllocator: can't allocate memory"
        if "allocate memory" in str(exc) or "out of memory" in str(exc):
            out.write_text(json.dumps({"error": MEMORY}))
            return 0
        raise


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
