"""Whole responses kept in temporary files, not in the server's memory.

A response a client gets whole (a WAV that is not streamed, an mp3, VOICEVOX's
``/synthesis``) cannot be sent before its last sample is made and, for most,
its peak known. Held in memory, a 5,000-character WAV took the HTTP process
from 70 to over 600 MB (its float32 samples, their copy joined, the pickled
copy sent to the worker to encode, the encoded bytes back). Instead, each
chunk is written to a file as it comes (:class:`ResponseSpool`), the worker
encodes that file into another (:func:`yomiage.server.encoding.encode_spooled`),
and :class:`TempFileBody` sends that one in blocks as the client takes them.
Each file is removed once read, and the one being sent as soon as it is opened,
so neither a client that leaves nor a failure leaves one behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncGenerator
from typing import BinaryIO

import numpy as np
import numpy.typing as npt
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from yomiage.audio.spool import AudioSpool, SpooledAudio
from yomiage.server.encoding import SpoolError, spool_errors

SEND_BLOCK = 1 << 18  # bytes read and sent at a time


def temp_file(suffix: str) -> str:
    """The path of a new empty file of this user's only, in the temporary folder."""
    with spool_errors():
        handle, path = tempfile.mkstemp(prefix="yomiage-", suffix=suffix)
    os.close(handle)
    return path


def remove(path: str) -> None:
    """Remove the file at ``path``, if it is still there."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class ResponseSpool(AudioSpool):
    """A whole response's samples written to a file in the temporary folder as they are
    made (:class:`yomiage.audio.spool.AudioSpool`: a client that leaves closes it, and
    an :meth:`add` after that raises Cancelled), its file errors said as SpoolError."""

    def __init__(self, sample_rate: int) -> None:
        with spool_errors():
            super().__init__(sample_rate, prefix="yomiage-", suffix=".f32")

    def add(self, samples: npt.NDArray[np.float32]) -> None:
        with spool_errors():
            super().add(samples)

    def finish(self) -> SpooledAudio:
        with spool_errors():
            return super().finish()


class TempFileBody:
    """A finished temporary file, opened and at once removed, read back a block at a time.

    Only the open file keeps its bytes, so they are freed when it is closed, whatever
    way the response ends. Opening blocks: do it in a worker thread.
    """

    def __init__(self, path: str) -> None:
        try:
            self._file: BinaryIO = open(path, "rb")  # noqa: SIM115 (closed by close)
        except OSError as exc:
            raise SpoolError.of(exc) from None
        finally:
            remove(path)
        self.size = os.fstat(self._file.fileno()).st_size

    async def blocks(self) -> AsyncGenerator[bytes, None]:
        """The file's bytes, :data:`SEND_BLOCK` at a time, read in a thread; closes it at
        the end (or when the caller stops early)."""
        try:
            while data := await asyncio.to_thread(self._file.read, SEND_BLOCK):
                yield data
        finally:
            self.close()

    def close(self) -> None:
        self._file.close()


class TempFileResponse(Response):
    """A temporary file (see :class:`TempFileBody`) as a whole response with its length."""

    def __init__(self, body: TempFileBody, media_type: str) -> None:
        self._file_body = body
        self.status_code = 200
        self.background = None
        self.media_type = media_type
        self.init_headers({"Content-Length": str(body.size)})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with contextlib.aclosing(self._file_body.blocks()) as blocks:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for data in blocks:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def temp_file_response(path: str, media_type: str) -> TempFileResponse:
    """The file at ``path`` as a response; the path is gone once this returns."""
    try:
        body = await asyncio.to_thread(TempFileBody, path)
    except BaseException:
        remove(path)
        raise
    return TempFileResponse(body, media_type)
