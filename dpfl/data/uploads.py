"""Uploaded CSV files, by name: `<cache_dir>/uploads/<name>.csv` beside `<name>.json`, the record of
what the upload was checked with (its label column, user-id column, classes).

A spec names an upload as `dataset: {name: csv, options: {upload: <name>}}`: the `csv` loader reads
the stored file with the record's columns, and runs are listed under the upload's name. No spec
carries a server path, so a spec moves between servers that hold the same upload.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dpfl.errors import SpecError

__all__ = ["FOLDER", "dataset_label", "upload_names", "upload_record", "uploads_dir"]

FOLDER = "uploads"


def uploads_dir(cache_dir: Path) -> Path:
    """Returns the folder of uploaded CSV files under a cache directory."""
    return Path(cache_dir) / FOLDER


def upload_names(cache_dir: Path | None) -> list[str]:
    """Returns the names of the stored uploads (a file and its record both present), sorted."""
    if cache_dir is None:
        return []
    folder = uploads_dir(cache_dir)
    return sorted(p.stem for p in folder.glob("*.json") if (folder / f"{p.stem}.csv").is_file())


def upload_record(
    cache_dir: Path | None, name: object, *, field: str = "dataset.upload"
) -> tuple[Path, dict[str, Any]]:
    """Returns the stored file of upload `name` and its record.

    Raises:
        SpecError: no upload of that name is stored here (naming `field` and listing the uploads).
    """
    names = upload_names(cache_dir)
    if not isinstance(name, str) or name not in names:
        listed = ", ".join(names) if names else "none yet (upload a CSV first)"
        raise SpecError(field, f"names no upload on this server; got {name!r}. Uploads: {listed}.")
    folder = uploads_dir(cache_dir)
    try:
        record = json.loads((folder / f"{name}.json").read_text())
    except (OSError, ValueError):
        raise SpecError(
            field, f"names upload {name!r}, whose record is unreadable; upload it again."
        ) from None
    return folder / f"{name}.csv", record


def dataset_label(name: str, options: dict[str, Any]) -> str:
    """Returns the name a run's data is listed under: an upload's own name, else the dataset's."""
    upload = options.get("upload")
    return upload if name == "csv" and isinstance(upload, str) and upload else name
