"""Which records a dataset reads, named by content rather than by loader or path.

A privacy budget is kept on these digests: any loader or path that reads the same bytes (the
`adult` loader, the `csv` loader on `adult/adult.data`, an upload of that file) reads the same
records, so it is charged to the same budget. A file is named by its md5 (`md5:<hex>`); data
bundled with a library or generated, which no path can name, by its dataset (`dataset:<name>`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpfl.data.files import file_md5, lookup_candidates
from dpfl.data.registry import dataset_info
from dpfl.data.uploads import upload_names, uploads_dir

__all__ = ["data_digests", "file_digest"]


def file_digest(path: Path) -> str:
    """Returns the content digest of one file (`md5:<hex>`)."""
    return f"md5:{file_md5(path)}"


def data_digests(
    name: str,
    options: Mapping[str, Any],
    *,
    search_dirs: Sequence[Path],
    cache_dir: Path | None = None,
    public_test: bool = False,
) -> frozenset[str]:
    """Returns the digests of what the dataset `name` with loader `options` reads.

    A loader's `path` option names its one file (looked up as the loader looks it up), as its
    `upload` option does (an upload stored under `cache_dir`); a dataset
    with declared files reads those (each verified against its md5 before use, so the declared
    md5 is the content's), less its test files when `public_test` (a budget that declares the
    test split public does not cover them). A path that names no file yet has no digest: its run
    fails to load.
    """
    upload = options.get("upload")
    if isinstance(upload, str) and upload:
        found_upload = cache_dir is not None and upload in upload_names(cache_dir)
        return (
            frozenset({file_digest(uploads_dir(cache_dir) / f"{upload}.csv")})
            if found_upload
            else frozenset()
        )
    path = options.get("path")
    if isinstance(path, str) and path:
        found = next((c for c in lookup_candidates(path, search_dirs) if c.is_file()), None)
        return frozenset() if found is None else frozenset({file_digest(found)})
    info = dataset_info(name)
    if info.files:
        return frozenset(f"md5:{f.md5}" for f in info.files if not (public_test and f.test))
    return frozenset({f"dataset:{name}"})
