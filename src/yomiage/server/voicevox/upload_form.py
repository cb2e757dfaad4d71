"""An install request's form, read as it arrives: the file part goes straight to disk.

``POST /aivm_models/install`` takes AivisSpeech's form: a ``file`` part (an
AIVMX voice, hundreds of MB) or a ``url`` field, as ``multipart/form-data`` or
``application/x-www-form-urlencoded``. The guard middleware reads every other
body whole into memory within :attr:`ServerConfig.max_body_bytes`; this one is
streamed instead, so the file is written chunk by chunk to the store's partial
file (which enforces the upload's own size limit) and nothing of it is held in
memory. Each chunk must arrive within ``idle_timeout`` seconds and the whole body
within ``total_timeout`` (a client that trickles a byte now and then, or sends
bytes after the closing boundary, cannot hold its connection and its partial file
for ever), and the small fields have a small limit of their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import parse_qs

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.types import Message, Receive

from yomiage.server.request_body import ClientGone

FILE_FIELD = "file"
URL_FIELD = "url"
MAX_FIELD_BYTES = 8192  # a URL, or all the other small fields together
MAX_PARTS = 16  # the form has two fields; a client may add a few of its own


class FormError(ValueError):
    """The body is not a form this route reads (its message says why; a 422)."""


class UploadTimeout(TimeoutError):
    """The body stalled past ``idle_timeout`` (``total`` False) or took longer than
    ``total_timeout`` as a whole (``total`` True); the message says which."""

    def __init__(self, message: str, *, total: bool) -> None:
        super().__init__(message)
        self.total = total


class Sink(Protocol):
    """Where the file part's bytes go (the store's partial file)."""

    def write(self, data: bytes, /) -> object: ...


@dataclass(frozen=True)
class InstallForm:
    """What the client sent: the file (written to the sink) or a URL to fetch;
    ``filename``: the file part's name as the client gave it (for messages)."""

    url: str | None
    has_file: bool
    filename: str | None = None


async def read_install_form(
    receive: Receive,
    content_type: str,
    sink: Sink,
    *,
    idle_timeout: float,
    total_timeout: float | None = None,
) -> InstallForm:
    """Read the whole body; the ``file`` part is written to ``sink`` as it arrives.

    Raises :class:`FormError` for a body that is not such a form, whatever the
    sink raises (its size limit), :class:`ClientGone` if the client left and
    :class:`UploadTimeout` if it stalled or ran out of time."""
    clock = _Clock(idle_timeout, total_timeout)
    kind, params = parse_options_header(content_type)
    if kind == b"multipart/form-data":
        boundary = params.get(b"boundary")
        if not boundary:
            raise FormError("a multipart/form-data body needs a boundary in its Content-Type")
        return await _multipart(receive, boundary, sink, clock)
    if kind == b"application/x-www-form-urlencoded":
        body = await _small_body(receive, clock)
        urls = parse_qs(body.decode("utf-8", "replace")).get(URL_FIELD)
        return InstallForm(urls[0] if urls else None, False)
    raise FormError(
        "send the voice as multipart/form-data (a 'file' part) or its address as a 'url' "
        f"form field, not {kind.decode('latin-1')[:60] or 'no Content-Type'!r}"
    )


@dataclass(frozen=True)
class _Clock:
    """How long the next chunk may take: the idle limit, cut to what is left of the total."""

    idle: float
    total: float | None
    start: float = field(default_factory=time.monotonic)

    async def next(self, receive: Receive) -> Message:
        left = None if self.total is None else self.start + self.total - time.monotonic()
        wait = self.idle if left is None else max(0.0, min(self.idle, left))
        try:
            return await asyncio.wait_for(receive(), wait)
        except asyncio.TimeoutError:
            if left is not None and left <= self.idle:
                raise UploadTimeout(
                    f"the upload did not end within {self.total:g} s (the server's "
                    "--install-timeout)",
                    total=True,
                ) from None
            raise UploadTimeout(f"the upload stalled for {self.idle:g} s", total=False) from None


async def _chunks(receive: Receive, clock: _Clock) -> AsyncIterator[bytes]:
    more = True
    while more:
        message: Message = await clock.next(receive)
        if message["type"] != "http.request":
            raise ClientGone
        more = message.get("more_body", False)
        yield message.get("body", b"")


async def _small_body(receive: Receive, clock: _Clock) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in _chunks(receive, clock):
        size += len(chunk)
        if size > MAX_FIELD_BYTES:
            raise FormError(f"the form's fields exceed {MAX_FIELD_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


class _Parts:
    """The parser's callbacks: which part is being read, and its bytes."""

    def __init__(self) -> None:
        self.header_field = b""
        self.header_value = b""
        self.name: str | None = None
        self.file_bytes: list[bytes] = []
        self.has_file = False
        self.filename: str | None = None
        self.fields: dict[str, bytearray] = {}
        self.parts = 0
        self.field_bytes = 0

    def on_part_begin(self) -> None:
        self.name = None
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise FormError(f"the form has more than {MAX_PARTS} parts")

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        if self.header_field.lower() == b"content-disposition":
            _, params = parse_options_header(self.header_value)
            self.name = params.get(b"name", b"").decode("utf-8", "replace")
            if self.name == FILE_FIELD and b"filename" in params:
                self.filename = params[b"filename"].decode("utf-8", "replace")
        self.header_field = self.header_value = b""

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self.name == FILE_FIELD:
            self.has_file = True
            self.file_bytes.append(data[start:end])
            return
        self.field_bytes += end - start
        if self.field_bytes > MAX_FIELD_BYTES:  # all of them: a field per part adds up too
            raise FormError(f"the form's fields besides the file exceed {MAX_FIELD_BYTES} bytes")
        self.fields.setdefault(self.name or "", bytearray()).extend(data[start:end])


async def _multipart(receive: Receive, boundary: bytes, sink: Sink, clock: _Clock) -> InstallForm:
    parts = _Parts()
    callbacks = {name: getattr(parts, name) for name in (
        "on_part_begin", "on_header_field", "on_header_value", "on_header_end", "on_part_data",
    )}  # fmt: skip
    try:
        parser = MultipartParser(boundary, callbacks)  # type: ignore[arg-type]
    except FormParserError as exc:  # a boundary longer than the parser takes
        raise FormError(f"the multipart body's boundary is refused: {exc}") from None
    async for chunk in _chunks(receive, clock):
        try:
            parser.write(chunk)
        except FormParserError as exc:
            raise FormError(f"the multipart body is malformed: {exc}") from None
        if parts.file_bytes:
            data, parts.file_bytes = b"".join(parts.file_bytes), []
            await asyncio.to_thread(sink.write, data)
    try:
        parser.finalize()
    except FormParserError as exc:
        raise FormError(f"the multipart body is malformed: {exc}") from None
    url = parts.fields.get(URL_FIELD)
    return InstallForm(bytes(url).decode("utf-8", "replace").strip() if url else None,
                       parts.has_file, parts.filename)  # fmt: skip
