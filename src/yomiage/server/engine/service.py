"""What the routes ask of the engine, and the engine in the server's own process.

The routes never touch a :class:`~yomiage.TTS` directly: they talk to a
:class:`SpeechService`, so the same app runs with the engine in its own
process (:class:`LocalService`, for tests, Ray replicas and ``--in-process``)
or in a supervised worker that a native crash cannot take the server down
with (:class:`~yomiage.server.engine.worker.WorkerService`, what ``yomiage serve``
uses). Every method but :meth:`SpeechService.open` blocks: call them from
worker threads, never on the event loop.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from yomiage.audio import Audio, AudioChunk
from yomiage.audio.spool import SpooledAudio
from yomiage.engine import TTS
from yomiage.engine_spec import EngineSpec
from yomiage.errors import NotPreparedError, VoiceNotLoadedError
from yomiage.options import SynthesisOptions
from yomiage.runtime.voice import VoiceCredits
from yomiage.server.encoding import OutputFormat, encode_spooled
from yomiage.server.engine.request_logs import RequestLogs, for_request
from yomiage.speaker import Speaker
from yomiage.text.g2p import Phonemes
from yomiage.text.user_dict import SkippedEntry
from yomiage.text.user_word import UserWord
from yomiage.voicevox.query import SentenceReading


@dataclass(frozen=True)
class VoiceCard:
    """What a client may choose for one loaded voice."""

    name: str
    sample_rate: int
    styles: tuple[str, ...]
    speaker_ids: Mapping[str, int]
    runtime: str = ""  # what runs it, e.g. "decoder bf16 on openvino"
    credits: VoiceCredits | None = None  # publisher, version, licence text (AIVMX voices)
    style_ids: Mapping[str, int] = field(default_factory=dict)  # style -> its row (local id)
    # Where it was loaded from, as given to load (None: a catalog name, or not known):
    # an installed voice is one whose file is in the models folder.
    source: str | None = None
    # The plan its graphs run by, in words (yomiage.runtime.plan; empty for a voice
    # without one), and whether the plan was predicted to fit the memory budget.
    plan: str = ""
    fits_budget: bool = True


@dataclass(frozen=True)
class EngineRequest:
    """What one request asks the engine for (picklable: it crosses to the worker).

    ``early_audio``: the client hears it as it comes (a streamed response), so
    small first windows; False for a whole-body response. ``reading``: an
    editor's phonemes, one per sentence, read instead of ``text`` (which then
    only names them), so an editor's synthesis stops as a stream does when its
    client leaves. ``lengths``: with ``reading``, the editor's phoneme lengths per
    sentence (:mod:`yomiage.synthesis.lengths`).
    """

    voice: str
    text: str
    options: SynthesisOptions
    early_audio: bool = True
    reading: tuple[Phonemes, ...] | None = None
    lengths: tuple[tuple[float | None, ...] | None, ...] | None = None


class ChunkSource(Protocol):
    """One request's audio, a chunk at a time. Nothing runs until the first :meth:`next`,
    which also surfaces text, option and limit errors."""

    def next(self) -> AudioChunk | None:
        """The next chunk, or None at the end (blocking)."""
        ...

    def cancel(self) -> None:
        """Stop the work at its next step (any thread, returns at once)."""
        ...

    def close(self) -> None:
        """Stop and release everything; returns once no work runs for this request."""
        ...


class SpeechService(Protocol):
    """The engine behind the routes."""

    @property
    def voices(self) -> Mapping[str, VoiceCard]: ...

    @property
    def available(self) -> bool:
        """False while the engine cannot take requests (a worker restarting)."""
        ...

    def open(self, request: EngineRequest) -> ChunkSource:
        """A request's audio, a chunk at a time (nothing runs before the first)."""
        ...

    def encode(self, audio: SpooledAudio, fmt: OutputFormat, out: str) -> int:
        """A whole response, kept in a file as it was made, encoded into the file ``out``
        (it exists; it is emptied) in blocks; the bytes written. Run where a crash of
        libsndfile cannot take the server down."""
        ...

    def read(self, voice: str, text: str, options: SynthesisOptions) -> list[SentenceReading]:
        """Each sentence's phonemes, predicted timings and accent phrases (no audio)."""
        ...

    def generate(self, voice: str, reading: Sequence[Phonemes], options: SynthesisOptions) -> Audio:
        """The whole audio of a reading made by the caller (an editor's phonemes)."""
        ...

    def warm(self, voice: str) -> None: ...

    def load_voice(self, name: str, source: str, *, warm: bool = True) -> Mapping[str, VoiceCard]:
        """Load (and, with ``warm``, warm with one sentence) a voice while serving; the
        voices now loaded. The same name from the same source already loaded is a no-op;
        errors are what loading raises (ModelLoadError, SourceError, ...)."""
        ...

    def unload_voice(self, name: str) -> Mapping[str, VoiceCard]:
        """Drop a voice (requests running on it finish first); the voices now loaded.
        VoiceNotLoadedError if none is called ``name``."""
        ...

    def words(self) -> tuple[UserWord, ...]: ...

    def remove_word(self, surface: str) -> UserWord | SkippedEntry: ...

    def update_words(
        self, add: Sequence[UserWord], remove: Sequence[str], keep_existing: bool
    ) -> tuple[UserWord, ...]:
        """Add ``add`` (words checked by :meth:`UserWord.create` where the request was
        read) and remove the words written ``remove``, as one saved change; the words
        added. A word crosses every layer as one ``UserWord``, so adding a field to it
        touches no signature here."""
        ...

    def close(self) -> None: ...


class LocalChunkSource:
    """A speaker's stream stepped from worker threads, one step at a time."""

    def __init__(self, tts: TTS, request: EngineRequest) -> None:
        self._speaker = _speaker(tts, request.voice)
        self.request = request
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._chunks: Iterator[AudioChunk] | None = None
        self._closed = False
        self._logs = RequestLogs()  # a warning once per request, not once per sentence

    def next(self) -> AudioChunk | None:
        with self._lock, for_request(self._logs):
            if self._closed:
                return None
            if self._chunks is None:
                self._chunks = self._stream(self.request)
            return next(self._chunks, None)

    def _stream(self, request: EngineRequest) -> Iterator[AudioChunk]:
        early, cancel = request.early_audio, self._cancel
        if request.reading is not None:
            return self._speaker.stream_reading(
                request.reading, request.options, cancel=cancel, early_audio=early,
                lengths=request.lengths,
            )  # fmt: skip
        return self._speaker.stream(request.text, request.options, cancel=cancel, early_audio=early)

    def cancel(self) -> None:
        self._cancel.set()

    def close(self) -> None:
        self._cancel.set()
        with self._lock:
            self._closed = True
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()
        self._logs.close()


def _speaker(tts: TTS, voice: str) -> Speaker:
    """The loaded voice ``voice``; VoiceNotLoadedError once it was unloaded."""
    try:
        return tts.speakers[voice]
    except KeyError:
        raise VoiceNotLoadedError(f"no voice {voice!r} is loaded") from None


def _loaded(tts: TTS) -> Mapping[str, Speaker]:
    """The engine's loaded voices; none yet for one that started with no voice (it is
    prepared by its first load)."""
    try:
        return tts.speakers
    except NotPreparedError:
        if tts.closed:
            raise
        return {}


def _card(name: str, s: Speaker, source: str | None) -> VoiceCard:
    plan = s.plan
    return VoiceCard(
        name, s.sample_rate, s.styles, dict(s.speaker_ids), s.runtime, s.credits,
        dict(s.style_ids), source, plan.describe() if plan is not None else "",
        plan.fits_budget if plan is not None else True,
    )  # fmt: skip


class LocalService:
    """A prepared :class:`TTS` in this process (the caller keeps ownership of it).

    ``voices`` is a new mapping each time the set of voices changes (the routes
    cache what they derive from it per identity), the same one otherwise.
    ``sources``: where the voices already loaded came from (their cards' ``source``);
    a voice loaded through :meth:`load_voice` keeps its own.
    """

    def __init__(self, tts: TTS, sources: Mapping[str, str | None] | None = None) -> None:
        self.tts = tts
        self._sources: dict[str, str | None] = dict(sources or {})
        self._loading = threading.Lock()  # one load at a time: its prepare loads only its voice
        self._cards_lock = threading.Lock()
        self._speakers: dict[str, Speaker] = {}
        self._voices: Mapping[str, VoiceCard] = MappingProxyType({})
        self._refresh()  # NotPreparedError before prepare()

    @property
    def voices(self) -> Mapping[str, VoiceCard]:
        return self._voices

    def load_voice(self, name: str, source: str, *, warm: bool = True) -> Mapping[str, VoiceCard]:
        with self._loading:
            self.tts.load(name, source=source)  # ValueError: loaded from another source
            if name in _loaded(self.tts):
                return self._refresh()  # already loaded from this source
            self._sources[name] = source
            try:
                self.tts.prepare()
                speaker = _speaker(self.tts, name)  # gone if unloaded while it loaded
                if warm:
                    speaker.warm()
            except BaseException:
                # Never leave it declared: the next load would try (and fail on) it again.
                with contextlib.suppress(VoiceNotLoadedError, NotPreparedError):
                    self.tts.unload(name)
                    self._refresh()
                raise
        return self._refresh()

    def unload_voice(self, name: str) -> Mapping[str, VoiceCard]:
        if name not in self.tts.speakers:  # declared and still loading counts as not loaded
            raise VoiceNotLoadedError(f"no voice {name!r} is loaded")
        self.tts.unload(name)
        self._sources.pop(name, None)
        return self._refresh()

    def _refresh(self, *, anew: bool = False) -> Mapping[str, VoiceCard]:
        """Rebuild ``voices`` from the engine's loaded voices, if they changed (``anew``:
        in any case, as where a voice's plan was said anew)."""
        with self._cards_lock:
            speakers = dict(_loaded(self.tts))
            if (
                anew
                or speakers.keys() != self._speakers.keys()
                or any(s is not self._speakers[n] for n, s in speakers.items())
            ):
                self._speakers = speakers
                self._voices = MappingProxyType(
                    {n: _card(n, s, self._sources.get(n)) for n, s in speakers.items()}
                )
            return self._voices

    @property
    def available(self) -> bool:
        return True

    def measure_plans(self, stop: threading.Event) -> list[str]:
        """This machine's plans for the voices loaded, measured until ``stop``
        (:meth:`TTS.measure_plans <yomiage.TTS.measure_plans>`)."""
        return self.tts.measure_plans(stop)

    def take_measured_plans(self, names: list[str]) -> Mapping[str, VoiceCard] | None:
        """The voices ``names`` loaded anew where their measured plans change how they run
        (:meth:`TTS.take_measured_plans <yomiage.TTS.take_measured_plans>`; no call may
        run on them meanwhile): the voices now, or None where none changed."""
        with self._loading:
            with self._cards_lock:  # its speakers too: the old voice must go before the new loads
                self._speakers = {n: s for n, s in self._speakers.items() if n not in names}
            taken = self.tts.take_measured_plans(names)
            return self._refresh(anew=True) if taken else None

    def open(self, request: EngineRequest) -> LocalChunkSource:
        return LocalChunkSource(self.tts, request)

    def encode(self, audio: SpooledAudio, fmt: OutputFormat, out: str) -> int:
        return encode_spooled(audio, fmt, out)

    def read(self, voice: str, text: str, options: SynthesisOptions) -> list[SentenceReading]:
        frontend = self.tts.frontend
        logs = RequestLogs()
        try:
            with for_request(logs):
                return [
                    SentenceReading(phonemes, timings, tuple(frontend.accent_phrases(phonemes)))
                    for phonemes, timings in _speaker(self.tts, voice).predict(text, options)
                ]
        finally:
            logs.close()

    def generate(self, voice: str, reading: Sequence[Phonemes], options: SynthesisOptions) -> Audio:
        return _speaker(self.tts, voice).generate_reading(reading, options)

    def warm(self, voice: str) -> None:
        _speaker(self.tts, voice).warm()

    def words(self) -> tuple[UserWord, ...]:
        return self.tts.words()

    def remove_word(self, surface: str) -> UserWord | SkippedEntry:
        return self.tts.remove_word(surface)

    def update_words(
        self, add: Sequence[UserWord], remove: Sequence[str], keep_existing: bool
    ) -> tuple[UserWord, ...]:
        return self.tts.update_words(add, remove, keep_existing=keep_existing)

    def close(self) -> None:
        """Nothing to do: the caller owns the engine."""


def warmed_service(spec: EngineSpec, *, warm: bool = True) -> LocalService:
    """The engine of ``spec`` prepared and, unless ``warm`` is false, warmed with one
    sentence per voice: what the server's worker process and each Ray replica run
    before they take a request, so the first client never pays for loading. The
    caller closes ``service.tts``; on a failure nothing is left open. A spec of no
    voices gives an engine with none, to load them into later."""
    tts = spec.build() if spec.voices else spec.declare()
    try:
        service = LocalService(tts, {name: source for name, source in spec.voices})
        for voice in service.voices if warm else ():
            service.warm(voice)
    except BaseException:
        tts.close()
        raise
    return service
