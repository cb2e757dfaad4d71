"""VOICEVOX's engine API on the same server: editors and bots that speak it work as is.

Clients are strict in ways FastAPI's defaults are not, so the responses here
are built by hand: JSON is sent as exactly ``application/json`` (clients
compare the string), a 204 carries no body and no content type, and errors
are ``{"detail": ...}`` (VOICEVOX's shape; its clients read ``detail``).
Style ids are those of :mod:`yomiage.voicevox.ids`; what each AudioQuery
field means for an SBV2 voice is in ``docs/voicevox.md``.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import zipfile
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage import __version__
from yomiage.errors import MissingExtraError
from yomiage.server.errors import APIError
from yomiage.server.failures import failure_response
from yomiage.server.speech_routes import admit
from yomiage.server.state import ServerState
from yomiage.text.g2p import Phonemes
from yomiage.voicevox.ids import VoxSpeaker, VoxStyle, vox_speakers
from yomiage.voicevox.model import (
    AudioQuery,
    QueryError,
    parse_accent_phrases,
    parse_audio_query,
)
from yomiage.voicevox.presets import PresetStore, parse_preset
from yomiage.voicevox.query import audio_query, reading_of, sentences, structure
from yomiage.voicevox.synthesis import synthesis_options, wav_bytes

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_QUERIES = 100  # AudioQueries in one /multi_synthesis
# Routes of VOICEVOX for singing and morphing: no SBV2 voice can do them.
UNSUPPORTED = (
    ("POST", "/sing_frame_audio_query"), ("POST", "/sing_frame_f0"),
    ("POST", "/sing_frame_volume"), ("POST", "/frame_synthesis"),
    ("POST", "/synthesis_morphing"), ("POST", "/morphable_targets"),
    ("POST", "/cancellable_synthesis"), ("GET", "/singers"), ("GET", "/singer_info"),
)  # fmt: skip


class VoxError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(str(detail))
        self.status = status
        self.detail = detail


def _json(value: Any, status: int = 200) -> Response:
    body = json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    return Response(body, status, media_type="application/json")


def _no_content() -> Response:
    return Response(status_code=204)  # no body, no content type


def _int(request: Request, name: str, *, required: bool = True) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        if required:
            raise VoxError(422, f"query parameter {name!r} is required")
        return None
    try:
        return int(raw)
    except ValueError:
        raise VoxError(
            422, f"query parameter {name!r} must be an integer, not {raw[:40]!r}"
        ) from None


def _flag(request: Request, name: str, default: bool) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise VoxError(422, f"query parameter {name!r} must be true or false")


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
        style_id = _int(request, "speaker")
        style = styles.get(style_id) if style_id is not None else None
        if style is None:
            raise VoxError(404, f"style {style_id} does not exist; GET /speakers lists them")
        return style

    async def run(request: Request, work: Callable[[], T]) -> T:
        """``work`` in the executor, holding an admission slot (as speech requests do)."""
        slot = await admit(state, request)
        try:
            return await asyncio.get_running_loop().run_in_executor(state.executor, work)
        finally:
            slot.release()

    def route(method: str, path: str) -> Callable[[Callable[..., Any]], Any]:
        def wrap(handler: Callable[..., Any]) -> Any:
            async def endpoint(request: Request) -> Response:
                try:
                    return await handler(request)  # type: ignore[no-any-return]
                except VoxError as exc:
                    return _json({"detail": exc.detail}, exc.status)
                except QueryError as exc:
                    return _json({"detail": str(exc)}, 422)
                except MissingExtraError as exc:
                    return _json({"detail": str(exc)}, 400)
                except Exception as exc:  # the same mapping as the speech routes
                    mapped = failure_response(exc, state.metrics, "text")
                    if isinstance(mapped, APIError):
                        return _json({"detail": mapped.message}, mapped.status)
                    raise

            endpoint.__name__ = f"voicevox_{path.strip('/').replace('/', '_')}"
            app.add_api_route(path, endpoint, methods=[method], tags=["voicevox"],
                              response_class=Response)  # fmt: skip
            return handler

        return wrap

    @route("GET", "/version")
    async def version(request: Request) -> Response:
        return _json(__version__)

    @route("GET", "/core_versions")
    async def core_versions(request: Request) -> Response:
        return _json([__version__])

    @route("GET", "/engine_manifest")
    async def engine_manifest(request: Request) -> Response:
        return _json(_manifest(next(iter(state.voices.values())).sample_rate))

    @route("GET", "/speakers")
    async def list_speakers(request: Request) -> Response:
        return _json([_speaker_json(s) for s in speakers])

    @route("GET", "/speaker_info")
    async def speaker_info(request: Request) -> Response:
        uid = request.query_params.get("speaker_uuid", "")
        speaker = by_uuid.get(uid)
        if speaker is None:
            raise VoxError(404, f"no speaker with uuid {uid[:60]!r}; GET /speakers lists them")
        card = state.voices[speaker.voice]
        licence = card.credits.license if card.credits else None
        return _json({
            "policy": licence or f"{speaker.voice}: the voice's publisher gave no licence text "
                                 "with it; ask them what its use allows.",
            "portrait": "",
            "style_infos": [{"id": s.id, "icon": "", "portrait": None, "voice_samples": []}
                            for s in speaker.styles],
        })  # fmt: skip

    @route("GET", "/supported_devices")
    async def supported_devices(request: Request) -> Response:
        return _json({"cpu": True, "cuda": False, "dml": False})

    @route("GET", "/is_initialized_speaker")
    async def is_initialized(request: Request) -> Response:
        style_of(request)
        return _json(True)  # every voice is loaded and warmed before the server is ready

    @route("POST", "/initialize_speaker")
    async def initialize(request: Request) -> Response:
        style_of(request)
        return _no_content()

    async def read(request: Request, style: VoxStyle, text: str) -> AudioQuery:
        limit = state.config.max_input_chars
        if not text.strip():
            raise VoxError(422, "text is empty")
        if len(text) > limit:
            raise VoxError(413, f"text has {len(text)} characters; this server reads {limit}")
        options = synthesis_options(style, AudioQuery(()))
        rate = state.voices[style.voice].sample_rate
        readings = await run(request, lambda: state.service.read(style.voice, text, options))
        return audio_query(readings, text, rate)

    @route("POST", "/audio_query")
    async def make_audio_query(request: Request) -> Response:
        style = style_of(request)
        query = await read(request, style, request.query_params.get("text", ""))
        return _json(query.to_json())

    @route("POST", "/audio_query_from_preset")
    async def query_from_preset(request: Request) -> Response:
        preset_id = _int(request, "preset_id")
        preset = presets.get(preset_id) if preset_id is not None else None
        if preset is None:
            raise VoxError(422, f"no preset with id {preset_id}")
        style = styles.get(preset.style_id)
        if style is None:
            raise VoxError(422, f"preset {preset_id} names style {preset.style_id}, not loaded")
        query = await read(request, style, request.query_params.get("text", ""))
        scales = {k: v for k, v in preset.to_json().items()
                  if k not in ("id", "name", "speaker_uuid", "style_id")}  # fmt: skip
        return _json({**query.to_json(), **scales})

    @route("GET", "/presets")
    async def list_presets(request: Request) -> Response:
        return _json([p.to_json() for p in presets.all()])

    @route("POST", "/add_preset")
    async def add_preset(request: Request) -> Response:
        return _json(presets.add(parse_preset(await _body(request))))

    @route("POST", "/update_preset")
    async def update_preset(request: Request) -> Response:
        preset = parse_preset(await _body(request))
        if not presets.update(preset):
            raise VoxError(422, f"no preset with id {preset.id} to update")
        return _json(preset.id)

    @route("POST", "/delete_preset")
    async def delete_preset(request: Request) -> Response:
        preset_id = _int(request, "id")
        if preset_id is None or not presets.delete(preset_id):
            raise VoxError(422, f"no preset with id {preset_id} to delete")
        return _no_content()

    @route("POST", "/accent_phrases")
    async def make_accent_phrases(request: Request) -> Response:
        style = style_of(request)
        if _flag(request, "is_kana", False):
            raise VoxError(400, "is_kana=true (AquesTalk-like kana) is not supported yet; "
                                "send the text itself")  # fmt: skip
        query = await read(request, style, request.query_params.get("text", ""))
        return _json([p.to_json() for p in query.accent_phrases])

    async def requery(request: Request) -> Response:
        """Lengths and pitches for phrases a client sent: the voice reads their kana."""
        style = style_of(request)
        phrases = parse_accent_phrases(await _body(request))
        text = "".join(
            m.text for p in phrases for m in (*p.moras, *([p.pause_mora] if p.pause_mora else []))
        )
        fresh = (await read(request, style, text)).accent_phrases
        fresh_moras = [m for p in fresh for m in p.moras]
        if [m.text for m in fresh_moras] != [m.text for p in phrases for m in p.moras]:
            return _json([p.to_json() for p in phrases])  # cannot align: unchanged
        merged, k = [], 0
        for phrase in phrases:
            moras = []
            for mora in phrase.moras:
                new = fresh_moras[k]
                k += 1
                moras.append(type(mora)(mora.text, mora.consonant, new.consonant_length,
                                        mora.vowel, new.vowel_length, new.pitch))  # fmt: skip
            merged.append(type(phrase)(tuple(moras), phrase.accent, phrase.pause_mora,
                                       phrase.is_interrogative))  # fmt: skip
        return _json([p.to_json() for p in merged])

    for path in ("/mora_data", "/mora_length", "/mora_pitch"):
        route("POST", path)(requery)

    async def synthesize(request: Request, style: VoxStyle, query: AudioQuery) -> bytes:
        options = synthesis_options(style, query)
        card = state.voices[style.voice]
        unchanged: list[Phonemes] | None = None
        if query.kana and query.kana.strip():
            kana = query.kana
            readings = await run(request, lambda: state.service.read(style.voice, kana, options))
            if structure(audio_query(readings, kana, card.sample_rate).accent_phrases) == structure(
                query.accent_phrases
            ):
                unchanged = [r.phonemes for r in readings]
        reading = unchanged or [reading_of(s) for s in sentences(query.accent_phrases)]
        audio = await run(request, lambda: state.service.generate(style.voice, reading, options))
        return wav_bytes(audio.samples, card.sample_rate, query)

    @route("POST", "/synthesis")
    async def synthesis(request: Request) -> Response:
        style = style_of(request)
        _flag(request, "enable_interrogative_upspeak", True)  # questions are read as such anyway
        query = parse_audio_query(await _body(request))
        return Response(await synthesize(request, style, query), media_type="audio/wav")

    @route("POST", "/multi_synthesis")
    async def multi_synthesis(request: Request) -> Response:
        style = style_of(request)
        body = await _body(request)
        if not isinstance(body, list) or not 0 < len(body) <= MAX_QUERIES:
            raise VoxError(422, f"the body must be a list of 1-{MAX_QUERIES} AudioQueries")
        queries = [parse_audio_query(q) for q in body]
        if len({q.outputSamplingRate for q in queries}) > 1:
            raise VoxError(422, "the queries ask for different sampling rates")
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for i, query in enumerate(queries, start=1):
                archive.writestr(f"{i:03d}.wav", await synthesize(request, style, query))
        return Response(out.getvalue(), media_type="application/zip")

    for method, path in UNSUPPORTED:

        async def unsupported(request: Request, path: str = path) -> Response:
            raise VoxError(501, f"{path}: Style-Bert-VITS2 voices cannot sing or morph")

        route(method, path)(unsupported)


async def _body(request: Request) -> Any:
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise VoxError(422, f"the body is not JSON: {exc}") from None


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
