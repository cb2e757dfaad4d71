"""VOICEVOX's engine API on the same server: editors and bots that speak it work as is.

Responses follow VOICEVOX's strict shapes (:mod:`yomiage.server.voicevox_http`).
Style ids are those of :mod:`yomiage.voicevox.ids`; what each AudioQuery
field means for an SBV2 voice is in ``docs/voicevox.md``.
"""

from __future__ import annotations

import io
import logging
import time
import zipfile
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage import __version__
from yomiage.audio import Audio
from yomiage.limits import DEFAULT_MAX_REQUEST_SECONDS
from yomiage.server.service import EngineRequest
from yomiage.server.state import ServerState
from yomiage.server.voicevox_http import (
    VoxError,
    flag_param,
    int_param,
    json_body,
    json_response,
    no_content,
    vox_router,
)
from yomiage.server.voicevox_work import VoxWork
from yomiage.text.accent_phrases import PhraseSpec
from yomiage.text.g2p import Phonemes
from yomiage.voicevox.cost import estimated_seconds, spoken_chars
from yomiage.voicevox.ids import VoxSpeaker, VoxStyle, vox_speakers
from yomiage.voicevox.kana import KanaError, kana_text, parse_kana
from yomiage.voicevox.model import (
    AudioQuery,
    parse_accent_phrases,
    parse_audio_query,
)
from yomiage.voicevox.presets import PresetStore, parse_preset
from yomiage.voicevox.query import (
    audio_query,
    reading_of,
    retime,
    sentences,
    spec_of,
    structure,
)
from yomiage.voicevox.synthesis import output_seconds, synthesis_options, wav_bytes

log = logging.getLogger(__name__)
MAX_QUERIES = 100  # AudioQueries in one /multi_synthesis
# Routes of VOICEVOX for singing and morphing: no SBV2 voice can do them.
UNSUPPORTED = (
    ("POST", "/sing_frame_audio_query"), ("POST", "/sing_frame_f0"),
    ("POST", "/sing_frame_volume"), ("POST", "/frame_synthesis"),
    ("POST", "/synthesis_morphing"), ("POST", "/morphable_targets"),
    ("POST", "/cancellable_synthesis"), ("GET", "/singers"), ("GET", "/singer_info"),
)  # fmt: skip


def add_voicevox_routes(app: FastAPI, state: ServerState) -> None:
    """The VOICEVOX routes, over the server's voices, limits and admission gate."""
    speakers = vox_speakers(
        (card.name, card.speaker_ids, card.style_ids or {s: i for i, s in enumerate(card.styles)},
         card.credits.speaker_uuids if card.credits else None)
        for card in state.voices.values()
    )  # fmt: skip
    styles = {style.id: style for speaker in speakers for style in speaker.styles}
    presets = PresetStore(state.config.presets_path)
    by_uuid = {speaker.speaker_uuid: speaker for speaker in speakers}

    def style_of(request: Request) -> VoxStyle:
        style_id = int_param(request, "speaker")
        style = styles.get(style_id) if style_id is not None else None
        if style is None:
            raise VoxError(404, f"style {style_id} does not exist; GET /speakers lists them")
        return style

    max_seconds = audio_limit(state)

    def check_chars(count: int, what: str) -> None:
        """Every text a voice reads, whatever field it came in, meets ``--max-chars``."""
        limit = state.config.max_input_chars
        if count > limit:
            raise VoxError(413, f"{what} has {count} characters; this server reads {limit}")

    def check_text(text: str, field: str) -> None:
        if not text.strip():
            raise VoxError(422, f"{field} is empty")
        check_chars(len(text), field)

    def check_cost(queries: Sequence[AudioQuery]) -> None:
        """What the queries will read and make, refused before any work (413)."""
        total = 0
        for n, query in enumerate(queries):
            where = f"query {n + 1}: " if len(queries) > 1 else ""
            kana = len(query.kana) if query.kana and query.kana.strip() else 0
            check_chars(kana, f"{where}kana")
            phrases = spoken_chars(query.accent_phrases)
            check_chars(phrases, f"{where}accent_phrases")
            total += max(kana, phrases)
        if len(queries) > 1:
            check_chars(total, f"the {len(queries)} queries together")
        seconds = sum(estimated_seconds(q) for q in queries)
        if seconds > max_seconds:
            raise VoxError(413, f"the audio would last about {seconds:.0f} s (silences "
                                f"included); this server makes at most {max_seconds:g} s "
                                "a request")  # fmt: skip

    route = vox_router(app, state)

    @route("GET", "/version")
    async def version(request: Request) -> Response:
        return json_response(__version__)

    @route("GET", "/core_versions")
    async def core_versions(request: Request) -> Response:
        return json_response([__version__])

    @route("GET", "/engine_manifest")
    async def engine_manifest(request: Request) -> Response:
        return json_response(_manifest(next(iter(state.voices.values())).sample_rate))

    @route("GET", "/speakers")
    async def list_speakers(request: Request) -> Response:
        return json_response([_speaker_json(s) for s in speakers])

    @route("GET", "/speaker_info")
    async def speaker_info(request: Request) -> Response:
        uid = request.query_params.get("speaker_uuid", "")
        speaker = by_uuid.get(uid)
        if speaker is None:
            raise VoxError(404, f"no speaker with uuid {uid[:60]!r}; GET /speakers lists them")
        card = state.voices[speaker.voice]
        licence = card.credits.license if card.credits else None
        return json_response({
            "policy": licence or f"{speaker.voice}: the voice's publisher gave no licence text "
                                 "with it; ask them what its use allows.",
            "portrait": "",
            "style_infos": [{"id": s.id, "icon": "", "portrait": None, "voice_samples": []}
                            for s in speaker.styles],
        })  # fmt: skip

    @route("GET", "/supported_devices")
    async def supported_devices(request: Request) -> Response:
        return json_response({"cpu": True, "cuda": False, "dml": False})

    @route("GET", "/is_initialized_speaker")
    async def is_initialized(request: Request) -> Response:
        style_of(request)
        return json_response(True)  # every voice is loaded and warmed before the server is ready

    @route("POST", "/initialize_speaker")
    async def initialize(request: Request) -> Response:
        style_of(request)
        return no_content()

    async def read(request: Request, style: VoxStyle, text: str, field: str = "text") -> AudioQuery:
        check_text(text, field)
        options = synthesis_options(style, AudioQuery(()))
        rate = state.voices[style.voice].sample_rate
        async with VoxWork(state, request) as work:
            readings = await work.run(lambda: state.service.read(style.voice, text, options))
        return audio_query(readings, text, rate)

    @route("POST", "/audio_query")
    async def make_audio_query(request: Request) -> Response:
        style = style_of(request)
        query = await read(request, style, request.query_params.get("text", ""))
        return json_response(query.to_json())

    @route("POST", "/audio_query_from_preset")
    async def query_from_preset(request: Request) -> Response:
        preset_id = int_param(request, "preset_id")
        preset = presets.get(preset_id) if preset_id is not None else None
        if preset is None:
            raise VoxError(422, f"no preset with id {preset_id}")
        style = styles.get(preset.style_id)
        if style is None:
            raise VoxError(422, f"preset {preset_id} names style {preset.style_id}, not loaded")
        query = await read(request, style, request.query_params.get("text", ""))
        scales = {k: v for k, v in preset.to_json().items()
                  if k not in ("id", "name", "speaker_uuid", "style_id")}  # fmt: skip
        return json_response({**query.to_json(), **scales})

    @route("GET", "/presets")
    async def list_presets(request: Request) -> Response:
        return json_response([p.to_json() for p in presets.all()])

    @route("POST", "/add_preset")
    async def add_preset(request: Request) -> Response:
        return json_response(presets.add(parse_preset(await json_body(request))))

    @route("POST", "/update_preset")
    async def update_preset(request: Request) -> Response:
        preset = parse_preset(await json_body(request))
        if not presets.update(preset):
            raise VoxError(422, f"no preset with id {preset.id} to update")
        return json_response(preset.id)

    @route("POST", "/delete_preset")
    async def delete_preset(request: Request) -> Response:
        preset_id = int_param(request, "id")
        if preset_id is None or not presets.delete(preset_id):
            raise VoxError(422, f"no preset with id {preset_id} to delete")
        return no_content()

    async def retimed(
        request: Request, style: VoxStyle, specs: list[PhraseSpec], field: str
    ) -> Response:
        """Phrases a client wrote, with the lengths the voice gives them."""
        fresh = (await read(request, style, kana_text(specs), field)).accent_phrases
        return json_response([p.to_json() for p in retime(specs, fresh)])

    @route("POST", "/accent_phrases")
    async def make_accent_phrases(request: Request) -> Response:
        style = style_of(request)
        text = request.query_params.get("text", "")
        if flag_param(request, "is_kana", False):
            check_text(text, "text")
            return await retimed(request, style, _kana(text), "text")
        query = await read(request, style, text)
        return json_response([p.to_json() for p in query.accent_phrases])

    @route("POST", "/validate_kana")
    async def validate_kana(request: Request) -> Response:
        _kana(request.query_params.get("text", ""))
        return json_response(True)

    async def requery(request: Request) -> Response:
        """Lengths and pitches for phrases a client sent: the voice reads their kana."""
        style = style_of(request)
        phrases = parse_accent_phrases(await json_body(request))
        check_chars(spoken_chars(phrases), "accent_phrases")
        return await retimed(request, style, [spec_of(p) for p in phrases], "accent_phrases")

    for path in ("/mora_data", "/mora_length", "/mora_pitch"):
        route("POST", path)(requery)

    async def synthesize(
        work: VoxWork, style: VoxStyle, query: AudioQuery, made: float
    ) -> tuple[bytes, float]:
        """One query's WAV and its seconds (``made``: seconds this request made before)."""
        options = synthesis_options(style, query)
        card = state.voices[style.voice]
        unchanged: list[Phonemes] | None = None
        if query.kana and query.kana.strip():
            kana = query.kana
            readings = await work.run(lambda: state.service.read(style.voice, kana, options))
            if structure(audio_query(readings, kana, card.sample_rate).accent_phrases) == structure(
                query.accent_phrases
            ):
                unchanged = [r.phonemes for r in readings]
        reading = unchanged or [reading_of(s) for s in sentences(query.accent_phrases)]

        def generate() -> tuple[Audio, float]:
            # A stream, not one call, so that a client leaving stops the synthesis too.
            started = time.perf_counter()
            text = "".join(p.text for p in reading)
            request = EngineRequest(style.voice, text, options, False, tuple(reading))
            source = state.service.open(request)
            work.when_cancelled(source.cancel)
            try:
                chunks = list(iter(source.next, None))
            finally:
                source.close()
            return Audio.from_chunks(chunks, card.sample_rate), time.perf_counter() - started

        audio, wall = await work.run(generate)
        _count(state, style.voice, len(audio.samples) / card.sample_rate, wall)
        seconds = output_seconds(len(audio.samples), card.sample_rate, query)
        if made + seconds > max_seconds:  # the voice read it longer than the query said
            raise VoxError(413, f"the audio would last {made + seconds:.0f} s (silences "
                                f"included); this server makes at most {max_seconds:g} s a "
                                "request")  # fmt: skip
        data = await work.run(lambda: wav_bytes(audio.samples, card.sample_rate, query, work.check))
        return data, seconds

    @route("POST", "/synthesis")
    async def synthesis(request: Request) -> Response:
        style = style_of(request)
        # Questions are read as questions whatever this says; the flag is checked only.
        flag_param(request, "enable_interrogative_upspeak", True)
        query = parse_audio_query(await json_body(request))
        check_cost([query])
        async with VoxWork(state, request) as work:
            data, _ = await synthesize(work, style, query, 0.0)
        return Response(data, media_type="audio/wav")

    @route("POST", "/multi_synthesis")
    async def multi_synthesis(request: Request) -> Response:
        style = style_of(request)
        body = await json_body(request)
        if not isinstance(body, list) or not 0 < len(body) <= MAX_QUERIES:
            raise VoxError(422, f"the body must be a list of 1-{MAX_QUERIES} AudioQueries")
        queries = [parse_audio_query(q) for q in body]
        if len({q.outputSamplingRate for q in queries}) > 1:
            raise VoxError(422, "the queries ask for different sampling rates")
        check_cost(queries)
        async with VoxWork(state, request) as work:
            wavs: list[bytes] = []
            made = 0.0
            for query in queries:
                data, seconds = await synthesize(work, style, query, made)
                wavs.append(data)
                made += seconds
            archive = await work.run(lambda: _zip(wavs, work.check))
        return Response(archive, media_type="application/zip")

    for method, path in UNSUPPORTED:

        async def unsupported(request: Request, path: str = path) -> Response:
            raise VoxError(501, f"{path}: Style-Bert-VITS2 voices cannot sing or morph")

        route(method, path)(unsupported)


def audio_limit(state: ServerState) -> float:
    """Seconds of audio one request may make: the server's setting, else the limit of
    an engine run in this process, else the engine's default for servers."""
    if state.config.max_audio_seconds is not None:
        return state.config.max_audio_seconds
    limits = getattr(getattr(state.service, "tts", None), "limits", None)
    engine = getattr(limits, "max_request_seconds", None)
    return float(engine) if engine else DEFAULT_MAX_REQUEST_SECONDS


def _zip(wavs: Sequence[bytes], check: Callable[[], None]) -> bytes:
    """``/multi_synthesis``'s archive (blocking: compression takes a while)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for i, data in enumerate(wavs, start=1):
            check()
            archive.writestr(f"{i:03d}.wav", data)
    return out.getvalue()


def _count(state: ServerState, voice: str, seconds: float, wall: float) -> None:
    """The audio made, in the same metrics as the speech routes'."""
    state.metrics.audio_seconds.inc(voice, amount=seconds)
    state.metrics.synthesis_seconds.inc(voice, amount=wall)
    if seconds > 0:
        state.metrics.rtf.observe(wall / seconds, voice)


def _kana(text: str) -> list[PhraseSpec]:
    try:
        return parse_kana(text)
    except KanaError as exc:  # VOICEVOX's ParseKanaBadRequest
        detail = {"text": str(exc), "error_name": exc.name, "error_args": exc.args_}
        raise VoxError(400, detail) from None


def _speaker_json(speaker: VoxSpeaker) -> dict[str, Any]:
    return {
        "name": speaker.name,
        "speaker_uuid": speaker.speaker_uuid,
        "styles": [{"name": s.style, "id": s.id, "type": "talk"} for s in speaker.styles],
        "version": __version__,
        "supported_features": {"permitted_synthesis_morphing": "NOTHING"},
    }


def _manifest(sample_rate: int) -> dict[str, Any]:
    return {
        "manifest_version": "0.13.1",
        "name": "yomiage",
        "brand_name": "yomiage",
        "uuid": "5b2f8e1a-3c4d-4e6f-9a7b-0c1d2e3f4a5b",
        "url": "https://github.com/yomiage/yomiage",
        "icon": "",
        "default_sampling_rate": sample_rate,
        "frame_rate": sample_rate / 512,
        "terms_of_service": "Each voice has its own licence: GET /speaker_info shows it.",
        "update_infos": [],
        "dependency_licenses": [],
        "supported_vvlib_manifest_version": None,
        "supported_features": {
            "adjust_mora_pitch": False,
            "adjust_phoneme_length": False,
            "adjust_speed_scale": True,
            "adjust_pitch_scale": True,
            "adjust_intonation_scale": True,
            "adjust_volume_scale": True,
            "adjust_pause_length": True,
            "interrogative_upspeak": False,
            "synthesis_morphing": False,
            "sing": False,
            "manage_library": False,
            "return_resource_url": False,
            "apply_katakana_english": True,
        },
    }


__all__ = ["add_voicevox_routes"]
