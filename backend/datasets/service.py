"""The dataset catalogue (from the dpfl registry) and uploaded CSV files.

An upload is stored as `<cache_dir>/uploads/<name>.csv` beside a `<name>.json` record of what
was validated (label and user-id columns, rows, classes and their counts, columns). A spec names
it, never its path: `dataset: {name: csv, options: {upload: <name>}}` (`dpfl.data.uploads`), the
upload's `spec_dataset`. Uploads are never overwritten, so a run's spec keeps naming the data it
ran on.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from backend.datasets.schemas import DatasetList, DatasetRead, UploadRead
from backend.datasets.upload import Form
from backend.db import utcnow
from backend.errors import Conflict
from backend.settings import Settings
from dpfl.data import dataset_info, load_dataset, locate, registered_datasets
from dpfl.data.files import confine
from dpfl.data.loaders.csv_table import NonFiniteCell
from dpfl.data.uploads import upload_record
from dpfl.data.uploads import uploads_dir as _uploads_under
from dpfl.errors import DatasetUnavailable, SpecError
from dpfl.spec import RunSpec

__all__ = ["catalogue", "check_dataset_files", "list_uploads", "staging", "store_upload", "uploads_dir"]

NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# The csv loader's fields, as the upload form names them.
_FORM_FIELD = {"dataset.label": "label", "dataset.user_id": "user_id"}


def uploads_dir(settings: Settings) -> Path:
    """Returns the folder of uploaded CSV files."""
    return _uploads_under(settings.cache_dir)


def catalogue(settings: Settings) -> DatasetList:
    """Returns every registered dataset with its availability here, and the uploaded CSV files."""
    return DatasetList(
        datasets=[_entry(name, settings) for name in registered_datasets()],
        uploads=list_uploads(settings),
    )


def _entry(name: str, settings: Settings) -> DatasetRead:
    info = dataset_info(name)
    reason = None
    try:  # bundled and generated data need no files: locate([]) finds them all
        locate(info.files, search_dirs=settings.data_dirs, cache_dir=settings.cache_dir, download=False)
    except DatasetUnavailable as exc:
        reason = str(exc)
    return DatasetRead(
        name=info.name,
        description=info.description,
        num_classes=info.num_classes,
        natural_silos=info.natural_silos,
        license=info.license,
        source=info.source_url,
        options=dict(info.options),
        available=reason is None,
        unavailable_reason=reason,
    )


def list_uploads(settings: Settings) -> list[UploadRead]:
    """Returns the uploaded CSV files, by name."""
    folder = uploads_dir(settings)
    out = []
    for record_path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError):
            continue  # a record being written right now, or damaged: not listed
        if (folder / f"{record.get('name')}.csv").is_file():
            try:
                out.append(_upload_read(record, folder))
            except (KeyError, ValidationError):
                continue  # a record without the fields every upload's record holds: damaged, not listed
    return out


@contextlib.contextmanager
def staging(settings: Settings) -> Iterator[Path]:
    """Yields a private folder beside the uploads for one upload in progress; removed afterwards."""
    folder = uploads_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".incoming-") as tmp:
        yield Path(tmp)


def store_upload(settings: Settings, *, form: Form) -> UploadRead:
    """Validates a received CSV with the `csv` loader and stores it under its name; returns its record.

    Raises:
        SpecError: a field is missing or invalid, or the csv loader refuses the file (422,
            naming `file`, `name` or `label`).
        Conflict: an upload of that name exists (409).
    """
    name, label = form.fields.get("name", ""), form.fields.get("label", "")
    user_id = form.fields.get("user_id") or None
    if form.file is None:
        raise SpecError("file", "is required; send the CSV file as the multipart field `file`.")
    if not NAME.fullmatch(name):
        raise SpecError(
            "name",
            "must be snake_case (lower-case letters, digits and _, starting with a letter), "
            f"1 to 40 characters; got {name!r}.",
        )
    if name in registered_datasets():
        raise SpecError("name", f"is a registered dataset; got {name!r}. Choose another name.")
    if not label:
        raise SpecError("label", "is required; give the name of the label column.")
    folder = uploads_dir(settings)
    target = folder / f"{name}.csv"
    if target.exists():
        raise _taken(name)
    staged = form.file.rename(form.file.with_name(target.name))  # loader messages name <name>.csv
    _check_columns(staged, label=label, user_id=user_id)
    try:
        data = load_dataset("csv", path=str(staged), label=label, user_id=user_id)
    except NonFiniteCell as exc:  # the uploader sent the file: its column is named
        column = _header(staged)[exc.column]
        raise SpecError(
            "file",
            f"column {column!r} holds a number that is not finite (NaN or infinite) in data row {exc.row}; "
            "give finite numbers, and leave a missing value's cell empty.",
        ) from None
    except SpecError as exc:
        raise SpecError(_FORM_FIELD.get(exc.field, "file"), exc.reason) from None
    try:
        os.link(staged, target)  # atomic: of two uploads with one name, exactly one wins
    except FileExistsError:
        raise _taken(name) from None
    counts = np.bincount(np.concatenate([data.y_train, data.y_test]), minlength=data.num_classes)
    record = {
        "name": name,
        "label": label,
        "user_id": user_id,
        "num_rows": len(data.y_train) + len(data.y_test),
        "num_classes": data.num_classes,
        "classes": [{"name": n, "count": int(c)} for n, c in zip(data.class_names, counts, strict=True)],
        "columns": _header(target),
        "filename": form.filename,
        "uploaded_at": utcnow().isoformat(),
    }
    _write_json(folder / f"{name}.json", record)
    return _upload_read(record, folder)


def _check_columns(staged: Path, *, label: str, user_id: str | None) -> None:
    """Refuses a label or user-id column the upload's header lacks, listing its columns: the
    uploader sent them (the csv loader never echoes a path's contents, as it may read files no
    request sent)."""
    try:
        header = _header(staged)
    except (UnicodeDecodeError, csv.Error):
        return  # the loader says why the file is unreadable
    for field, column in (("label", label), ("user_id", user_id)):
        if header and column is not None and column not in header:
            raise SpecError(
                field,
                f"names column {column!r}, which {staged.name} lacks; columns found: {', '.join(header)}.",
            )
    if user_id is not None and user_id == label:
        raise SpecError(
            "user_id", f"names the label column {label!r}; choose the column of user ids, or none."
        )


def check_dataset_files(spec: RunSpec, settings: Settings) -> None:
    """Refuses a spec of an unknown dataset, or whose file lies outside the data folders and
    the upload store.

    Every loader option named `path` is checked as the loader would look it up, after resolving
    symlinks and `..` (422 naming `dataset.options.path`; the worker checks again before a run).
    """
    dataset_info(spec.dataset.name)  # an unknown name is a 422 naming dataset.name, listing them all
    options = spec.dataset.options
    if spec.dataset.name == "csv" and "upload" in options:
        upload_record(settings.cache_dir, options["upload"], field="dataset.options.upload")
    if "path" in options:
        confine(
            options["path"],
            search_dirs=settings.data_dirs,
            roots=[*settings.data_dirs, uploads_dir(settings)],
            field="dataset.options.path",
        )


def _taken(name: str) -> Conflict:
    return Conflict(f"an upload named {name!r} exists; uploads are never replaced, so choose another name")


def _upload_read(record: dict[str, Any], folder: Path) -> UploadRead:
    path = folder / f"{record['name']}.csv"
    return UploadRead.model_validate(
        record
        | {
            "size_bytes": path.stat().st_size,
            "spec_dataset": {"name": "csv", "options": {"upload": record["name"]}},
        }
    )


def _header(path: Path) -> list[str]:
    """Returns the column names: the first non-blank row, as the csv loader reads it."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        for row in csv.reader(handle):
            if any(cell.strip() for cell in row):
                return [cell.strip() for cell in row]
    return []


def _write_json(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)  # readers see the old record or the whole new one
