"""Getting an AIVMX voice's bytes from a source, for the model store (:mod:`.store`).

AivisSpeech installs a voice from any URL, so this is a small streaming HTTP
client on the standard library: it follows redirects (http and https only),
refuses a body larger than the store's limit before reading it when the server
says its size, cuts the stream at the limit when it does not, and turns every
failure into a :class:`~yomiage.errors.SourceError` that names the address and
the HTTP status. The bytes go to a sink (the store's partial file); nothing here
decides where a voice is installed.

AivisHub's model pages (``https://hub.aivis-project.com/aivm-models/<uuid>``)
are web pages; :func:`download_url` maps them to the API address that serves
the file. HuggingFace file addresses (``.../resolve/<rev>/<path>.aivmx``) are
mapped by :func:`hub_file_source` to ``hf://`` so they go through the cache.
"""

from __future__ import annotations

import http.client
import logging
import os
import re
import stat
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import quote, unquote, urlparse

from yomiage._version import __version__
from yomiage.aivmx.stop import FetchStop
from yomiage.aivmx.upload import shown as shown  # where messages have always found it
from yomiage.artifacts import aivmx_file
from yomiage.errors import (
    InvalidSourceError,
    OfflineError,
    SourceAuthError,
    SourceError,
    SourceNetworkError,
    SourceNotFoundError,
)
from yomiage.sources import LocalSource, offline_mode, parse, resolve
from yomiage.sources.hub import hub_endpoint
from yomiage.sources.uri import HUB_HOSTS

TIMEOUT_S = 30.0  # per socket operation, not for the whole download
CHUNK = 1 << 20
UNKNOWN_SIZE_STEP = 64 << 20  # progress every this many bytes when the size is not told
AIVISHUB_PAGE = re.compile(
    r"https?://hub\.aivis-project\.com/aivm-models/"
    r"(?P<uuid>[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12})/?"
)
AIVISHUB_DOWNLOAD = "https://api.aivis-project.com/v1/aivm-models/{uuid}/download?model_type=AIVMX"

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


class Sink(Protocol):
    """Where the bytes go; ``write`` raises (the store's UploadTooLargeError) past a limit."""

    def write(self, chunk: bytes) -> None: ...


def is_web_address(source: str) -> bool:
    """True for an ``http(s)://`` address that is not a HuggingFace hub address: one that
    :func:`download` fetches directly (the hub's go through ``yomiage.sources``)."""
    try:
        parsed = urlparse(source)
    except ValueError:  # "http://[::1": no address at all
        return False
    if parsed.scheme.lower() not in ("http", "https"):
        return False
    return (parsed.hostname or "").lower() not in _hub_hosts()


def _hub_hosts() -> tuple[str, ...]:
    """The hub's host names, with ``$HF_ENDPOINT``'s (a mirror), as ``sources.parse`` reads them."""
    custom = (urlparse(hub_endpoint()).hostname or "").lower()
    return (*HUB_HOSTS, custom) if custom else HUB_HOSTS


def download_url(url: str) -> str:
    """The address that serves the file ``url`` means: an AivisHub model page becomes
    its AIVMX download address; any other address is itself."""
    match = AIVISHUB_PAGE.fullmatch(url.split("?", 1)[0].split("#", 1)[0])
    if match is None:
        return url
    return AIVISHUB_DOWNLOAD.format(uuid=match["uuid"].lower())


def hub_file_source(url: str) -> str | None:
    """``hf://owner/repo@rev/path/x.aivmx`` for a hub address of one AIVMX file
    (``https://huggingface.co/owner/repo/resolve/rev/path/x.aivmx``, or ``blob``), so that
    one file is fetched rather than its whole folder; None for any other address."""
    parsed = urlparse(url)
    if parsed.scheme.lower() not in ("http", "https"):
        return None
    if (parsed.hostname or "").lower() not in _hub_hosts():
        return None
    parts = parsed.path.strip("/").split("/")
    if parts and parts[0] == "models":
        parts = parts[1:]
    if len(parts) < 5 or parts[2] not in ("resolve", "blob"):
        return None
    if not parts[-1].lower().endswith(".aivmx"):
        return None
    revision = quote(unquote(parts[3]), safe="")
    return f"hf://{parts[0]}/{parts[1]}@{revision}/{'/'.join(parts[4:])}"


class _WebRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http and https addresses only (urllib would also go to ftp)."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if urlparse(newurl).scheme.lower() not in ("http", "https"):
            raise SourceNotFoundError(
                f"{shown(req.full_url)} redirects to {shown(newurl)}, not a web address",
                source=req.full_url,
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def download(
    url: str,
    sink: Sink,
    *,
    max_bytes: int,
    too_large: Callable[[int], Exception],
    progress: Progress | None = None,
    timeout: float = TIMEOUT_S,
    stop: FetchStop | None = None,
) -> int:
    """Stream ``url`` into ``sink``; returns the number of bytes written.

    ``too_large(size)`` is raised before the body is read when the server's
    Content-Length passes ``max_bytes`` (the sink cuts a body of unknown size).
    Raises SourceNotFoundError (404, 410), SourceAuthError (401, 403) and
    SourceNetworkError (other statuses, no connection, a body shorter than its
    Content-Length), each naming the address. ``progress`` hears every ~10 %.
    ``timeout`` bounds each socket wait; ``stop`` the whole download (its
    deadline, or a stop from another thread: DownloadTimeoutError, DownloadStoppedError).
    """
    stop = stop or FetchStop()
    opener = urllib.request.build_opener(_WebRedirect(), *stop.handlers())
    request = urllib.request.Request(
        url, headers={"User-Agent": f"yomiage/{__version__}", "Accept-Encoding": "identity"}
    )
    try:
        stop.check(url)
        response = opener.open(request, timeout=stop.wait(timeout))
    except urllib.error.HTTPError as exc:
        exc.close()
        raise _status_error(url, exc.code) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        stop.check(url)  # a stop or the deadline, not the network, ended it
        reason = getattr(exc, "reason", exc)
        raise SourceNetworkError(
            f"cannot download {shown(url)}: {reason}; check the address and the network",
            source=url,
        ) from exc
    with response:
        total = _content_length(response)
        if total is not None and total > max_bytes:
            raise too_large(total)
        kind = (response.headers.get("Content-Type") or "").lower()
        if kind.startswith("text/html"):
            raise SourceNotFoundError(
                f"{shown(url)} serves a web page, not an AIVMX file; give the address of "
                "the file itself",
                source=url,
            )
        return _copy(response, sink, url, total, progress, stop, timeout)


def _copy(
    response: Any,
    sink: Sink,
    url: str,
    total: int | None,
    progress: Progress | None,
    stop: FetchStop,
    timeout: float,
) -> int:
    step = max(total // 10, CHUNK) if total else UNKNOWN_SIZE_STEP
    done = reported = 0
    next_report = step
    try:
        while True:
            stop.check(url)
            stop.wait(timeout)
            block = response.read1(CHUNK)  # what has arrived: a trickle cannot hold a read
            if not block:
                break
            sink.write(block)
            done += len(block)
            if done >= next_report:
                next_report = done - done % step + step
                reported = done
                _report(progress, url, done, total)
    except (OSError, http.client.HTTPException) as exc:
        stop.check(url)
        raise SourceNetworkError(
            f"the download of {shown(url)} broke off after {done} bytes ({exc!r}); try again",
            source=url,
        ) from exc
    if total is not None and done != total:
        stop.check(url)  # a stop shuts the socket: the body ends short
        raise SourceNetworkError(
            f"the download of {shown(url)} ended after {done} of {total} bytes; try again",
            source=url,
        )
    if reported != done:
        _report(progress, url, done, total or done)
    return done


def _report(progress: Progress | None, url: str, done: int, total: int | None) -> None:
    if total:
        message = (
            f"{shown(url)}: {done / 1e6:.1f} of {total / 1e6:.1f} MB ({100 * done // total} %)"
        )
    else:
        message = f"{shown(url)}: {done / 1e6:.1f} MB"
    log.info("downloading %s", message)
    if progress is not None:
        progress(message)


def _content_length(response: Any) -> int | None:
    value = response.headers.get("Content-Length")
    try:
        length = int(value) if value is not None else None
    except ValueError:
        return None
    return length if length is not None and length >= 0 else None


def _status_error(url: str, code: int) -> SourceError:
    if code in (404, 410):
        return SourceNotFoundError(f"{shown(url)}: not found (HTTP {code})", source=url)
    if code in (401, 403):
        return SourceAuthError(
            f"{shown(url)}: access refused (HTTP {code}); the file may be private", source=url
        )
    return SourceNetworkError(f"{shown(url)}: the server answered HTTP {code}", source=url)


def fetch(
    source: str,
    sink: Sink,
    *,
    max_bytes: int,
    too_large: Callable[[int], Exception],
    progress: Progress | None = None,
    cache_dir: Path | str | None = None,
    offline: bool | None = None,
    token: str | None = None,
    stop: FetchStop | None = None,
) -> None:
    """Write the AIVMX file ``source`` means into ``sink``: a web address downloaded
    directly (an AivisHub model page from its download address; OfflineError in
    offline mode, before any socket), anything else through
    :func:`yomiage.sources.resolve` (a remote asked for its newest revision unless
    offline) and copied. ``too_large(size)`` is raised for a file over ``max_bytes``.
    ``stop`` bounds the whole fetch (:class:`~yomiage.aivmx.stop.FetchStop`); a hub or
    S3 download into the cache is checked against it only once it is done."""
    stop = stop or FetchStop()
    if is_web_address(source):
        if offline_mode(offline):
            raise OfflineError(
                f"cannot download {shown(source)}: offline mode is on "
                "(offline=True, HF_HUB_OFFLINE or YOMIAGE_OFFLINE)",
                source=source,
            )
        url = download_url(source)
        download(url, sink, max_bytes=max_bytes, too_large=too_large, progress=progress, stop=stop)
        return
    remote = not isinstance(parse(source), LocalSource)
    if remote and not source.rstrip("/").lower().endswith(".aivmx"):
        raise InvalidSourceError(
            f"{shown(source)}: name the .aivmx file itself (hf://owner/repo/voice.aivmx); "
            "an install does not fetch a whole remote folder",
            source=source,
        )
    folder = resolve(source, cache_dir=cache_dir, offline=offline, token=token,
                     refresh=remote and not offline_mode(offline))  # fmt: skip
    stem = source.rstrip("/").rsplit("/", 1)[-1]
    stem = stem[: -len(".aivmx")] if stem.lower().endswith(".aivmx") else ""
    path = aivmx_file(folder, stem)
    if path is None:
        raise SourceNotFoundError(f"{shown(source)} holds no AIVMX file", source=source)
    try:
        with _open_regular(path, source) as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > max_bytes:
                raise too_large(size)
            while True:
                stop.check(source)
                block = stream.read(CHUNK)
                if not block:
                    break
                sink.write(block)
    except OSError as exc:
        raise SourceNotFoundError(
            f"cannot read {path}: {exc.strerror or exc}", source=source
        ) from exc
    if progress is not None:
        progress(f"copied {path.name}: {size / 1e6:.1f} MB")


def _open_regular(path: Path, source: str) -> BinaryIO:
    """``path`` opened for reading if it is a regular file: a FIFO would block the read
    for as long as no one writes to it, a device never end (``/dev/zero``)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SourceNotFoundError(
                f"{shown(source)}: {path.name} is not a regular file", source=source
            )
        return os.fdopen(fd, "rb")  # O_NONBLOCK means nothing to a regular file
    except BaseException:
        os.close(fd)
        raise


def recorded_source(source: str) -> str:
    """``source`` as it is kept for updates: a relative path made absolute, a hub file
    address as ``hf://`` (so one file is fetched, not its folder). InvalidSourceError
    for a malformed source."""
    try:
        valid = isinstance(source, str) and bool(source.strip()) and bool(urlparse(source))
    except ValueError:
        valid = False
    if not valid:
        raise InvalidSourceError(f"not a model source: {shown(str(source))}", source=str(source))
    hub = hub_file_source(source)
    if hub is not None:
        return hub
    if is_web_address(source):
        return source
    parsed = parse(source)
    if isinstance(parsed, LocalSource) and "://" not in source:
        return str(parsed.path.expanduser().absolute())
    return source
