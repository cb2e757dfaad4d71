"""Bundles made once into the cache's ``converted/`` folder: an SBV2 voice or a DeBERTa
repository converted to ONNX (needs torch), an AIVMX file cut into a bundle (does not).

Each is made under a key that changes when what it was made from changes, or what
making it writes; a second process wanting the same bundle waits for the first.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path

from yomiage.errors import MissingExtraError, ModelLoadError, YomiageError, install_hint
from yomiage.runtime.bundle import FORMAT_VERSION
from yomiage.runtime.derived import bundle_files, remove_derived
from yomiage.sources import Cache
from yomiage.sources.cache import cache_write_error

log = logging.getLogger(__name__)


CONVERT_REVISION = 4
"""What converting an SBV2 voice on first use writes, counted; part of the cache key
of such a voice from 2 on. 1: every conversion before the key had a revision, some
without the decoder's trims between stages or its 2-D wide stages (issue 32); 2: both;
3: the encoder and the flow without masks of ones (a fifth fewer nodes in the flow);
4: speaker tables instead of the speaker projections' weights
(:mod:`yomiage.export.speaker_tables`) and leaner attention stacks. Raising it converts
each cached voice again on its next load, then removes the earlier conversion; without
torch the earlier conversion goes on serving, with a warning."""


def converted_voice(folder: Path, cache: Cache, checkpoint: Path | None = None) -> Path:
    """The bundle of the SBV2 voice in ``folder`` (of its ``checkpoint`` if given, else
    its newest), converted once into ``cache``."""

    def convert(source: Path, out: Path) -> object:
        # progress goes to the log: it says which checkpoint was read
        return _export_voice(checkpoint or source, out, progress=log.info)

    extra = checkpoint.name if checkpoint is not None else ""
    keys = [_key("voice", folder, _revised(extra, r)) for r in range(CONVERT_REVISION, 0, -1)]
    return _convert_once(keys, folder, cache, "voice.json", convert)


def _export_voice(source: Path, out: Path, progress: Callable[[str], None]) -> object:
    """``yomiage convert``'s export, imported only here: it needs torch."""
    from yomiage.export.convert import convert_voice

    return convert_voice(source, out, progress=progress)


def converted_bert(folder: Path, cache: Cache, quantize: str) -> Path:
    """The ONNX export of the DeBERTa repository in ``folder``, converted once."""

    def convert(source: Path, out: Path) -> object:
        from yomiage.export.convert import convert_bert  # needs torch

        return convert_bert(source, out, quantize=quantize)

    return _convert_once([_key("bert", folder, quantize)], folder, cache, "bert.json", convert)


def _key(kind: str, folder: Path, extra: str = "") -> str:
    """Changes when any file of ``folder`` (name, size, mtime) or the format changes."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    described = [
        (str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files
    ]
    blob = json.dumps([kind, FORMAT_VERSION, extra, str(folder.resolve()), described])
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


def _revised(extra: str, revision: int) -> str:
    """``extra`` as revision ``revision`` keys it: unchanged for 1, so conversions made
    before keys had a revision are found as revision 1."""
    return extra if revision == 1 else f"{extra}|revision {revision}"


def _convert_once(
    keys: list[str],
    folder: Path,
    cache: Cache,
    marker: str,
    convert: Callable[[Path, Path], object],
) -> Path:
    """The bundle of ``folder`` under ``keys[0]`` (``marker`` present), made by
    ``convert(folder, out)`` the first time; other processes wait for it. ``keys[1:]``
    are the keys earlier versions made it under, newest first: once the bundle is made,
    they are removed; where it cannot be made (no torch, or converting fails) the
    newest of them that exists serves instead, with a warning, so an upgrade never
    takes a working voice away."""
    target = cache.converted_dir(keys[0])
    if (target / marker).is_file():
        return target
    made_before = (cache.converted_dir(k) for k in keys[1:])
    earlier = next((d for d in made_before if (d / marker).is_file()), None)
    if not torch_installed():
        if earlier is not None:
            log.warning(
                "%s: using its conversion by an earlier yomiage; install torch (%s) so the "
                "next load converts it again with today's faster graphs",
                folder, install_hint("torch"),
            )  # fmt: skip
            return earlier
        raise MissingExtraError(
            f"converting {folder} to ONNX (or load a bundle made by `yomiage convert`)",
            "torch",
            "torch",
        )
    try:
        made = _made_once(target, folder, marker, convert, cache)
    except Exception as exc:  # whatever stopped it, the earlier conversion still works
        if earlier is None:
            raise
        log.warning(
            "%s: converting it again failed (%s); using its conversion by an earlier yomiage",
            folder, exc,
        )  # fmt: skip
        return earlier
    for key in keys[1:]:
        _remove_quietly(cache, key, keep=keys[0])
    return made


def torch_installed() -> bool:
    """Whether PyTorch imports here (converting needs it)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _remove_quietly(cache: Cache, key: str, keep: str | None = None) -> bool:
    """Remove ``converted/<key>`` and what running it made in the cache
    (:mod:`yomiage.runtime.derived`) but what the bundle ``converted/<keep>`` has
    too; True if the bundle went. Never raises: a bundle left behind costs disk,
    not the request."""
    files = bundle_files(cache.converted_dir(key))
    try:
        removed = cache.remove_converted(key)
    except (OSError, YomiageError) as exc:
        log.warning("could not remove the converted bundle %s: %s", key, exc)
        return False
    if removed and files:
        kept = [bundle_files(cache.converted_dir(keep))] if keep is not None else []
        remove_derived(cache.root, files, kept)
    return removed


def aivmx_once(path: Path, cache: Cache) -> Path:
    """The bundle of an AIVMX file in the cache, cut once (no torch needed), under a key of
    the file's sha256, the bundle format and :data:`AIVMX_CUT`. Making it removes the
    file's cuts by earlier versions, which would only cost disk from then on."""
    from yomiage.aivmx.bundle import write_bundle
    from yomiage.aivmx.reader import read_aivmx
    from yomiage.runtime.integrity import file_sha256

    sha256 = file_sha256(path, cache.root / "verified")
    target = cache.converted_dir(aivmx_key(sha256))
    if (target / "voice.json").is_file():
        return target

    def convert(source: Path, out: Path) -> object:
        return write_bundle(read_aivmx(source), out, sha256=sha256, progress=log.info)

    made = _made_once(target, path, "voice.json", convert, cache)
    remove_aivmx_cuts(sha256, cache, keep=made.name)
    return made


AIVMX_CUT = 4
"""What an AIVMX cut writes, counted; part of its cache key. 2: the decoder drops a
window's padding between stages (``decoder_stages``); 3: its wide stages run as 2-D
convolutions (:mod:`yomiage.export.decoder_layout`); 4: speaker tables
(:mod:`yomiage.export.speaker_tables`). Raising it cuts each file again on
its next load, so cached voices get what a new cut has."""


def aivmx_key(sha256: str) -> str:
    """The cache key of the bundle cut from the AIVMX file of this sha256 (its folder
    under ``converted/``; :meth:`Cache.remove_converted` takes it)."""
    return f"{_aivmx_prefix(sha256)}v{FORMAT_VERSION}-cut{AIVMX_CUT}"


def remove_aivmx_cuts(sha256: str, cache: Cache, keep: str | None = None) -> bool:
    """Remove every cut of this file in ``cache`` but ``keep``: this version's and those
    of earlier ones (whose keys had no ``-cut`` part). True if one went. Never raises:
    a cut left behind costs disk, not the request."""
    prefix = _aivmx_prefix(sha256)
    try:
        found = sorted(p.name for p in (cache.root / "converted").iterdir()
                       if p.name.startswith(prefix) and p.is_dir())  # fmt: skip
    except OSError:  # no converted/ yet, or unreadable: nothing cut
        return False
    removed = False
    for key in found:
        if key != keep:
            removed = _remove_quietly(cache, key, keep) or removed
    return removed


def _aivmx_prefix(sha256: str) -> str:
    return f"aivmx-{sha256[:32]}-"


def _made_once(
    target: Path, source: Path, marker: str, convert: Callable[[Path, Path], object], cache: Cache
) -> Path:
    with cache.lock(target.name):
        if (target / marker).is_file():  # another process converted it meanwhile
            return target
        log.info("converting %s to ONNX in %s (once; it takes minutes)", source, target)
        cache.sweep_converted(target.name)  # what an earlier, killed conversion of it left
        with cache.staging(target) as work:
            try:
                convert(source, work / "bundle")
            except ModelLoadError:
                raise
            except YomiageError as exc:  # ConversionError and the like
                raise ModelLoadError(f"cannot convert {source}: {exc}") from exc
            except OSError as exc:  # a full disk or a cache that is not writable: not the voice
                raise cache_write_error(exc, target, cache.root) from exc
            for path in (work / "bundle").iterdir():
                path.rename(work / path.name)
            (work / "bundle").rmdir()
    return target
