"""Raw SBV2 voices and DeBERTa folders, converted once into the cache for ONNX Runtime.

The CPU backend runs ONNX bundles. Given an SBV2 folder (or the DeBERTa
repository) instead, the engine converts it on first use when PyTorch is
installed and keeps the bundle under ``<cache>/converted/<key>``, where the
key changes whenever the source files or the bundle format do. Without
PyTorch the error says what to install or what to load instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from yomiage.errors import MissingExtraError, ModelLoadError
from yomiage.runtime.bundle import FORMAT_VERSION
from yomiage.sources import Cache

log = logging.getLogger(__name__)


def _key(kind: str, folder: Path, extra: str = "") -> str:
    """Changes when any file of ``folder`` (name, size, mtime) or the format changes."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    described = [
        (str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files
    ]
    blob = json.dumps([kind, FORMAT_VERSION, extra, str(folder.resolve()), described])
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


def _require_torch(what: Path) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise MissingExtraError(
            f"converting {what} to ONNX (or load a bundle made by `yomiage convert`)",
            "torch",
            "torch",
        ) from None


def converted_voice(folder: Path, cache: Cache) -> Path:
    """The ONNX bundle of the SBV2 voice ``folder``, converting it the first time."""
    target = cache.converted_dir(_key("voice", folder))
    if (target / "voice.json").is_file():
        return target
    _require_torch(folder)
    from yomiage.export.convert import ConversionError, convert_voice

    with cache.lock(target.name):
        if (target / "voice.json").is_file():  # another process converted it meanwhile
            return target
        log.info("converting %s to an ONNX bundle in %s (once)", folder, target)
        with cache.staging(target) as work:
            try:
                convert_voice(folder, work / "bundle")
            except ConversionError as exc:
                raise ModelLoadError(f"cannot convert {folder}: {exc}") from exc
            for path in (work / "bundle").iterdir():
                path.rename(work / path.name)
            (work / "bundle").rmdir()
    return target


def converted_bert(folder: Path, cache: Cache, quantize: str) -> Path:
    """The BERT bundle of the DeBERTa ``folder`` (with ``quantize`` graph), converted once."""
    target = cache.converted_dir(_key("bert", folder, quantize))
    if (target / "bert.json").is_file():
        return target
    _require_torch(folder)
    from yomiage.export.convert import ConversionError, convert_bert

    with cache.lock(target.name):
        if (target / "bert.json").is_file():
            return target
        log.info("converting BERT %s to ONNX in %s (once)", folder, target)
        with cache.staging(target) as work:
            try:
                convert_bert(folder, work / "bundle", quantize=quantize)
            except ConversionError as exc:
                raise ModelLoadError(f"cannot convert {folder}: {exc}") from exc
            for path in (work / "bundle").iterdir():
                path.rename(work / path.name)
            (work / "bundle").rmdir()
    return target
