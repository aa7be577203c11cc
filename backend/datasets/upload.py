"""Reading a multipart/form-data CSV upload from the request stream, within a size limit.

The file part goes straight to disk as it arrives, so an upload never sits in memory, and the
limit is enforced while reading: a body that announces (Content-Length) or reaches more than
the limit plus a small allowance for the multipart framing is refused before the rest is read.
Within that bound the file's bytes are counted exactly, so the 413 message gives its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fastapi import Request
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool

from backend.errors import PayloadTooLarge
from dpfl.errors import SpecError

__all__ = ["FIELDS", "FRAMING_BYTES", "REQUIRED", "Form", "receive"]

FIELDS = ("file", "name", "label", "user_id")
REQUIRED = ("file", "name", "label")
FRAMING_BYTES = 64 * 1024  # multipart boundaries, part headers and the small fields around the file
_MAX_FIELD_BYTES = 1024


@dataclass
class Form:
    """A received upload: the small text fields, and the file part as written to disk."""

    fields: dict[str, str] = field(default_factory=dict)
    file: Path | None = None
    filename: str | None = None
    size_bytes: int = 0


def _too_large(what: str, limit: int) -> PayloadTooLarge:
    """Returns the 413 error for `what` ("file 'x.csv' is 5000 bytes") against the limit."""
    return PayloadTooLarge(
        f"{what}; this server accepts uploads of at most {limit} bytes (DPFL_MAX_UPLOAD_BYTES)"
    )


class _Parts:
    """Multipart callbacks: text fields into memory (bounded), the `file` part onto disk."""

    def __init__(self, target: Path, limit: int):
        self.form = Form()
        self.target, self.limit = target, limit
        self.out: BinaryIO | None = None
        self.pending: list[bytes] = []
        self.ended = False
        self._header_name = self._header_value = self._disposition = b""
        self._name: str | None = None
        self._value = bytearray()

    def callbacks(self) -> dict:
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value_data,
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }

    def _part_begin(self) -> None:
        self._disposition, self._name, self._value = b"", None, bytearray()

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        if self._header_name.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name = self._header_value = b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        name = _text("a part name", options.get(b"name", b""))
        if name not in FIELDS:
            raise SpecError(name or "file", f"is not a field of a dataset upload; send {', '.join(FIELDS)}.")
        if name in self.form.fields or (name == "file" and self.form.file is not None):
            raise SpecError(name, "is sent twice; send each field once.")
        self._name = name
        if name == "file":
            self.form.file = self.target
            self.form.filename = _text("the file name", options.get(b"filename", b"upload.csv"))
            self.out = self.target.open("wb")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._name != "file":
            self._value += data[start:end]
            if len(self._value) > _MAX_FIELD_BYTES:
                raise SpecError(str(self._name), f"is longer than {_MAX_FIELD_BYTES} bytes.")
            return
        chunk = data[start:end]
        self.form.size_bytes += len(chunk)
        if self.form.size_bytes <= self.limit:  # beyond the limit the rest is only counted
            self.pending.append(chunk)

    def _part_end(self) -> None:
        if self._name is not None and self._name != "file":
            self.form.fields[self._name] = _text(f"field {self._name!r}", bytes(self._value)).strip()

    def _end(self) -> None:
        self.ended = True

    def flush(self) -> None:
        """Writes the file bytes received so far (called in a worker thread: disk I/O)."""
        if self.out is not None and self.pending:
            self.out.write(b"".join(self.pending))
        self.pending.clear()

    def close(self) -> None:
        if self.out is not None:
            self.out.close()


def _text(what: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("file", f"has {what} that is not UTF-8; got {raw[:40]!r}.") from None


async def receive(request: Request, *, target: Path, limit: int) -> Form:
    """Returns the upload's fields, with its `file` part written to `target`.

    Raises:
        PayloadTooLarge: the file is over `limit` bytes, or the body over `limit` plus the
            framing allowance (then the rest of the body is not read).
        SpecError: the body is not multipart/form-data, is malformed, or has unknown fields.
    """
    content_type = request.headers.get("content-type", "")
    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data" or not options.get(b"boundary"):
        raise SpecError(
            "file",
            f"must be sent as multipart/form-data with fields {', '.join(REQUIRED)} "
            "(and optionally user_id); "
            f"got content type {content_type or 'none'!r}.",
        )
    bound = limit + FRAMING_BYTES
    announced = request.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > bound:
        raise _too_large(f"the request body is {int(announced)} bytes", limit)
    parts = _Parts(target, limit)
    parser = MultipartParser(options[b"boundary"], parts.callbacks())
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > bound:  # a body without Content-Length, still arriving
                raise _too_large(f"the request body is more than {bound} bytes", limit)
            parser.write(chunk)
            await run_in_threadpool(parts.flush)
        parser.finalize()
    except FormParserError as exc:
        raise SpecError("file", f"is not a readable multipart/form-data body ({exc}).") from None
    finally:
        parts.close()
    if not parts.ended:
        raise SpecError("file", "ended before the multipart body's closing boundary; send the whole body.")
    form = parts.form
    if form.size_bytes > limit:
        raise _too_large(f"file {form.filename!r} is {form.size_bytes} bytes", limit)
    return form
