"""Writes the feature-transform fits that ship with the package (`dpfl.data.fits`): MNIST's PCA.

Run it when a loader or `pca_components` changes what it returns; tests/dpfl/data/test_fits.py
checks the shipped fit against a fit on the files. Usage:

    DPFL_DATA_DIR=/path/to/data python scripts/ship_fits.py
"""

from __future__ import annotations

import os
from pathlib import Path

from dpfl.data.fits import write_shipped_pca
from dpfl.data.registry import load_dataset


def main() -> None:
    dirs = [Path(p) for p in os.environ.get("DPFL_DATA_DIR", "").split(os.pathsep) if p]
    path = write_shipped_pca("mnist", load_dataset("mnist", search_dirs=dirs))
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
