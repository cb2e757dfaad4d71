"""A request body read whole, in bounded time and size, before any route sees it.

Bodies here are small (at most :attr:`ServerConfig.max_body_bytes`), so the
guard reads each one up front: a client that trickles its body cannot hold a
connection and a slot past ``body_timeout`` (408), one that sends more than
the limit is cut off at the limit (413), and JSON nested deeper than
:data:`MAX_JSON_DEPTH` is refused (400) before the parser recurses into it
(``json.loads`` of 20,000 ``[`` raised RecursionError: a 500 with a traceback).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from starlette.types import Message, Receive

# Deeper than any request the API takes (a VOICEVOX /multi_synthesis list of
# AudioQuery objects is 6 levels), far below Python's recursion limit.
MAX_JSON_DEPTH = 64

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def nests_too_deep(body: bytes) -> bool:
    """Whether the arrays and objects of a JSON text nest deeper than
    :data:`MAX_JSON_DEPTH` (brackets in strings do not count; for text that is
    not JSON the parser reports the error later)."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False  # the common case, at C speed
    depth = 0
    for byte in _STRING.sub(b"", body).translate(None, _NOT_BRACKETS):
        depth += 1 if byte in b"[{" else -1
        if depth > MAX_JSON_DEPTH:
            return True
    return False


@dataclass(frozen=True)
class BodyRefused:
    """Why a body was not read: the status, message and code to answer with."""

    status: int
    message: str
    code: str


class ClientGone(Exception):
    """The client disconnected while its body was being read."""


async def read_body(receive: Receive, limit: int, timeout: float) -> bytes | BodyRefused:
    """The whole body, or why not (raises :class:`ClientGone` if the client left)."""
    chunks: list[bytes] = []
    size = 0

    async def read_all() -> BodyRefused | None:
        nonlocal size
        more = True
        while more:
            message: Message = await receive()
            if message["type"] != "http.request":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return BodyRefused(413, f"the request body exceeds {limit} bytes", "body_too_large")
            chunks.append(chunk)
            more = message.get("more_body", False)
        return None

    try:
        refused = await asyncio.wait_for(read_all(), timeout)
    except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
        return BodyRefused(
            408,
            f"the request body did not arrive within {timeout:g} s",
            "request_timeout",
        )
    return refused or b"".join(chunks)
