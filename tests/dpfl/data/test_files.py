"""File lookup, checksum verification and the file:// download path (no network)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from dpfl.data import FileSpec, file_md5, load_dataset, locate
from dpfl.errors import DatasetUnavailable

CONTENT = b"id,label\n1,0\n2,1\n"
CONTENT_MD5 = hashlib.md5(CONTENT).hexdigest()


def _spec(urls: tuple[str, ...] = ()) -> FileSpec:
    return FileSpec("toy/table.csv", CONTENT_MD5, urls)


def test_finds_file_under_its_relative_path(tmp_path: Path) -> None:
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "table.csv").write_bytes(CONTENT)
    found = locate([_spec()], search_dirs=[tmp_path], cache_dir=None, download=False)
    assert found == {"toy/table.csv": tmp_path / "toy" / "table.csv"}


def test_finds_file_by_basename_in_a_flat_folder(tmp_path: Path) -> None:
    (tmp_path / "table.csv").write_bytes(CONTENT)
    found = locate([_spec()], search_dirs=[tmp_path], cache_dir=None, download=False)
    assert found["toy/table.csv"] == tmp_path / "table.csv"


def test_search_dirs_come_before_the_cache(tmp_path: Path) -> None:
    first, cache = tmp_path / "first", tmp_path / "cache"
    for folder in (first, cache):
        (folder / "toy").mkdir(parents=True)
        (folder / "toy" / "table.csv").write_bytes(CONTENT)
    found = locate([_spec()], search_dirs=[tmp_path / "empty", first], cache_dir=cache, download=False)
    assert found["toy/table.csv"] == first / "toy" / "table.csv"
    found = locate([_spec()], search_dirs=[tmp_path / "empty"], cache_dir=cache, download=False)
    assert found["toy/table.csv"] == cache / "toy" / "table.csv"


def test_missing_file_message_names_file_md5_and_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as caught:
        locate(
            [_spec(("https://example.org/table.csv",))],
            search_dirs=[tmp_path],
            cache_dir=None,
            download=False,
        )
    assert str(caught.value) == (
        f"1 dataset file(s) missing: put table.csv (md5 {CONTENT_MD5}) in {tmp_path}/toy/ "
        f"(from https://example.org/table.csv); looked in {tmp_path}; or set DPFL_DATA_DIR to a "
        "folder that holds them, or allow downloading them (download=True; `dpfl run --download`)."
    )


def test_missing_mnist_names_every_file_and_its_md5(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as caught:
        load_dataset("mnist", search_dirs=[tmp_path])
    message = str(caught.value)
    assert message.startswith("4 dataset file(s) missing:") and "\n" not in message
    expected = f"put train-images-idx3-ubyte.gz (md5 f68b3c2dcbeaaa9fbdd348bbdeb94873) in {tmp_path}/mnist/"
    assert expected in message
    assert "put t10k-labels-idx1-ubyte.gz (md5 ec29112dd5afa0611ce80d1b7f02629c)" in message
    assert "DPFL_DATA_DIR" in message


def test_corrupted_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "table.csv").write_bytes(CONTENT + b"3,0\n")
    with pytest.raises(DatasetUnavailable, match=f"is corrupted .* expected {CONTENT_MD5}"):
        locate([_spec()], search_dirs=[tmp_path], cache_dir=None, download=False)


def test_checksum_is_computed_once_per_path_size_and_mtime(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_bytes(CONTENT)
    assert file_md5(path) == CONTENT_MD5
    stat = path.stat()
    # Same size and mtime, different bytes: the cached verification is reused.
    path.write_bytes(CONTENT.replace(b"1", b"9"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_md5(path) == CONTENT_MD5
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert file_md5(path) == hashlib.md5(CONTENT.replace(b"1", b"9")).hexdigest()


def test_download_from_file_url_lands_verified_in_the_cache(tmp_path: Path) -> None:
    source = tmp_path / "remote.csv"
    source.write_bytes(CONTENT)
    cache = tmp_path / "cache"
    spec = _spec((source.as_uri(),))
    found = locate([spec], search_dirs=[tmp_path / "none"], cache_dir=cache, download=True)
    assert found["toy/table.csv"] == cache / "toy" / "table.csv"
    assert found["toy/table.csv"].read_bytes() == CONTENT
    assert sorted(p.name for p in (cache / "toy").iterdir()) == ["table.csv"]  # no temporary file left


def test_download_with_wrong_checksum_is_deleted_and_refused(tmp_path: Path) -> None:
    source = tmp_path / "remote.csv"
    source.write_bytes(CONTENT + b"tampered\n")
    cache = tmp_path / "cache"
    with pytest.raises(DatasetUnavailable) as caught:
        locate([_spec((source.as_uri(),))], search_dirs=[], cache_dir=cache, download=True)
    actual = hashlib.md5(CONTENT + b"tampered\n").hexdigest()
    assert str(caught.value) == (
        f"could not download toy/table.csv (md5 {CONTENT_MD5}): {source.as_uri()}: md5 {actual}, "
        f"expected {CONTENT_MD5}. Put the official file in {cache}/toy/ instead."
    )
    assert list((cache / "toy").iterdir()) == []


def test_download_of_unreachable_url_is_refused(tmp_path: Path) -> None:
    missing = (tmp_path / "nowhere.csv").as_uri()
    with pytest.raises(DatasetUnavailable, match=re.escape("could not download toy/table.csv")):
        locate([_spec((missing,))], search_dirs=[], cache_dir=tmp_path / "cache", download=True)


def test_download_without_cache_dir_says_it_needs_one(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable, match="downloading needs a cache directory"):
        locate([_spec(((tmp_path / "x").as_uri(),))], search_dirs=[tmp_path], cache_dir=None, download=True)
