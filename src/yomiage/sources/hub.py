"""A small HuggingFace hub client on the standard library (no huggingface_hub).

It speaks three endpoints of the hub's file API:

- ``GET {endpoint}/api/models/{repo}/revision/{revision}``: the commit sha,
  so every file comes from the same commit even if the branch moves;
- ``GET {endpoint}/api/models/{repo}/tree/{commit}/{subfolder}?recursive=1``:
  the files with ``size``, git blob ``oid`` and, for LFS files,
  ``lfs.oid`` (sha256); pages are followed through ``Link: rel="next"``;
- ``GET {endpoint}/{repo}/resolve/{commit}/{path}``: the bytes, following
  redirects (the token is not sent to another host) and resuming with
  ``Range``.

``HF_ENDPOINT`` sets the endpoint (default https://huggingface.co) and
``HF_TOKEN`` the token sent as ``Authorization: Bearer``.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlparse

from yomiage._version import __version__
from yomiage.errors import (
    SourceAuthError,
    SourceError,
    SourceNetworkError,
    SourceNotFoundError,
)
from yomiage.sources.manifest import CHUNK
from yomiage.sources.transfer import Listing, RemoteFile
from yomiage.sources.uri import HubSource

DEFAULT_ENDPOINT = "https://huggingface.co"
ENV_ENDPOINT = "HF_ENDPOINT"
ENV_TOKEN = "HF_TOKEN"
TIMEOUT_S = 30.0
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


def hub_endpoint() -> str:
    """``$HF_ENDPOINT`` without a trailing slash, else https://huggingface.co."""
    return (os.environ.get(ENV_ENDPOINT) or DEFAULT_ENDPOINT).rstrip("/")


def hub_token(token: str | None = None) -> str | None:
    """``token`` if given, else ``$HF_TOKEN`` (or the older ``$HUGGING_FACE_HUB_TOKEN``)."""
    return token or os.environ.get(ENV_TOKEN) or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


class _SameHostAuthRedirect(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never send the hub token to another host (e.g. a CDN)."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urlparse(newurl).netloc != urlparse(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


@dataclass(frozen=True)
class HubClient:
    """HTTP access to one hub endpoint with an optional token. Thread-safe (no state)."""

    endpoint: str = field(default_factory=hub_endpoint)
    token: str | None = field(default_factory=hub_token)
    timeout: float = TIMEOUT_S

    def _open(self, url: str, what: str, source: str, offset: int = 0) -> Any:
        headers = {"User-Agent": f"yomiage/{__version__}", "Accept-Encoding": "identity"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if offset:
            headers["Range"] = f"bytes={offset}-"
        opener = urllib.request.build_opener(_SameHostAuthRedirect())
        try:
            return opener.open(urllib.request.Request(url, headers=headers), timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            exc.close()
            hub_code = exc.headers.get("X-Error-Code", "") if exc.headers else ""
            raise self._http_error(exc.code, hub_code, what, source) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise SourceNetworkError(
                f"{source}: cannot reach the hub at {self.endpoint} for {what} ({reason}); "
                "check the network (or HF_ENDPOINT), or use a filled cache offline",
                source=source,
            ) from exc

    def _http_error(self, code: int, hub_code: str, what: str, source: str) -> SourceError:
        if code in (401, 403):
            hint = (
                "the token in HF_TOKEN was refused or cannot read this repository"
                if self.token
                else "the repository may be private or gated: set HF_TOKEN to a token that "
                "can read it"
            )
            return SourceAuthError(f"{source}: HTTP {code} for {what}; {hint}", source=source)
        if code == 404:
            detail = {
                "RepoNotFound": "no such repository",
                "RevisionNotFound": "no such revision",
                "EntryNotFound": "no such file or folder",
            }.get(hub_code, "not found")
            return SourceNotFoundError(f"{source}: {detail} ({what}, HTTP 404)", source=source)
        return SourceNetworkError(f"{source}: HTTP {code} for {what}", source=source)

    def _json(self, url: str, what: str, source: str) -> tuple[Any, str | None]:
        with self._open(url, what, source) as resp:
            try:
                body = json.loads(resp.read())
            except (ValueError, OSError, http.client.HTTPException) as exc:
                raise SourceNetworkError(
                    f"{source}: unreadable answer from {url} ({exc})", source=source
                ) from exc
            match = _NEXT.search(resp.headers.get("Link", "") or "")
        return body, match.group(1) if match else None

    def commit(self, src: HubSource) -> str:
        """The commit sha that ``src.revision`` points at (the revision itself if not given)."""
        url = f"{self.endpoint}/api/models/{src.repo}/revision/{quote(src.revision, safe='')}"
        body, _ = self._json(url, f"repository {src.repo} at revision {src.revision}", str(src))
        sha = body.get("sha") if isinstance(body, dict) else None
        return sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}", sha) else src.revision

    def list_files(self, src: HubSource, commit: str) -> list[RemoteFile]:
        """Every file below ``src.subfolder`` at ``commit``; paths are repo paths."""
        sub = f"/{quote(src.subfolder)}" if src.subfolder else ""
        url: str | None = (
            f"{self.endpoint}/api/models/{src.repo}/tree/{quote(commit, safe='')}{sub}?recursive=1"
        )
        what = f"the file list of {src.repo}@{src.revision}/{src.subfolder}"
        files: list[RemoteFile] = []
        while url:
            body, url = self._json(url, what, str(src))
            if not isinstance(body, list):
                raise SourceNetworkError(f"{src}: unexpected answer for {what}", source=str(src))
            files.extend(_remote_file(entry) for entry in body if entry.get("type") == "file")
        return files

    @contextmanager
    def open_file(
        self, src: HubSource, commit: str, path: str, offset: int
    ) -> Iterator[tuple[int, Iterator[bytes]]]:
        """The bytes of repo file ``path`` from ``offset`` (or 0 if the server ignores Range)."""
        url = f"{self.endpoint}/{src.repo}/resolve/{quote(commit, safe='')}/{quote(path)}"
        resp = self._open(url, f"file {path} at {src.revision}", str(src), offset)
        try:
            start = offset if resp.status == 206 and _range_start(resp) == offset else 0
            yield start, _chunks(resp, str(src), path)
        finally:
            resp.close()


def _range_start(resp: Any) -> int:
    match = re.match(r"bytes (\d+)-", resp.headers.get("Content-Range", "") or "")
    return int(match.group(1)) if match else -1


def _chunks(resp: Any, source: str, path: str) -> Iterator[bytes]:
    try:
        while block := resp.read(CHUNK):
            yield block
    except (OSError, http.client.HTTPException) as exc:
        raise SourceNetworkError(
            f"{source}: the download of {path} broke off ({exc!r}); run again to resume it",
            source=source,
        ) from exc


def _remote_file(entry: dict[str, Any]) -> RemoteFile:
    lfs = entry.get("lfs") or {}
    size = entry.get("size", lfs.get("size"))
    sha256 = lfs.get("oid") or lfs.get("sha256")
    oid = entry.get("oid")
    return RemoteFile(
        path=str(entry.get("path", "")),
        size=int(size) if isinstance(size, int) else None,
        sha256=str(sha256) if sha256 else None,
        git_sha1=None if sha256 or not isinstance(oid, str) else oid,
        etag=str(sha256 or oid or ""),
    )


@dataclass(frozen=True)
class HubRemote:
    """One hub folder as a snapshot remote: files listed and fetched at one commit."""

    client: HubClient
    src: HubSource

    def listing(self) -> Listing:
        commit = self.client.commit(self.src)
        files = self.client.list_files(self.src, commit)

        def open_(remote: RemoteFile, offset: int) -> Any:
            return self.client.open_file(self.src, commit, remote.path, offset)

        return Listing(commit, tuple(files), open_)
