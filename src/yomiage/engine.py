"""The engine: :class:`TTS` owns the frontend, one backend, its BERT and the voices.

Nothing here is global: two ``TTS`` objects share nothing, and the voices of
one share its BERT, its frontend (with its user dictionary) and its compute
gate. ``load`` only declares a voice; ``prepare`` loads everything and is
where missing files or a wrong device show up.

Voices may come and go while the engine serves: ``load(...).prepare()`` loads
outside the lock that :attr:`TTS.speakers` takes (prepares run one at a time
under a lock of their own), so requests on the loaded voices go on meanwhile,
and a voice appears in ``speakers`` only once it is loaded. ``unload`` drops a
voice at once; a request already running on it holds its :class:`Speaker` and
finishes, and the voice's memory goes with the last such request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType

from yomiage.artifacts import Artifacts
from yomiage.engine_backend import make_backend
from yomiage.errors import NotPreparedError, VoiceNotLoadedError
from yomiage.limits import Limits
from yomiage.runtime.engines.cpu import physical_cores
from yomiage.runtime.engines.memory import release_free_memory
from yomiage.runtime.plan.request import DEFAULT_MEMORY_BUDGET_MB, PlanRequest
from yomiage.sources import lookup
from yomiage.speaker import Speaker
from yomiage.synthesis.gate import ComputeGate
from yomiage.synthesis.pipeline import Pipeline
from yomiage.text.frontend import Frontend
from yomiage.text.openjtalk import DEFAULT_READING, check_reading
from yomiage.text.user_dict import SkippedEntry, UserDictionary
from yomiage.text.user_word import UserWord, takes_word

log = logging.getLogger(__name__)

BACKENDS = ("auto", "onnx", "torch")
BERT_PRECISIONS = ("q8", "q4", "fp32")


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
    physical cores, or one per logical CPU for a voice whose plan measured that
    faster). How each voice runs (engine, precision and window lengths of its
    decoder, threads) is its plan (:class:`~yomiage.runtime.plan.Plan`, shown by
    ``Speaker.plan`` and ``yomiage bench``): ``decoder_precision="auto"`` takes the
    fastest plan measured on this machine whose peak memory fits
    ``memory_budget_mb`` (one voice with its BERT; default 1,000 MB) and is never
    slower than float32 on ONNX Runtime; ``"fp32"``, ``"bf16"`` (OpenVINO) or
    ``"int8"`` (the opt-in int8 decoder of bundles converted with ``--decoder
    int8``; its error is recorded in the bundle's ``voice.json``) fix the decoder's
    arithmetic and choose the rest. A load never waits for measuring: it takes the
    plan measured here, else the one shipped for its CPU family, else a fixed one
    (always, with ``measure_plan=False`` or ``YOMIAGE_PLAN_MEASURE=0``); this machine
    is measured by :meth:`measure_plans`, or at load with ``measure_plan=True``.
    ``docs/performance.md`` explains how to choose a budget.
    ``limits`` bounds the audio one sentence and one call may make
    (:class:`~yomiage.limits.Limits`; by default 180 s a sentence).
    ``reading``: ``"natural"`` (default) or ``"sbv2"``, exactly the reading SBV2
    voices were trained with (:class:`~yomiage.text.Frontend`).
    ``user_dictionary``: the engine's words (:meth:`add_word`) live in memory
    unless it names a JSON file (or a :class:`UserDictionary`) to keep them in;
    ``yomiage.text.default_user_dictionary_path()`` is the per-user file the
    command line and ``yomiage serve`` use.
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
        decoder_precision: str = "auto",
        limits: Limits | None = None,
        reading: str = DEFAULT_READING,
        memory_budget_mb: int = DEFAULT_MEMORY_BUDGET_MB,
        measure_plan: bool | None = None,
    ) -> None:
        self.device = _check_device(device)
        self.reading = check_reading(reading)
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
        # What each voice's plan is asked for, checked here once (ValueError).
        self.plan_request = PlanRequest(decoder_precision, memory_budget_mb, measure_plan)
        if decoder_precision in ("bf16", "int8") and backend != "onnx":
            raise ValueError(
                f"decoder_precision={decoder_precision!r} exists on the CPU backend only"
            )
        self.backend_name = backend
        self.bert_precision = bert_precision
        self.threads = threads
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.offline = offline
        self._artifacts = Artifacts(
            backend=backend,
            cache_dir=self.cache_dir,
            offline=offline,
            token=token,
            bert_source=bert_source,
            bert_precision=bert_precision,
        )
        self._user_dictionary = user_dictionary
        self._declared: dict[str, str | Path] = {}
        self._speakers: dict[str, Speaker] = {}
        self._frontend: Frontend | None = None
        self._pipeline: Pipeline | None = None
        self._lock = threading.RLock()  # the state above; never held while loading
        self._loading = threading.Lock()  # one prepare at a time
        self._prepared = False  # a prepare() finished: speakers lists what is loaded
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
            if name in self._speakers and str(self._declared.get(name)) != str(source):
                raise ValueError(f"voice {name!r} is already loaded from {self._declared[name]}")
            self._declared[name] = source
        return self

    def unload(self, name: str) -> None:
        """Drop the voice ``name`` (loaded or only declared); VoiceNotLoadedError if none.

        Requests already running on it finish (they hold its :class:`Speaker`);
        its memory is released once the last of them is done. A prepare loading
        it at this moment discards it when done.
        """
        with self._lock:
            self._check_open()
            if name not in self._declared and name not in self._speakers:
                known = ", ".join(self._declared) or "none"
                raise VoiceNotLoadedError(f"no voice {name!r} is loaded (voices: {known})")
            self._declared.pop(name, None)
            speaker = self._speakers.pop(name, None)
        if speaker is not None:  # glibc keeps freed heap pages unless asked to give them back
            speaker._when_released(release_free_memory)

    def prepare(self, *, warmup: bool = False, compile: bool = False) -> TTS:
        """Load the BERT and every declared voice; raises at once if anything is missing.

        ``warmup``: synthesize one sentence per voice now, so the first request
        does not pay for first-call costs. ``compile`` (PyTorch backend):
        ``torch.compile`` the BERT and warm up too, since the compiler runs on the
        first call: on an H100 that took 40-80 s (benchmarks/history/cuda-h100.md),
        which belongs here rather than in a listener's first request.
        """
        with self._loading:  # not self._lock: requests on the loaded voices go on
            with self._lock:
                self._check_open()
                pending = {n: s for n, s in self._declared.items() if n not in self._speakers}
                sources = list(self._declared.values())
            # Check every folder before loading anything (BERT loading takes seconds).
            folders = {
                name: self._artifacts.voice_folder(name, source) for name, source in pending.items()
            }
            pipeline = self._ensure_pipeline(list(folders.values()), sources)
            for name, folder in folders.items():
                voice = pipeline.backend.load_voice(folder)
                self._publish(name, pending[name], Speaker(name, voice, pipeline))
            if compile:
                pipeline.backend.compile()
            with self._lock:
                self._prepared = True
                speakers = list(self._speakers.values())
        if warmup or compile:
            for speaker in speakers:
                speaker.warm()
        return self

    def measure_plans(self, stop: threading.Event | None = None) -> list[str]:
        """Measure on this machine the plan of each loaded voice that has none kept yet
        (minutes each; a load never waits for it, and runs meanwhile by the plan shipped
        for its CPU family, or a fixed one). The measurements are kept in the cache and
        taken from the next load on, or now by :meth:`take_measured_plans`. ``stop``,
        once set, ends the measuring process in hand (``MeasureInterrupted``; what was
        measured stays kept, the rest is measured at the next call): a server measures
        so in its idle time. The names of the voices measured now."""
        with self._lock:
            self._check_open()
            pipeline = self._pipeline
            loaded = {n: self._declared[n] for n in self._speakers if n in self._declared}
        measure = getattr(pipeline.backend, "measure_plan", None) if pipeline else None
        if measure is None:  # not prepared, or a backend without plans (PyTorch)
            return []
        measured = []
        for name, source in loaded.items():
            if measure(self._artifacts.voice_folder(name, source), stop):
                measured.append(name)
        return measured

    def take_measured_plans(self, names: Iterable[str]) -> list[str]:
        """Load anew each voice of ``names`` whose plan measured since (:meth:`measure_plans`)
        runs it otherwise; where it runs as it did, only its plan says so. The names changed.
        The old voice goes first (the two never count together against the budget): no request
        may run on it meanwhile. One that cannot load by its new plan loads by its old one."""
        with self._loading:
            with self._lock:
                self._check_open()
                pipeline = self._pipeline
                held = {n: (self._speakers[n].plan, self._declared[n]) for n in names
                        if n in self._speakers and n in self._declared}  # fmt: skip
            backend = pipeline.backend if pipeline is not None else None
            if pipeline is None or not hasattr(backend, "load_voice_by"):
                return []  # not prepared, or a backend without plans (PyTorch)
            taken = []
            for name, (plan, source) in held.items():
                folder = self._artifacts.voice_folder(name, source)
                now = backend.plan(folder)  # type: ignore[union-attr]
                if plan is None or now == plan:
                    continue
                if not now.runs_otherwise_than(plan):  # only the words: it runs as it did
                    with self._lock:
                        self._speakers[name]._relabel(now)
                    taken.append(name)
                    continue
                with self._lock:  # its last reference: its sessions go with it
                    self._speakers.pop(name)._when_released(release_free_memory)
                try:
                    fresh = Speaker(name, pipeline.backend.load_voice(folder), pipeline)
                    fresh.warm()
                except Exception:
                    log.exception("voice %r could not load by its measured plan; it loads "
                                  "again by the one it had", name)  # fmt: skip
                    fresh = Speaker(name, backend.load_voice_by(folder, plan), pipeline)  # type: ignore[union-attr]
                else:
                    taken.append(name)
                    log.warning("voice %r now runs by this machine's measured plan: %s", name,
                                now.describe())  # fmt: skip
                self._publish(name, source, fresh)
            return taken

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
        return self._artifacts.pre_download(sources)

    @property
    def speakers(self) -> Mapping[str, Speaker]:
        """The loaded voices by name (a snapshot): a voice declared after the first
        :meth:`prepare` appears once a later one has loaded it."""
        with self._lock:
            self._check_open()
            missing = [n for n in self._declared if n not in self._speakers]
            if missing and not self._prepared:
                raise NotPreparedError(
                    f"voice(s) {', '.join(missing)} declared but not loaded: call prepare() first"
                )
            return MappingProxyType(dict(self._speakers))

    # -- user dictionary -------------------------------------------------
    @takes_word
    def add_word(self, word: UserWord) -> UserWord:
        """Read ``surface`` as ``reading`` (katakana) from the next request on; the
        parameters are :meth:`UserWord.create`'s."""
        self.frontend.update_words([word])
        return word

    def update_words(
        self,
        add: Sequence[UserWord],
        remove: Sequence[str] = (),
        *,
        keep_existing: bool = False,
    ) -> tuple[UserWord, ...]:
        """Add words (:meth:`UserWord.create`) and remove others in one saved change:
        an import of many words, or a word rewritten under a new surface."""
        return self.frontend.update_words(add, remove, keep_existing=keep_existing)

    def remove_word(self, surface: str) -> UserWord | SkippedEntry:
        return self.frontend.remove_word(surface)

    def words(self) -> tuple[UserWord, ...]:
        return self.frontend.words

    @property
    def frontend(self) -> Frontend:
        with self._lock:
            self._check_open()
            if self._frontend is None:
                self._frontend = Frontend(self._user_dictionary, reading=self.reading)
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

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (a server's health check asks)."""
        return self._closed

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

    def _ensure_pipeline(self, voices: list[Path], sources: list[str | Path]) -> Pipeline:
        """The pipeline, made on the first prepare (under ``_loading``, not ``_lock``)."""
        if self._pipeline is not None:
            return self._pipeline
        backend = make_backend(self.backend_name, *self._artifacts.bert_folders(voices, sources),
                               cache_root=self._artifacts.cache.root, device=self.device,
                               threads=self.threads, bert_precision=self.bert_precision,
                               plan_request=self.plan_request)  # fmt: skip
        slots = max(1, physical_cores() // self.threads) if self.threads else 1
        pipeline = Pipeline(backend, self.frontend, ComputeGate(slots), self.limits,
                            exact_pauses=self.reading == "sbv2")  # fmt: skip
        with self._lock:
            self._check_open()
            self._pipeline = pipeline
        return pipeline

    def _publish(self, name: str, source: str | Path, speaker: Speaker) -> None:
        """Make a freshly loaded voice visible, unless it was unloaded (or redeclared from
        another source) while it loaded, or the engine was closed meanwhile."""
        with self._lock:
            self._check_open()
            if name in self._declared and str(self._declared[name]) == str(source):
                self._speakers[name] = speaker
            else:
                log.info("voice %r was unloaded while it loaded; dropped", name)
