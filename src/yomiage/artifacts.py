"""Where a voice and its BERT come from, and the bundles made from them once.

An engine is given sources (catalog names, folders, ``hf://``, ``s3://``);
:class:`Artifacts` turns them into the folders a backend loads:

* a voice source becomes a folder of a kind the backend runs; on CPU an SBV2
  folder (or a DeBERTa repository) is converted once into the cache, and an
  AIVMX file cut once (:mod:`yomiage.converted`);
* the BERT is ``bert_source`` if given, else the one shipped beside the voice
  (``bert/`` in a bundle from ``yomiage convert``, HayaKoe's ``onnx/bert/q8``,
  or the one in the hub repository a HayaKoe voice came from), else the
  catalog's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from yomiage.converted import aivmx_once, converted_bert, converted_voice
from yomiage.errors import (
    ModelLoadError,
    OfflineError,
    SourceError,
    SourceNotFoundError,
)
from yomiage.runtime.layouts import CHECKPOINT_SUFFIX, VoiceLayout, detect_layout
from yomiage.sources import (
    BERT,
    Cache,
    HubSource,
    LocalSource,
    download,
    names,
    parse,
    resolve,
    resolve_name,
)
from yomiage.sources.catalog import Format


def bert_beside(voice: Path) -> tuple[Path, Path | None] | None:
    """The BERT (and tokenizer folder, when apart) that ships with a voice folder."""
    if (voice / "bert" / "bert.json").is_file():
        return voice / "bert", None
    root = voice.parent.parent.parent
    if voice.parent.name == "speakers" and (root / "onnx" / "bert" / "q8").is_dir():
        tokenizer = root / "bert" / "tokenizer"
        return root / "onnx" / "bert" / "q8", tokenizer if tokenizer.is_dir() else None
    return None


def is_raw_bert(folder: Path) -> bool:
    """A DeBERTa folder as published (weights, no ONNX graph)."""
    has_weights = any(folder.glob("*.safetensors")) or (folder / "pytorch_model.bin").is_file()
    return (folder / "config.json").is_file() and has_weights and not any(folder.glob("*.onnx"))


@dataclass(frozen=True)
class Artifacts:
    """Sources to folders for one engine: ``backend`` is "onnx" or "torch"."""

    backend: str
    cache_dir: Path | None = None
    offline: bool | None = None
    token: str | None = None
    bert_source: str | Path | None = None
    bert_precision: str = "q8"

    @property
    def format(self) -> Format:
        """What a catalog name means here: the ONNX export on CPU, the SBV2 folder for torch."""
        return "onnx" if self.backend == "onnx" else "sbv2"

    @property
    def cache(self) -> Cache:
        return Cache.at(self.cache_dir)

    def voice_folder(self, name: str, source: str | Path) -> Path:
        """The folder the backend loads for voice ``name`` (converted once if need be)."""
        checkpoint = checkpoint_file(source)
        if checkpoint is not None:
            return self._checkpoint_voice(checkpoint)
        folder = self._resolve(source)
        aivmx = aivmx_file(folder, name)
        if aivmx is not None:
            if self.backend == "torch":
                raise ModelLoadError(
                    f"voice {name!r}: {aivmx} is an AIVMX voice (ONNX); it runs on the ONNX "
                    "backend (device='cpu'), not on PyTorch"
                )
            return aivmx_once(aivmx, self.cache)
        layout = detect_layout(folder)
        if layout is None:
            raise ModelLoadError(
                f"voice {name!r}: {folder} is not a voice (no voice.json, or config.json with "
                "synthesizer.onnx or a .safetensors file)"
            )
        if self.backend == "torch" and layout is not VoiceLayout.SBV2:
            raise ModelLoadError(
                f"voice {name!r}: {folder} is a {layout.value}; the PyTorch backend needs the "
                "SBV2 folder (config.json + .safetensors)"
            )
        if self.backend == "onnx" and layout is VoiceLayout.SBV2:
            return converted_voice(folder, self.cache)
        return folder

    def bert_folders(
        self, voices: list[Path], sources: Iterable[str | Path]
    ) -> tuple[Path, Path | None]:
        """The BERT folder and, when apart from it, its tokenizer folder."""
        if self.bert_source is not None:
            folder = self._resolve(self.bert_source)
            if self.bert_source == BERT.name and self.backend == "onnx":
                return folder, self._fetch(BERT.tokenizer_source)
        else:
            if self.backend == "onnx":
                beside = next((b for b in map(bert_beside, voices) if b is not None), None)
                beside = beside or self._bert_in_same_repo(sources)
                if beside is not None:
                    return beside
            folder = self._catalog_bert(sources)
            if self.backend == "onnx":
                return folder, self._fetch(BERT.tokenizer_source)
        if self.backend == "onnx" and is_raw_bert(folder):
            quantize = "none" if self.bert_precision == "fp32" else self.bert_precision
            return converted_bert(folder, self.cache, quantize), None
        return folder, None

    def pre_download(self, sources: list[str]) -> list[Path]:
        """Fetch ``sources`` and the BERT :meth:`bert_folders` would use; load nothing."""

        def fetch(items: list[str], *, bert: bool = False) -> list[Path]:
            fetched: list[Path] = download(
                items, format=self.format, cache_dir=self.cache_dir, token=self.token, bert=bert
            )
            return fetched

        fetched = fetch(sources)
        if self.bert_source is not None:
            return fetched + fetch([str(self.bert_source)])
        if self.backend == "onnx":
            if any(bert_beside(f) for f in fetched):
                return fetched
            pair = self._bert_in_same_repo(sources)
            if pair is not None:
                return fetched + [p for p in pair if p is not None]
        return fetched + fetch([], bert=True)

    # -- internals --------------------------------------------------------------
    def _checkpoint_voice(self, checkpoint: Path) -> Path:
        """One checkpoint of an SBV2 folder: the file itself for PyTorch, else its bundle
        (converted once, keyed on the folder and the checkpoint's name)."""
        if self.backend == "torch":
            return checkpoint
        return converted_voice(checkpoint.parent, self.cache, checkpoint)

    def _resolve(self, source: str | Path) -> Path:
        return resolve_name(
            source,
            format=self.format,
            cache_dir=self.cache_dir,
            offline=self.offline,
            token=self.token,
        )

    def _fetch(self, source: str | HubSource) -> Path:
        """A source's folder (no catalog lookup), through this engine's cache settings."""
        return resolve(
            str(source), cache_dir=self.cache_dir, offline=self.offline, token=self.token
        )

    def _catalog_bert(self, sources: Iterable[str | Path]) -> Path:
        """The catalog's BERT; for voices from local folders, a failure says how to give one."""
        try:
            return self._resolve(BERT.name)
        except SourceError as exc:
            if isinstance(exc, OfflineError) or any(_is_remote(s) for s in sources):
                raise
            raise ModelLoadError(
                f"no BERT beside the voice, and the default one ({BERT.name}) could not be "
                f"fetched: {exc}. Give the BERT of your voice with --bert PATH "
                "(bert_source= in Python)"
            ) from exc

    def _bert_in_same_repo(self, sources: Iterable[str | Path]) -> tuple[Path, Path | None] | None:
        """HayaKoe's BERT from the hub repository a HayaKoe-layout voice came from."""
        for source in sources:
            src = parse(source) if isinstance(source, str) and source not in names() else None
            if not isinstance(src, HubSource) or not src.subfolder.startswith("onnx/speakers/"):
                continue
            siblings = [replace(src, subfolder=sub) for sub in ("onnx/bert/q8", "bert/tokenizer")]
            try:
                bert, tokenizer = (self._fetch(s) for s in siblings)
            except SourceNotFoundError:
                continue
            return bert, tokenizer
        return None


def checkpoint_file(source: str | Path) -> Path | None:
    """A local ``.safetensors`` file given as a voice: one checkpoint of the SBV2 folder
    that holds it (to choose among several; a folder alone means its newest)."""
    src = parse(source)
    if not isinstance(src, LocalSource) or src.path.suffix.lower() != CHECKPOINT_SUFFIX:
        return None
    path = src.path.expanduser()
    if not path.is_file() or detect_layout(path.parent) is not VoiceLayout.SBV2:
        raise SourceNotFoundError(
            f"voice source {str(source)!r}: not a checkpoint in an SBV2 folder (config.json "
            "and style_vectors.npy beside it)",
            source=str(source),
        )
    return path


def _is_remote(source: str | Path) -> bool:
    return isinstance(source, str) and (source in names() or "://" in source)


def aivmx_file(path: Path, name: str) -> Path | None:
    """The AIVMX file a voice source means: the file itself, or in a folder of them the
    only one, else the one named like the voice (by file stem). None for other sources."""
    if path.is_file():
        return path if path.suffix.lower() == ".aivmx" else None
    if detect_layout(path) is not None:
        return None
    found = sorted(path.glob("*.aivmx"))
    if len(found) <= 1:
        return found[0] if found else None
    named = [f for f in found if f.stem == name]
    if not named:
        raise ModelLoadError(
            f"voice {name!r}: {path} holds several AIVMX voices "
            f"({', '.join(f.stem for f in found)}); name the voice after one of them "
            "or give the file itself as its source"
        )
    return named[0]
