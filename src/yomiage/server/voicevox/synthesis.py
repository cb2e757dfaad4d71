"""What VOICEVOX's synthesis routes share: styles, the checks a request meets before
any work, and a query turned into the engine request that reads it.

``/synthesis``, ``/multi_synthesis`` (:mod:`yomiage.server.voicevox.routes`) and
``/streaming_synthesis`` (:mod:`yomiage.server.voicevox.streaming_routes`) read
a query the same way, so the same query gives the same audio on each; the
first two get their WAVs from :meth:`VoxSynthesis.synthesize`, in files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fastapi import Request

from yomiage.audio.spool import AudioSpool, SpooledAudio
from yomiage.limits import DEFAULT_MAX_REQUEST_SECONDS
from yomiage.options import SynthesisOptions
from yomiage.server.encoding import spool_errors
from yomiage.server.engine.service import EngineRequest, VoiceCard
from yomiage.server.spool import ResponseSpool, remove, temp_file
from yomiage.server.state import ServerState
from yomiage.server.voicevox.http import VoxError, int_param, invalid
from yomiage.server.voicevox.work import VoxWork
from yomiage.text.g2p import Phonemes
from yomiage.voicevox import aivisspeech
from yomiage.voicevox.cost import estimated_seconds, spoken_chars
from yomiage.voicevox.ids import VoxSpeaker, VoxStyle, vox_speakers
from yomiage.voicevox.model import AccentPhrase, AudioQuery
from yomiage.voicevox.query import audio_query, lengths_of, reading_of, sentences, structure
from yomiage.voicevox.synthesis import output_seconds, synthesis_options, write_wav


@dataclass(frozen=True)
class VoxCatalog:
    """One set of loaded voices as VOICEVOX speakers, styles by id, and speakers by uuid."""

    speakers: tuple[VoxSpeaker, ...]
    styles: Mapping[int, VoxStyle]
    by_uuid: Mapping[str, VoxSpeaker]

    @classmethod
    def of(cls, cards: Iterable[VoiceCard]) -> VoxCatalog:
        speakers = vox_speakers(
            (card.name, card.speaker_ids,
             card.style_ids or {s: i for i, s in enumerate(card.styles)},
             card.credits.speaker_uuids if card.credits else None)
            for card in cards
        )  # fmt: skip
        styles = {style.id: style for speaker in speakers for style in speaker.styles}
        return cls(speakers, styles, {speaker.speaker_uuid: speaker for speaker in speakers})


class VoxSynthesis:
    """The server's voices as VOICEVOX styles and the rules every VOICEVOX request meets.

    One per app; the styles follow the voices loaded (a request uses the set of
    its start), and nothing else in it changes, so any number of requests use it
    at once.
    """

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._catalog: tuple[object, VoxCatalog] | None = None
        self.max_seconds = audio_limit(state)

    @property
    def catalog(self) -> VoxCatalog:
        """The styles of the voices loaded now, rebuilt when the set changes (voices are
        loaded and unloaded while serving: ``/aivm_models``)."""
        voices = self.state.voices
        cached = self._catalog
        if cached is None or cached[0] is not voices:
            cached = (voices, VoxCatalog.of(voices.values()))
            self._catalog = cached
        return cached[1]

    @property
    def speakers(self) -> tuple[VoxSpeaker, ...]:
        return self.catalog.speakers

    @property
    def styles(self) -> Mapping[int, VoxStyle]:
        return self.catalog.styles

    def query_in(self, query: AudioQuery) -> AudioQuery:
        """A query as the routes read it: punctuation moras, as AivisSpeech writes them
        (and its clients send in either mode), folded back into pauses."""
        return replace(query, accent_phrases=aivisspeech.without_pau_moras(query.accent_phrases))

    def phrases_out(self, phrases: Sequence[AccentPhrase]) -> list[dict[str, Any]]:
        """Phrases as JSON in the shape of the engine the server stands in for."""
        if self.state.config.compat == "aivisspeech":
            phrases = aivisspeech.with_pau_moras(phrases)
        return [p.to_json() for p in phrases]

    def query_out(self, query: AudioQuery) -> dict[str, Any]:
        return {**query.to_json(), "accent_phrases": self.phrases_out(query.accent_phrases)}

    def style_of(self, request: Request) -> VoxStyle:
        """The style the ``speaker`` parameter names (404 if none has that id)."""
        style_id = int_param(request, "speaker")
        style = self.styles.get(style_id) if style_id is not None else None
        if style is None:
            raise VoxError(404, f"style {style_id} does not exist; GET /speakers lists them")
        return style

    def check_chars(self, count: int, what: str) -> None:
        """Every text a voice reads, whatever field it came in, meets ``--max-chars``."""
        limit = self.state.config.max_input_chars
        if count > limit:
            raise VoxError(413, f"{what} has {count} characters; this server reads {limit}")

    def check_text(self, text: str, field: str) -> None:
        """``field``: the ``text`` query parameter, or the part of the body it came from."""
        if not text.strip():
            loc = ("query", field) if field == "text" else ("body", field)
            raise invalid(loc, f"{field} is empty")
        self.check_chars(len(text), field)

    def check_cost(self, queries: Sequence[AudioQuery]) -> None:
        """What the queries will read and make, refused before any work (413)."""
        total = 0
        for n, query in enumerate(queries):
            where = f"query {n + 1}: " if len(queries) > 1 else ""
            kana = len(query.kana) if query.kana and query.kana.strip() else 0
            self.check_chars(kana, f"{where}kana")
            phrases = spoken_chars(query.accent_phrases)
            self.check_chars(phrases, f"{where}accent_phrases")
            total += max(kana, phrases)
        if len(queries) > 1:
            self.check_chars(total, f"the {len(queries)} queries together")
        pause_fields = self.state.config.compat != "aivisspeech"  # AivisSpeech ignores them
        seconds = sum(estimated_seconds(q, pause_fields=pause_fields) for q in queries)
        self.check_made(seconds, estimate=True)

    def check_made(self, seconds: float, *, estimate: bool = False) -> None:
        """413 once a request's audio (silences included) passes the server's limit: the
        voice may read a query longer than the query said."""
        if seconds > self.max_seconds:
            about = "about " if estimate else ""
            raise VoxError(413, f"the audio would last {about}{seconds:.0f} s (silences "
                                f"included); this server makes at most {self.max_seconds:g} s "
                                "a request")  # fmt: skip

    def options(self, style: VoxStyle, query: AudioQuery) -> SynthesisOptions:
        """The voice's options for ``query``, its fields read with the meanings of the
        engine the server stands in for (``--compat``)."""
        if self.state.config.compat == "aivisspeech":
            return aivisspeech.synthesis_options(style, query)
        return synthesis_options(style, query)

    async def engine_request(
        self, work: VoxWork, style: VoxStyle, query: AudioQuery, *, early_audio: bool
    ) -> EngineRequest:
        """What the voice reads for ``query``: its ``kana`` exactly as ``/tts`` would when
        its phrases are unchanged, else the phonemes of its (edited) phrases."""
        options = self.options(style, query)
        rate = self.state.card(style.voice).sample_rate
        unchanged: list[Phonemes] | None = None
        if query.kana and query.kana.strip():
            kana = query.kana
            read = self.state.service.read
            readings = await work.run(lambda: read(style.voice, kana, options))
            made = audio_query(readings, kana, rate).accent_phrases
            if structure(made) == structure(query.accent_phrases):
                unchanged = [r.phonemes for r in readings]
        phrases = sentences(query.accent_phrases)
        reading = unchanged or [reading_of(s) for s in phrases]
        text = "".join(p.text for p in reading)
        lengths = _lengths(phrases, reading, query.speedScale)
        return EngineRequest(style.voice, text, options, early_audio, tuple(reading), lengths)

    async def synthesize(
        self, work: VoxWork, style: VoxStyle, query: AudioQuery, made: float
    ) -> tuple[str, float]:
        """One query's WAV in a temporary file (its path: the caller removes it) and its
        seconds (``made``: seconds this request made before). The voice's audio goes to
        a file as it comes and the WAV is written from there a block at a time, so the
        server holds neither whole (:mod:`yomiage.server.spool`)."""
        card = self.state.card(style.voice)
        request = await self.engine_request(work, style, query, early_audio=False)
        service = self.state.service

        def generate(spool: AudioSpool) -> float:
            # A stream, not one call, so that a client leaving stops the synthesis too.
            started = time.perf_counter()
            source = service.open(request)
            work.when_cancelled(source.cancel)
            try:
                for chunk in iter(source.next, None):
                    spool.add(chunk.samples)
            finally:
                source.close()
            return time.perf_counter() - started

        # The files are made here, not in the steps, so that they are removed whatever
        # way a step ends (a client that leaves as a step returns leaves it running).
        with ResponseSpool(card.sample_rate) as spool:
            wall = await work.run(lambda: generate(spool))
            audio = spool.finish()
            self.count(style.voice, audio.seconds, wall)
            seconds = output_seconds(audio.length, card.sample_rate, query)
            self.check_made(made + seconds)
            path = temp_file(".wav")
            try:
                await work.run(lambda: _write_wav(path, audio, query, work.check))
            except BaseException:
                remove(path)
                raise
        return path, seconds

    def count(self, voice: str, seconds: float, wall: float) -> None:
        """The audio made, in the same metrics as the speech routes'."""
        metrics = self.state.metrics
        metrics.audio_seconds.inc(voice, amount=seconds)
        metrics.synthesis_seconds.inc(voice, amount=wall)
        if seconds > 0:
            metrics.rtf.observe(wall / seconds, voice)


def _write_wav(
    path: str, audio: SpooledAudio, query: AudioQuery, check: Callable[[], None]
) -> None:
    """The WAV of ``query`` for the voice's ``audio`` into the file ``path`` (blocking)."""
    with spool_errors(), open(path, "wb") as out:
        write_wav(out, audio.blocks(), audio.sample_rate, query, peak=audio.peak, check=check)


def _lengths(
    phrases: Sequence[Sequence[AccentPhrase]], reading: Sequence[Phonemes], speed_scale: float
) -> tuple[tuple[float | None, ...] | None, ...] | None:
    """Each sentence's phoneme lengths as the query sets them, shortened by speedScale as
    VOICEVOX does; None for a sentence whose reading does not line up with its moras
    (the voice read the kana its own way) or whose lengths are all zero."""
    if len(phrases) != len(reading):
        return None
    out: list[tuple[float | None, ...] | None] = []
    for sentence, phonemes in zip(phrases, reading, strict=True):
        given = lengths_of(sentence)
        if given is None or reading_of(sentence).phones != phonemes.phones:
            out.append(None)
            continue
        out.append(tuple(None if x is None else x / speed_scale for x in given))
    return tuple(out) if any(x is not None for x in out) else None


def audio_limit(state: ServerState) -> float:
    """Seconds of audio one request may make: the server's setting, else the limit of
    an engine run in this process, else the engine's default for servers."""
    if state.config.max_audio_seconds is not None:
        return state.config.max_audio_seconds
    limits = getattr(getattr(state.service, "tts", None), "limits", None)
    engine = getattr(limits, "max_request_seconds", None)
    return float(engine) if engine else DEFAULT_MAX_REQUEST_SECONDS
