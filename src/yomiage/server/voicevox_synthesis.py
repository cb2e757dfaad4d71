"""What VOICEVOX's synthesis routes share: styles, the checks a request meets before
any work, and a query turned into the engine request that reads it.

``/synthesis``, ``/multi_synthesis`` (:mod:`yomiage.server.voicevox_routes`) and
``/streaming_synthesis`` (:mod:`yomiage.server.voicevox_streaming_routes`) read
a query the same way, so the same query gives the same audio on each.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Request

from yomiage.limits import DEFAULT_MAX_REQUEST_SECONDS
from yomiage.options import SynthesisOptions
from yomiage.server.service import EngineRequest
from yomiage.server.state import ServerState
from yomiage.server.voicevox_http import VoxError, int_param
from yomiage.server.voicevox_work import VoxWork
from yomiage.text.g2p import Phonemes
from yomiage.voicevox import aivisspeech
from yomiage.voicevox.cost import estimated_seconds, spoken_chars
from yomiage.voicevox.ids import VoxSpeaker, VoxStyle, vox_speakers
from yomiage.voicevox.model import AccentPhrase, AudioQuery
from yomiage.voicevox.query import audio_query, lengths_of, reading_of, sentences, structure
from yomiage.voicevox.synthesis import synthesis_options


class VoxSynthesis:
    """The server's voices as VOICEVOX styles and the rules every VOICEVOX request meets.

    One per app, built at start; it holds no state that requests change, so
    any number of requests use it at once.
    """

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.speakers: tuple[VoxSpeaker, ...] = vox_speakers(
            (card.name, card.speaker_ids,
             card.style_ids or {s: i for i, s in enumerate(card.styles)},
             card.credits.speaker_uuids if card.credits else None)
            for card in state.voices.values()
        )  # fmt: skip
        self.styles = {style.id: style for speaker in self.speakers for style in speaker.styles}
        self.max_seconds = audio_limit(state)

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
        if not text.strip():
            raise VoxError(422, f"{field} is empty")
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
        rate = self.state.voices[style.voice].sample_rate
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

    def count(self, voice: str, seconds: float, wall: float) -> None:
        """The audio made, in the same metrics as the speech routes'."""
        metrics = self.state.metrics
        metrics.audio_seconds.inc(voice, amount=seconds)
        metrics.synthesis_seconds.inc(voice, amount=wall)
        if seconds > 0:
            metrics.rtf.observe(wall / seconds, voice)


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
