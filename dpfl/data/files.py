"""Finding a dataset's files on disk, verifying them, and the one explicit download path.

Lookup order for each file (first hit wins):

1. every search directory, as ``<dir>/<relpath>`` and then ``<dir>/<basename>``;
2. the cache directory, as ``<cache_dir>/<relpath>``;
3. with ``download=True``: each canonical URL in turn, streamed into the cache directory.

Every file found is checked against its checksum before use: its SHA-256 where the FileSpec
gives one, else its md5. A file whose checksum is wrong is refused, never used and never
silently replaced. Verification is cached in-process by ``(path, size, mtime)``, so a second
load of the same file does not hash it again.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dpfl.errors import DatasetUnavailable, SpecError

__all__ = ["FileSpec", "confine", "file_digest", "file_md5", "locate", "lookup_candidates"]

_CHUNK_BYTES = 1 << 20
_VERIFIED: dict[tuple[str, int, int, str], str] = {}


@dataclass(frozen=True)
class FileSpec:
    """One file a dataset needs: where it lives under a data directory and what it must hash to.

    Attributes:
        relpath: POSIX path under a data directory, e.g. ``"mnist/train-images-idx3-ubyte.gz"``.
        md5: expected md5 of the file's bytes, lower-case hex.
        urls: canonical download locations, tried in order.
        test: the file holds only the dataset's own test split (public where a budget declares
            its test split public, so a budget then does not cover it).
        sha256: expected SHA-256, lower-case hex; checked instead of the md5 when given.
    """

    relpath: str
    md5: str
    urls: tuple[str, ...] = ()
    test: bool = False
    sha256: str = ""

    @property
    def checksum(self) -> tuple[str, str]:
        """The (algorithm, hex digest) a file must match: SHA-256 when known, else md5."""
        return ("sha256", self.sha256) if self.sha256 else ("md5", self.md5)

    @property
    def basename(self) -> str:
        """The file name without its folder."""
        return PurePosixPath(self.relpath).name

    @property
    def folder(self) -> str:
        """The folder part of ``relpath`` ('' for a top-level file)."""
        parent = str(PurePosixPath(self.relpath).parent)
        return "" if parent == "." else parent


def lookup_candidates(path: str, search_dirs: Sequence[Path]) -> list[Path]:
    """Returns where a user-given data file `path` is looked for, in order: as given (absolute, or
    relative to the working directory), then, if relative, in each search directory."""
    given = Path(path)
    return [given] + ([] if given.is_absolute() else [Path(d) / given for d in search_dirs])


def confine(path: object, *, search_dirs: Sequence[Path], roots: Sequence[Path], field: str) -> Path | None:
    """Checks that the file a loader would open for `path` lies inside one of `roots`.

    The file opened is the first of `lookup_candidates` that exists; its real path (symlinks and
    `..` resolved) must be inside a root's real path. When none exists yet, the path must still
    point inside a root. Nothing is read, and messages never hold a file's contents.

    Returns:
        The real path of the file that would be opened, or None if there is none yet.

    Raises:
        SpecError: `path` is not a string, or points outside every root (naming `field`).
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        raise SpecError(field, f"must be a string: the path of a CSV file; got {path!r}.")
    real_roots = [Path(r).resolve() for r in roots]

    def inside(candidate: Path) -> bool:
        real = candidate.resolve()
        return any(real.is_relative_to(root) for root in real_roots)

    candidates = lookup_candidates(path, search_dirs)
    existing = next((c for c in candidates if c.is_file()), None)
    # the file the loader will open, or (none yet) any place it might be created
    if not (inside(existing) if existing is not None else any(inside(c) for c in candidates)):
        raise SpecError(
            field,
            f"must name a file inside the data folders (DPFL_DATA_DIR) or the upload store; got {path!r}.",
        )
    return None if existing is None else existing.resolve()


def file_md5(path: Path) -> str:
    """Returns the md5 of a file (hex), cached in-process by (path, size, mtime)."""
    return file_digest(path, "md5")


def file_digest(path: Path, algorithm: str) -> str:
    """Returns a file's `algorithm` (md5, sha256) digest, hex, cached in-process by (path, size, mtime)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, algorithm)
    if key not in _VERIFIED:
        digest = hashlib.new(algorithm, usedforsecurity=False)
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK_BYTES):
                digest.update(chunk)
        _VERIFIED[key] = digest.hexdigest()
    return _VERIFIED[key]


def locate(
    files: Sequence[FileSpec],
    *,
    search_dirs: Sequence[Path],
    cache_dir: Path | None,
    download: bool,
    timeout_s: float = 60.0,
) -> dict[str, Path]:
    """Returns the verified local path of every file, keyed by ``FileSpec.relpath``.

    Args:
        files: the files one dataset needs.
        search_dirs: folders that may hold the files (the CLI passes ``DPFL_DATA_DIR`` here).
        cache_dir: folder for downloaded files; also searched. ``None`` disables both.
        download: fetch missing files from their URLs into ``cache_dir``.
        timeout_s: socket timeout of one download request, in seconds.

    Raises:
        DatasetUnavailable: a file is missing (the message, one line, lists every missing file, its
            md5, where to put it and where to get it), a found file fails its checksum, or
            a download fails.
    """
    found: dict[str, Path] = {}
    missing: list[FileSpec] = []
    for spec in files:
        path = _find_local(spec, search_dirs, cache_dir)
        if path is not None:
            found[spec.relpath] = path
        elif download and cache_dir is not None and spec.urls:
            found[spec.relpath] = _download(spec, Path(cache_dir), timeout_s)
        else:
            missing.append(spec)
    if missing:
        raise DatasetUnavailable(_missing_message(missing, search_dirs, cache_dir, download))
    return found


def _find_local(spec: FileSpec, search_dirs: Sequence[Path], cache_dir: Path | None) -> Path | None:
    candidates = []
    for folder in search_dirs:
        candidates += [Path(folder) / spec.relpath, Path(folder) / spec.basename]
    if cache_dir is not None:
        candidates.append(Path(cache_dir) / spec.relpath)
    for path in candidates:
        if path.is_file():
            _verify(spec, path)
            return path
    return None


def _verify(spec: FileSpec, path: Path) -> None:
    algorithm, expected = spec.checksum
    actual = file_digest(path, algorithm)
    if actual != expected:
        raise DatasetUnavailable(
            f"{path} is corrupted or not the official {spec.basename}: its {algorithm} is {actual}, "
            f"expected {expected}. Delete it and put the official file there"
            + (f" (from {spec.urls[0]})." if spec.urls else ".")
        )


def _download(spec: FileSpec, cache_dir: Path, timeout_s: float) -> Path:
    target = cache_dir / spec.relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    failures = []
    for url in spec.urls:
        # Stream into a temporary file beside the target, then rename atomically, so a
        # concurrent reader never sees a half-written or unverified file under the real name.
        handle, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        tmp = Path(tmp_name)
        try:
            algorithm, expected = spec.checksum
            digest = hashlib.new(algorithm, usedforsecurity=False)
            with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as response:
                while chunk := response.read(_CHUNK_BYTES):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != expected:
                failures.append(f"{url}: {algorithm} {digest.hexdigest()}, expected {expected}")
                continue
            os.replace(tmp, target)
            return target
        except (urllib.error.URLError, OSError, ValueError) as error:
            failures.append(f"{url}: {error}")
        finally:
            tmp.unlink(missing_ok=True)
    raise DatasetUnavailable(
        f"could not download {spec.relpath} ({' '.join(spec.checksum)}): "
        + "; ".join(failures)
        + f". Put the official file in {target.parent}/ instead."
    )


def _missing_message(
    missing: Sequence[FileSpec], search_dirs: Sequence[Path], cache_dir: Path | None, download: bool
) -> str:
    """Returns one line: each missing file with its checksum, the folder it goes in and its official
    source, the folders looked in, and the other ways to get them (`dpfl run` prints it as is)."""
    home = Path(search_dirs[0]) if search_dirs else cache_dir
    where = f"{home}" if home is not None else "<data dir>"
    puts = []
    for spec in missing:
        folder = f"{where}/{spec.folder}/" if spec.folder else f"{where}/"
        source = f" (from {spec.urls[0]})" if spec.urls else ""
        puts.append(f"put {spec.basename} ({' '.join(spec.checksum)}) in {folder}{source}")
    looked = [str(d) for d in search_dirs] + ([f"{cache_dir} (cache)"] if cache_dir is not None else [])
    remedy = "or set DPFL_DATA_DIR to a folder that holds them"
    if not download:
        remedy += ", or allow downloading them (download=True; `dpfl run --download`)"
    elif cache_dir is None:
        remedy += "; downloading needs a cache directory"
    return (
        f"{len(missing)} dataset file(s) missing: {'; '.join(puts)}; "
        f"looked in {', '.join(looked) if looked else 'no folders'}; {remedy}."
    )
