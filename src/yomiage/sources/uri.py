"""Source strings parsed into typed descriptions; no I/O happens here.

Accepted forms:

- ``hf://owner/repo[@revision][/subfolder]``; a revision holding ``/`` is
  written URL-encoded (``hf://owner/repo@refs%2Fpr%2F1``);
- hub web addresses: ``https://huggingface.co/owner/repo``,
  ``.../tree/<revision>[/subfolder]`` (a folder) and ``.../resolve/<revision>/<file>``
  or ``.../blob/<revision>/<file>`` (a file: its folder is the source);
- ``s3://bucket[/prefix]``;
- ``file:///absolute/path`` and plain paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

from yomiage.errors import InvalidSourceError

HUB_HOSTS = ("huggingface.co", "www.huggingface.co", "hf.co")
_REPO_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_REVISION_BAD = re.compile(r"[\x00-\x1f\\]")


@dataclass(frozen=True)
class HubSource:
    """A folder of a HuggingFace hub model repository at a revision (branch, tag or commit)."""

    repo: str
    revision: str = "main"
    subfolder: str = ""

    def __str__(self) -> str:
        rev = "" if self.revision == "main" else "@" + quote(self.revision, safe="")
        sub = f"/{self.subfolder}" if self.subfolder else ""
        return f"hf://{self.repo}{rev}{sub}"


@dataclass(frozen=True)
class S3Source:
    """All objects under ``prefix/`` in an S3 (or S3-compatible) bucket."""

    bucket: str
    prefix: str = ""

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


@dataclass(frozen=True)
class LocalSource:
    """A folder on the local file system (not checked to exist here)."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)


Source = HubSource | S3Source | LocalSource


def safe_relpath(path: str, *, what: str, source: str = "") -> str:
    """``path`` as a clean relative POSIX path that cannot leave the folder it is joined to.

    Raises InvalidSourceError for NUL, backslashes, absolute paths, drive
    letters, ``..`` and ``.`` segments. Leading/trailing slashes are not
    allowed either: callers strip them first where they mean nothing. The
    empty string is allowed (the folder itself).
    """
    where = f" in {source}" if source else ""
    if not isinstance(path, str):
        raise InvalidSourceError(f"{what} must be a string, not {path!r}{where}", source=source)
    if path == "":
        return path
    if "\0" in path or "\\" in path or _REVISION_BAD.search(path):
        raise InvalidSourceError(
            f"{what} {path!r}{where} holds a NUL, control character or backslash", source=source
        )
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        raise InvalidSourceError(f"{what} {path!r}{where} must be relative", source=source)
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidSourceError(
            f"{what} {path!r}{where} may not hold '..', '.' or empty segments", source=source
        )
    return path


def _check_revision(revision: str, source: str) -> str:
    if not revision or revision in (".", "..") or _REVISION_BAD.search(revision):
        raise InvalidSourceError(f"{source}: invalid revision {revision!r}", source=source)
    if any(p in ("", ".", "..") for p in revision.split("/")):
        raise InvalidSourceError(f"{source}: invalid revision {revision!r}", source=source)
    return revision


def _check_repo(owner: str, name: str, source: str) -> str:
    for part in (owner, name):
        if not _REPO_PART.fullmatch(part) or ".." in part:
            raise InvalidSourceError(
                f"{source}: {part!r} is not a valid hub repository name part "
                "(expected hf://owner/repo)",
                source=source,
            )
    return f"{owner}/{name}"


def _parse_hf(source: str, rest: str) -> HubSource:
    parts = rest.rstrip("/").split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise InvalidSourceError(
            f"{source}: a hub source is hf://owner/repo[@revision][/subfolder]", source=source
        )
    owner, name = parts[0], parts[1]
    revision = "main"
    if "@" in name:
        name, encoded = name.split("@", 1)
        revision = _check_revision(unquote(encoded), source)
    repo = _check_repo(owner, name, source)
    subfolder = parts[2] if len(parts) == 3 else ""
    safe_relpath(unquote(subfolder), what="subfolder", source=source)
    return HubSource(repo, revision, unquote(subfolder))


def _parse_hub_url(source: str, path: str) -> HubSource:
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts and parts[0] in ("datasets", "spaces"):
        raise InvalidSourceError(
            f"{source}: only model repositories hold voices, not {parts[0]}", source=source
        )
    if parts and parts[0] == "models":
        parts = parts[1:]
    if len(parts) < 2:
        raise InvalidSourceError(
            f"{source}: expected https://huggingface.co/owner/repo[/tree/REV/FOLDER]",
            source=source,
        )
    repo = _check_repo(parts[0], parts[1], source)
    if len(parts) == 2:
        return HubSource(repo)
    kind, rest = parts[2], parts[3:]
    if kind not in ("tree", "resolve", "blob") or not rest:
        raise InvalidSourceError(
            f"{source}: expected .../tree/REVISION[/FOLDER] or .../resolve/REVISION/FILE",
            source=source,
        )
    revision = _check_revision(rest[0], source)
    inner = rest[1:] if kind == "tree" else rest[1:-1]  # a file: its folder
    if kind != "tree" and len(rest) < 2:
        raise InvalidSourceError(f"{source}: a {kind} address names a file", source=source)
    subfolder = safe_relpath("/".join(inner), what="subfolder", source=source)
    return HubSource(repo, revision, subfolder)


def _parse_s3(source: str, netloc: str, path: str) -> S3Source:
    if not _BUCKET.fullmatch(netloc) or ".." in netloc:
        raise InvalidSourceError(f"{source}: invalid bucket name {netloc!r}", source=source)
    prefix = safe_relpath(unquote(path).strip("/"), what="prefix", source=source)
    return S3Source(netloc, prefix)


def parse_source(source: str | Path, *, hub_hosts: tuple[str, ...] = HUB_HOSTS) -> Source:
    """The typed source that ``source`` names; InvalidSourceError if it is malformed.

    ``hub_hosts`` are the host names whose ``https://`` addresses are read as
    hub web addresses (add the host of ``HF_ENDPOINT`` for a mirror).
    """
    if isinstance(source, Path):
        return LocalSource(source)
    if not isinstance(source, str) or not source.strip():
        raise InvalidSourceError(f"not a voice source: {source!r}", source=str(source))
    if "\0" in source:
        raise InvalidSourceError(f"voice source {source!r} holds a NUL character", source=source)
    if source.startswith("hf://"):
        return _parse_hf(source, source[len("hf://") :])
    parsed = urlparse(source)
    scheme = parsed.scheme.lower()
    if scheme == "s3":
        return _parse_s3(source, parsed.netloc, parsed.path)
    if scheme in ("http", "https"):
        host = (parsed.hostname or "").lower()
        if host in hub_hosts:
            return _parse_hub_url(source, parsed.path)
        raise InvalidSourceError(
            f"{source}: only HuggingFace hub addresses are supported over HTTP "
            f"({', '.join(hub_hosts)}); for a mirror set HF_ENDPOINT",
            source=source,
        )
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise InvalidSourceError(
                f"{source}: file:// URIs must name a local path", source=source
            )
        return LocalSource(Path(unquote(parsed.path)))
    if scheme and len(scheme) > 1:  # one letter: a Windows drive
        raise InvalidSourceError(f"{source}: unknown source scheme {scheme!r}", source=source)
    return LocalSource(Path(source))
