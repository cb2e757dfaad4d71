"""Receiving an install's file before the change lock: an upload or a download, each
bounded in time, and few at once.

``POST /aivm_models/install`` first receives its file into the store's partial
file (an upload through :func:`~.upload_form.read_install_form`, a URL through
the store's fetch), and takes the change lock only to check, swap and load it,
so a slow client or source holds no other change back. Receiving is bounded so
that no client holds a connection, a partial file or a thread for ever:

* the whole upload or download must end within ``--install-timeout`` (408 for an
  upload, 504 for a download: the source was too slow);
* a client that leaves stops its download at once (the source's socket is shut
  down) and its partial file is removed;
* at most :data:`MAX_RECEIVING` installs receive at once (more get 429 with
  ``Retry-After``), so partial files take at most that many ``--max-upload-mb``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from fastapi import Request

from yomiage.aivmx.stop import DownloadStoppedError, DownloadTimeoutError, FetchStop
from yomiage.aivmx.upload import Upload, UploadTooLargeError
from yomiage.errors import NoSpaceError
from yomiage.server.errors import APIError
from yomiage.server.request_body import ClientGone
from yomiage.server.speech import client_left
from yomiage.server.voicevox.http import VoxError
from yomiage.server.voicevox.upload_form import (
    FormError,
    InstallForm,
    UploadTimeout,
    read_install_form,
)

T = TypeVar("T")
MAX_RECEIVING = 2  # installs receiving their file at once; each may take --max-upload-mb
RETRY_AFTER_S = 10
# How long a stopped download may take to let go of its partial file: a web download's
# socket is shut at once; a hub or S3 one ends its current file first.
LET_GO_S = 5.0


class ReceivingSlots:
    """How many installs are receiving their file now; past ``limit``, 429.

    Used on the event loop only (no lock: nothing else touches it)."""

    def __init__(self, limit: int = MAX_RECEIVING) -> None:
        self.limit = limit
        self.busy = 0

    @contextmanager
    def take(self) -> Iterator[None]:
        if self.busy >= self.limit:
            raise APIError(
                429, f"{self.busy} installs are receiving their files now, the most this "
                "server takes at once; try again when one has ended",
                code="too_many_installs", headers={"Retry-After": str(RETRY_AFTER_S)},
            )  # fmt: skip
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1


async def receive_form(
    request: Request, upload: Upload, *, idle_timeout: float, total_timeout: float
) -> InstallForm:
    """The install form, its file part written to ``upload`` as it arrives (which is
    then named after the client's file name); every refusal a VoxError."""
    try:
        form = await read_install_form(
            request.receive, request.headers.get("content-type", ""), upload,
            idle_timeout=idle_timeout, total_timeout=total_timeout,
        )  # fmt: skip
    except UploadTooLargeError as exc:
        raise VoxError(413, str(exc)) from None
    except FormError as exc:
        raise VoxError(422, str(exc)) from None
    except UploadTimeout as exc:
        raise VoxError(408, str(exc)) from None
    except ClientGone:
        raise VoxError(400, "the client left before the upload ended") from None
    except NoSpaceError as exc:
        raise VoxError(507, str(exc)) from None
    upload.filename = form.filename
    return form


async def fetch_watched(
    request: Request, fetch: Callable[[FetchStop], T], timeout: float, *, limit: float
) -> T:
    """``fetch(stop)`` on a thread, stopped when the client leaves or ``timeout`` s pass
    (504, naming ``limit``: the install's whole time), whichever comes first. Returns
    once the thread has let go of what it fetches into (or :data:`LET_GO_S` later), so
    the caller may remove it."""
    stop = FetchStop(timeout, limit=limit)
    work = asyncio.ensure_future(asyncio.to_thread(fetch, stop))
    work.add_done_callback(_retrieved)  # one stopped late raises to no one
    gone = asyncio.ensure_future(client_left(request.receive))
    try:
        done, _ = await asyncio.wait({work, gone}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
    except BaseException:  # the server is stopping: the fetch stops too
        stop.stop("the server is stopping")
        raise
    finally:
        gone.cancel()
    if work not in done:
        left = gone in done
        if left:
            stop.stop("the client left")
        else:
            stop.expire()
        await asyncio.wait({work}, timeout=LET_GO_S)
        if left:
            raise VoxError(400, "the client left before the download ended")
        if not work.done():
            raise VoxError(504, f"the download did not end within {limit:g} s; the source "
                                "is too slow for the server's --install-timeout")  # fmt: skip
    try:
        return work.result()
    except DownloadTimeoutError as exc:
        raise VoxError(504, str(exc)) from None
    except DownloadStoppedError as exc:
        raise VoxError(400, str(exc)) from None


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
