"""Where voices and BERT come from, resolved to a local folder.

A *source* is a local folder (a plain path or ``file:///abs/path``), a hub
folder (``hf://owner/repo[@revision][/subfolder]`` or a huggingface.co web
address) or an S3 prefix (``s3://bucket/prefix``, needs ``yomiage[s3]``).
A *name* is an entry of the voice catalog (``jvnv-F1-jp``...), see
:mod:`yomiage.sources.catalog`.

Remote sources are downloaded into one cache (``YOMIAGE_CACHE``, else the
platform's user cache folder; see :mod:`yomiage.sources.cache`) with atomic
renames, size/sha256 checks and a file lock per folder, and are then used
from there without the network. Offline mode (``offline=True``, or
``HF_HUB_OFFLINE=1`` / ``YOMIAGE_OFFLINE=1`` in the environment) never opens a
socket: what is not cached fails with :class:`~yomiage.errors.OfflineError`,
which names the ``yomiage download`` command that would fetch it.

Every failure is a :class:`~yomiage.errors.SourceError` (a ModelLoadError):
InvalidSourceError, UnknownVoiceError, SourceNotFoundError, SourceAuthError,
SourceNetworkError, OfflineError, CacheError, or MissingExtraError for a
missing boto3.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

from yomiage.errors import SourceNotFoundError
from yomiage.sources import snapshot
from yomiage.sources.cache import Cache, Snapshot, default_cache_root
from yomiage.sources.catalog import BERT, FORMATS, CatalogEntry, Format, lookup, names
from yomiage.sources.hub import HubClient, HubRemote, hub_endpoint, hub_token
from yomiage.sources.uri import (
    HUB_HOSTS,
    HubSource,
    LocalSource,
    S3Source,
    Source,
    parse_source,
)

__all__ = [
    "BERT",
    "FORMATS",
    "Cache",
    "CatalogEntry",
    "HubSource",
    "LocalSource",
    "S3Source",
    "Source",
    "default_cache_root",
    "download",
    "is_cached",
    "lookup",
    "names",
    "offline_mode",
    "parse",
    "resolve",
    "resolve_name",
]

OFFLINE_ENV = ("HF_HUB_OFFLINE", "YOMIAGE_OFFLINE")
FILE_SOURCES = (".aivmx",)  # a voice that is one file (AivisSpeech's format), not a folder
_TRUE = {"1", "true", "yes", "on"}


def offline_mode(offline: bool | None = None) -> bool:
    """``offline`` if given, else whether ``HF_HUB_OFFLINE`` or ``YOMIAGE_OFFLINE`` is set."""
    if offline is not None:
        return bool(offline)
    return any(os.environ.get(var, "").strip().lower() in _TRUE for var in OFFLINE_ENV)


def parse(source: str | Path) -> Source:
    """The typed source for ``source``; also reads addresses on the ``HF_ENDPOINT`` host."""
    hosts: tuple[str, ...] = HUB_HOSTS
    custom = urlparse(hub_endpoint()).hostname
    if custom and custom not in hosts:
        hosts = (*hosts, custom.lower())
    return parse_source(source, hub_hosts=hosts)


def _command(what: str, cache_dir: Path | str | None) -> str:
    cmd = ["yomiage", "download", what]
    if cache_dir is not None:
        cmd += ["--cache-dir", str(cache_dir)]
    return shlex.join(cmd)


def _snapshot(src: HubSource | S3Source, cache: Cache) -> Snapshot:
    return cache.hub_snapshot(src) if isinstance(src, HubSource) else cache.s3_snapshot(src)


def _resolve(
    source: str | Path,
    *,
    cache_dir: Path | str | None,
    offline: bool | None,
    token: str | None,
    refresh: bool,
    command_for: str | None,
) -> Path:
    src = parse(source)
    if isinstance(src, LocalSource):
        path = src.path.expanduser()
        if not (path.is_dir() or (path.is_file() and path.suffix.lower() in FILE_SOURCES)):
            what = (
                f"{path} is a file, not a voice (a voice is a bundle folder, an SBV2 "
                "folder, an .aivmx file, or a .safetensors checkpoint in an SBV2 folder)"
                if path.exists()
                else f"no such folder {path}"
            )
            raise SourceNotFoundError(f"voice source {str(source)!r}: {what}", source=str(source))
        return path
    cache = Cache.at(cache_dir)
    is_offline = offline_mode(offline)
    reason = "offline=True was passed" if offline else "offline mode is on (HF_HUB_OFFLINE=1)"
    request = snapshot.Request(
        source=str(src),
        offline=is_offline,
        offline_reason=reason,
        command=_command(command_for or str(src), cache_dir),
        refresh=refresh,
    )

    def connect() -> snapshot.Remote:
        if isinstance(src, HubSource):
            return HubRemote(HubClient(hub_endpoint(), hub_token(token)), src)
        from yomiage.sources.s3 import S3Remote, make_client

        return S3Remote(make_client(), src)

    # boto3 is imported only when going online: a cache filled at build time
    # works in an image without the [s3] extra.
    file = _file_in_folder(src)
    if file is None:
        return snapshot.ensure(_snapshot(src, cache), request, connect)
    folder, name = file
    place = cache.file_snapshot(_snapshot(folder, cache), name, str(src))
    # The hub lists repository paths, S3 paths below the folder's prefix.
    hub_folder = folder.subfolder if isinstance(folder, HubSource) else ""
    listed = f"{hub_folder}/{name}" if hub_folder else name

    def connect_folder() -> snapshot.Remote:
        remote: snapshot.Remote
        if isinstance(folder, HubSource):
            remote = HubRemote(HubClient(hub_endpoint(), hub_token(token)), folder)
        else:
            from yomiage.sources.s3 import S3Remote, make_client

            remote = S3Remote(make_client(), folder)
        return snapshot.OneFile(remote, listed, str(src))

    return snapshot.ensure(place, request, connect_folder)


def _file_in_folder(src: HubSource | S3Source) -> tuple[HubSource | S3Source, str] | None:
    """A remote source naming one file (``hf://owner/repo/dir/voice.aivmx``): the folder
    that holds it and its name; None for a folder."""
    path = src.subfolder if isinstance(src, HubSource) else src.prefix
    if not path.lower().endswith(FILE_SOURCES):
        return None
    parent, _, name = path.rpartition("/")
    if isinstance(src, HubSource):
        return dataclasses.replace(src, subfolder=parent), name
    return dataclasses.replace(src, prefix=parent), name


def resolve(
    source: str | Path,
    *,
    cache_dir: Path | str | None = None,
    offline: bool | None = None,
    token: str | None = None,
    refresh: bool = False,
) -> Path:
    """The local folder that holds ``source``, downloading it into the cache if needed.

    - a path or ``file://`` URI: that folder, which must exist;
    - ``hf://...`` or a hub address: ``<cache>/hub/<owner>--<repo>/<revision>/<subfolder>``;
    - ``s3://bucket/prefix``: ``<cache>/s3/<bucket>/<prefix>``.

    A remote folder already complete in the cache is used without the
    network; files that are missing or changed on disk are fetched again.
    ``refresh=True`` asks the remote for a newer revision and fetches what
    changed. ``cache_dir`` overrides the cache root, ``offline`` the offline
    mode (None: from the environment) and ``token`` ``$HF_TOKEN``.

    Raises a :class:`~yomiage.errors.SourceError` subclass (see the module doc);
    never leaves a partly written file under its final name.
    """
    return _resolve(
        source,
        cache_dir=cache_dir,
        offline=offline,
        token=token,
        refresh=refresh,
        command_for=None,
    )


def resolve_name(
    name_or_source: str | Path,
    *,
    format: Format = "onnx",
    cache_dir: Path | str | None = None,
    offline: bool | None = None,
    token: str | None = None,
) -> Path:
    """Like :func:`resolve`, but a catalog name (``jvnv-F1-jp``) is looked up first.

    For a name, ``format="onnx"`` gives its ready ONNX export (HayaKoe
    layout: ``config.json``, ``style_vectors.npy``, ``synthesizer.onnx``,
    ``duration_predictor.onnx``) and ``"sbv2"`` the original SBV2 folder.
    For the BERT name with ``"onnx"`` the Q8 graph's folder is returned and
    its tokenizer (``BERT.tokenizer_source``) is fetched too; resolve that
    source again to get its folder. Anything that is not a catalog name is
    treated as a source.
    """
    _check_name(name_or_source)
    if isinstance(name_or_source, str) and name_or_source in names():
        entry = lookup(name_or_source)
        paths = [
            _resolve(
                s,
                cache_dir=cache_dir,
                offline=offline,
                token=token,
                refresh=False,
                command_for=entry.name,
            )
            for s in entry.sources(format)
        ]
        return paths[0]
    return resolve(name_or_source, cache_dir=cache_dir, offline=offline, token=token)


def _check_name(item: str | Path) -> None:
    """A bare word that is neither a catalog name nor a folder is a mistyped name."""
    if (
        isinstance(item, str)
        and item not in names()
        and "/" not in item
        and os.sep not in item
        and ":" not in item
        and not Path(item).expanduser().is_dir()
        and not Path(item).expanduser().is_file()
    ):
        lookup(item)  # raises UnknownVoiceError listing the known names


def download(
    names_or_sources: Iterable[str],
    *,
    bert: bool = False,
    format: Format = "onnx",
    cache_dir: Path | str | None = None,
    token: str | None = None,
) -> list[Path]:
    """Fill the cache with catalog names and/or remote sources; load nothing.

    This is the build step of a container image: afterwards ``resolve`` and
    ``resolve_name`` work offline. Every remote is asked for its current
    revision (files that did not change are not fetched again). ``bert=True``
    adds the BERT in the same ``format``. Returns the folders, in order, one per
    source fetched (an ONNX BERT is two: the graph and its tokenizer).
    Raises like :func:`resolve`; offline mode is an error here.
    """
    wanted: list[tuple[str, str | None]] = []
    for item in names_or_sources:
        if isinstance(item, str) and item in names():
            entry = lookup(item)
            wanted += [(s, entry.name) for s in entry.sources(format)]
        else:
            _check_name(item)
            wanted.append((item, None))
    if bert:
        wanted += [(s, BERT.name) for s in BERT.sources(format)]
    paths: list[Path] = []
    for source, name in dict.fromkeys(wanted):
        path = _resolve(
            source,
            cache_dir=cache_dir,
            offline=None,
            token=token,
            refresh=True,
            command_for=name,
        )
        paths.append(path)
    return paths


def is_cached(source: str | Path, *, cache_dir: Path | str | None = None) -> bool:
    """True if ``source`` can be used offline: a local folder that exists, or a complete
    and intact cached snapshot. Never touches the network."""
    src = parse(source)
    if isinstance(src, LocalSource):
        path = src.path.expanduser()
        return path.is_dir() or (path.is_file() and path.suffix.lower() in FILE_SOURCES)
    return snapshot.cached(_snapshot(src, Cache.at(cache_dir)))
