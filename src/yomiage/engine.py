"""The engine: :class:`TTS` owns the frontend, one backend, its BERT and the voices.

Nothing here is global: two ``TTS`` objects share nothing, and the voices of
one share its BERT, its frontend (with its user dictionary) and its compute
gate. ``load`` only declares a voice; ``prepare`` loads everything and is
where missing files or a wrong device show up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import MappingProxyType, TracebackType

from yomiage.errors import ModelLoadError, NotPreparedError, SourceNotFoundError
from yomiage.limits import Limits
from yomiage.runtime.cpu import physical_cores
from yomiage.runtime.layouts import VoiceLayout, detect_layout
from yomiage.runtime.voice import SynthesisBackend
from yomiage.sources import (
    BERT,
    Cache,
    HubSource,
    download,
    lookup,
    names,
    parse,
    resolve,
    resolve_name,
)
from yomiage.sources.catalog import Format
from yomiage.speaker import Speaker
from yomiage.synthesis.gate import ComputeGate
from yomiage.synthesis.pipeline import Pipeline
from yomiage.text.frontend import Frontend
from yomiage.text.user_dict import SkippedEntry, UserDictionary, UserWord

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")
BERT_PRECISIONS = ("q8", "q4", "fp32")
WARMUP_TEXT = "こんにちは。"


def _bert_beside(voice: Path) -> tuple[Path, Path | None] | None:
    """The BERT that ships with a voice: ``bert/`` in a yomiage bundle (where
    ``yomiage convert`` puts it), or HayaKoe's ``onnx/bert/q8`` with
    ``bert/tokenizer`` when the voice is ``onnx/speakers/<name>``."""
    if (voice / "bert" / "bert.json").is_file():
        return voice / "bert", None
    root = voice.parent.parent.parent
    if voice.parent.name == "speakers" and (root / "onnx" / "bert" / "q8").is_dir():
        tokenizer = root / "bert" / "tokenizer"
        return root / "onnx" / "bert" / "q8", tokenizer if tokenizer.is_dir() else None
    return None


def _is_raw_bert(folder: Path) -> bool:
    """A DeBERTa folder as published (weights, no ONNX graph)."""
    has_weights = any(folder.glob("*.safetensors")) or (folder / "pytorch_model.bin").is_file()
    return (folder / "config.json").is_file() and has_weights and not any(folder.glob("*.onnx"))


def _check_device(device: str) -> str:
    if not isinstance(device, str) or not (
        device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())
    ):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
    return device


class TTS:
    """Text to speech with SBV2 JP-Extra voices.

    ``device="cpu"`` runs converted voice bundles with ONNX Runtime (no torch);
    ``"cuda"`` runs SBV2 folders with PyTorch. ``backend`` overrides that
    choice ("torch" also runs on CPU). Voices and the BERT come from sources
    (a folder, ``file://``, ``hf://owner/repo[@rev][/sub]``, ``s3://bucket/prefix``)
    or catalog names (``yomiage voices``), downloaded into ``cache_dir``
    (default ``$YOMIAGE_CACHE`` or the user cache folder); ``offline=True``
    (or ``HF_HUB_OFFLINE=1``) never touches the network. ``bert_source``
    defaults to the BERT shipped beside the voice (``bert/`` in a bundle from
    ``yomiage convert``, HayaKoe's ``onnx/bert/q8``), else the catalog's.
    On CPU, SBV2 folders are converted to ONNX once (needs ``yomiage[torch]``)
    and kept in the cache. ``threads`` sets intra-op threads (default:
    physical cores). ``decoder_precision="int8"`` runs the opt-in int8 decoder
    of bundles converted with ``--decoder int8`` (about 2x faster decoding; its
    error against float32 is recorded in the bundle's ``voice.json``).
    ``limits`` bounds the audio one sentence and one call may make
    (:class:`~yomiage.limits.Limits`; by default 180 s a sentence).
    """

    def __init__(
        self,
        device: str = "cpu",
        *,
        cache_dir: Path | str | None = None,
        bert_source: Path | str | None = None,
        threads: int | None = None,
        backend: str = "auto",
        bert_precision: str = "q8",
        user_dictionary: UserDictionary | Path | str | None = None,
        offline: bool | None = None,
        token: str | None = None,
        decoder_precision: str = "fp32",
        limits: Limits | None = None,
    ) -> None:
        self.device = _check_device(device)
        self.limits = limits or Limits()
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if backend == "auto":
            backend = "onnx" if device == "cpu" else "torch"
        if backend == "onnx" and device != "cpu":
            raise ValueError("the ONNX backend runs on CPU only; use backend='torch' for CUDA")
        if bert_precision not in BERT_PRECISIONS:
            raise ValueError(f"bert_precision must be one of {', '.join(BERT_PRECISIONS)}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):  # fmt: skip
            raise ValueError(f"threads must be a positive integer, not {threads!r}")
        if decoder_precision not in ("fp32", "int8"):
            raise ValueError(
                f"decoder_precision must be 'fp32' or 'int8', not {decoder_precision!r}"
            )
        if decoder_precision != "fp32" and backend != "onnx":
            raise ValueError("decoder_precision='int8' exists on the ONNX (CPU) backend only")
        self.decoder_precision = decoder_precision
        self.backend_name = backend
        self.bert_precision = bert_precision
        self.threads = threads
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.offline = offline
        self._token = token
        self._bert_source = bert_source
        self._user_dictionary = user_dictionary
        self._declared: dict[str, str | Path] = {}
        self._speakers: dict[str, Speaker] = {}
        self._frontend: Frontend | None = None
        self._pipeline: Pipeline | None = None
        self._lock = threading.RLock()
        self._closed = False

    # -- voices ----------------------------------------------------------
    def load(self, name: str, *, source: str | Path | None = None) -> TTS:
        """Declare a voice called ``name`` (loaded by :meth:`prepare`; nothing is read yet)."""
        if not isinstance(name, str) or not name.strip() or "\0" in name:
            raise ValueError(f"a voice name must be a non-empty string, not {name!r}")
        if source is None:
            lookup(name)  # UnknownVoiceError listing the catalog's names
            source = name
        with self._lock:
            self._check_open()
            if name in self._speakers and self._declared.get(name) != source:
                raise ValueError(f"voice {name!r} is already loaded from {self._declared[name]}")
            self._declared[name] = source
        return self

    def prepare(self, *, warmup: bool = False, compile: bool = False) -> TTS:
        """Load the BERT and every declared voice; raises at once if anything is missing."""
        with self._lock:
            self._check_open()
            # Check every folder before loading anything (BERT loading takes seconds).
            folders = {
                name: self._voice_folder(name, source)
                for name, source in self._declared.items()
                if name not in self._speakers
            }
            pipeline = self._ensure_pipeline(list(folders.values()))
            for name, folder in folders.items():
                self._speakers[name] = self._add_voice(pipeline, name, folder)
            if compile:
                pipeline.backend.compile()
        if warmup:
            for speaker in list(self._speakers.values()):
                speaker.generate(WARMUP_TEXT, seed=0)
        return self

    def pre_download(self) -> list[Path]:
        """Fetch every declared voice and its BERT into the cache; load nothing.

        The build step of a container image: afterwards ``prepare()`` works
        offline. Local folders are left as they are. The BERT is the one
        ``prepare()`` would use: ``bert_source``, else one shipped beside the
        voice (or in its hub repository), else the catalog's.
        """
        with self._lock:
            self._check_open()
            sources = [str(s) for s in self._declared.values()]
        fetch = partial(download, format=self._format, cache_dir=self.cache_dir, token=self._token)
        fetched = fetch(sources)
        if self._bert_source is not None:
            return fetched + fetch([str(self._bert_source)])
        if self.backend_name == "onnx":
            if any(_bert_beside(f) for f in fetched):
                return fetched
            pair = self._bert_in_same_repo()
            if pair is not None:
                return fetched + [p for p in pair if p is not None]
        return fetched + fetch([], bert=True)

    @property
    def speakers(self) -> Mapping[str, Speaker]:
        """The prepared voices by name."""
        with self._lock:
            missing = [n for n in self._declared if n not in self._speakers]
            if missing:
                raise NotPreparedError(
                    f"voice(s) {', '.join(missing)} declared but not loaded: call prepare() first"
                )
            return MappingProxyType(dict(self._speakers))

    # -- user dictionary -------------------------------------------------
    def add_word(
        self,
        surface: str,
        reading: str,
        accent: int | None = None,
        priority: int = 5,
        word_type: str = "proper_noun",
    ) -> UserWord:
        """Read ``surface`` as ``reading`` (katakana) from the next request on."""
        return self.frontend.add_word(surface, reading, accent, priority, word_type)

    def remove_word(self, surface: str) -> UserWord | SkippedEntry:
        return self.frontend.remove_word(surface)

    def words(self) -> tuple[UserWord, ...]:
        return self.frontend.words

    @property
    def frontend(self) -> Frontend:
        with self._lock:
            self._check_open()
            if self._frontend is None:
                self._frontend = Frontend(self._user_dictionary)
            return self._frontend

    # -- lifetime ----------------------------------------------------------
    def close(self) -> None:
        """Drop the voices and the BERT; the object cannot be used afterwards."""
        with self._lock:
            self._closed = True
            self._speakers.clear()
            self._pipeline = None
            if self._frontend is not None:
                self._frontend.close()
                self._frontend = None

    def __enter__(self) -> TTS:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"TTS(device={self.device!r}, backend={self.backend_name!r}, "
            f"voices={list(self._declared)})"
        )

    # -- internals -----------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise NotPreparedError("this TTS was closed")

    def _ensure_pipeline(self, voices: list[Path]) -> Pipeline:
        if self._pipeline is None:
            backend = self._make_backend(voices)
            slots = max(1, physical_cores() // self.threads) if self.threads else 1
            self._pipeline = Pipeline(backend, self.frontend, ComputeGate(slots), self.limits)
        return self._pipeline

    @property
    def _format(self) -> Format:
        """What a catalog name means here: the ONNX export on CPU, the SBV2 folder for torch."""
        return "onnx" if self.backend_name == "onnx" else "sbv2"

    def _resolve(self, source: str | Path) -> Path:
        return resolve_name(
            source,
            format=self._format,
            cache_dir=self.cache_dir,
            offline=self.offline,
            token=self._token,
        )

    def _voice_folder(self, name: str, source: str | Path) -> Path:
        folder = self._resolve(source)
        layout = self._layout(name, folder)
        if self.backend_name == "onnx" and layout is VoiceLayout.SBV2:
            from yomiage.autoconvert import converted_voice

            folder = converted_voice(folder, Cache.at(self.cache_dir))
        return folder

    def _bert_dirs(self, voices: list[Path]) -> tuple[Path, Path | None]:
        """The BERT folder and, when apart from it, its tokenizer folder."""
        if self._bert_source is not None:
            folder = self._resolve(self._bert_source)
            if self._bert_source == BERT.name and self.backend_name == "onnx":
                return folder, self._fetch(BERT.tokenizer_source)
        else:
            if self.backend_name == "onnx":
                beside = next((b for b in map(_bert_beside, voices) if b is not None), None)
                beside = beside or self._bert_in_same_repo()
                if beside is not None:
                    return beside
            folder = self._resolve(BERT.name)
            if self.backend_name == "onnx":
                return folder, self._fetch(BERT.tokenizer_source)
        if self.backend_name == "onnx" and _is_raw_bert(folder):
            from yomiage.autoconvert import converted_bert

            quantize = "none" if self.bert_precision == "fp32" else self.bert_precision
            return converted_bert(folder, Cache.at(self.cache_dir), quantize), None
        return folder, None

    def _fetch(self, source: str | HubSource) -> Path:
        """A source's folder (no catalog lookup), through this engine's cache settings."""
        return resolve(
            str(source), cache_dir=self.cache_dir, offline=self.offline, token=self._token
        )

    def _bert_in_same_repo(self) -> tuple[Path, Path | None] | None:
        """HayaKoe's BERT from the hub repository a HayaKoe-layout voice came from."""
        for source in self._declared.values():
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

    def _make_backend(self, voices: list[Path]) -> SynthesisBackend:
        bert_dir, tokenizer_dir = self._bert_dirs(voices)
        if self.backend_name == "onnx":
            from yomiage.runtime.onnx_backend import OnnxBackend

            return OnnxBackend(
                bert_dir,
                precision=self.bert_precision,
                threads=self.threads,
                tokenizer_dir=tokenizer_dir,
                decoder_precision=self.decoder_precision,
                verified_dir=Cache.at(self.cache_dir).root / "verified",
            )
        try:
            from yomiage.runtime.torch_backend import TorchBackend
        except ImportError as exc:
            raise ModelLoadError(
                f"the PyTorch backend needs torch: pip install 'yomiage[torch]' ({exc})"
            ) from exc
        return TorchBackend(bert_dir, device=self.device, threads=self.threads)

    def _layout(self, name: str, folder: Path) -> VoiceLayout:
        """The folder's kind; ModelLoadError if it is none, or not one this backend runs."""
        layout = detect_layout(folder)
        if layout is None:
            raise ModelLoadError(
                f"voice {name!r}: {folder} is not a voice (no voice.json, or config.json with "
                "synthesizer.onnx or a .safetensors file)"
            )
        if self.backend_name == "torch" and layout is not VoiceLayout.SBV2:
            raise ModelLoadError(
                f"voice {name!r}: {folder} is a {layout.value}; the PyTorch backend needs the "
                "SBV2 folder (config.json + .safetensors)"
            )
        return layout

    def _add_voice(self, pipeline: Pipeline, name: str, folder: Path) -> Speaker:
        return Speaker(name, pipeline.backend.load_voice(folder), pipeline)
