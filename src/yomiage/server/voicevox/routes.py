"""VOICEVOX's engine API on the same server: editors and bots that speak it work as is.

Responses follow VOICEVOX's strict shapes (:mod:`yomiage.server.voicevox.http`).
Style ids are those of :mod:`yomiage.voicevox.ids`; what each AudioQuery
field means for an SBV2 voice is in ``docs/voicevox.md``.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage import __version__
from yomiage.runtime.engines.gpu import cuda_may_run
from yomiage.server.config import Compat
from yomiage.server.encoding import SpoolError
from yomiage.server.spool import remove, temp_file, temp_file_response
from yomiage.server.state import ServerState
from yomiage.server.voicevox.http import (
    VoxError,
    body_loc,
    flag_param,
    int_param,
    invalid,
    json_body,
    json_response,
    no_content,
    text_param,
    vox_router,
)
from yomiage.server.voicevox.query_size import MAX_QUERIES, QUERY_PATHS, query_body_limit
from yomiage.server.voicevox.streaming_routes import add_streaming_routes
from yomiage.server.voicevox.synthesis import VoxSynthesis
from yomiage.server.voicevox.work import VoxWork
from yomiage.synthesis.pitch import world_available
from yomiage.text.accent_phrases import PhraseSpec
from yomiage.voicevox import aivisspeech
from yomiage.voicevox.aivm_info import policy
from yomiage.voicevox.cost import spoken_chars
from yomiage.voicevox.engine_id import ENGINE_UUID, SUPPORTED_FEATURES
from yomiage.voicevox.ids import VoxSpeaker, VoxStyle
from yomiage.voicevox.kana import KanaError, kana_text, parse_kana
from yomiage.voicevox.model import (
    MAX_MORAS,
    AccentPhrase,
    AudioQuery,
    QueryError,
    parse_accent_phrases,
    parse_audio_query,
)
from yomiage.voicevox.presets import PresetStore, parse_preset
from yomiage.voicevox.query import audio_query, retime, spec_of
from yomiage.voicevox.synthesis import synthesis_options

log = logging.getLogger(__name__)
# Routes of VOICEVOX for singing and morphing: no SBV2 voice can do them.
UNSUPPORTED = (
    ("POST", "/sing_frame_audio_query"), ("POST", "/sing_frame_f0"),
    ("POST", "/sing_frame_volume"), ("POST", "/frame_synthesis"),
    ("POST", "/synthesis_morphing"), ("POST", "/morphable_targets"),
    ("GET", "/singers"), ("GET", "/singer_info"),
)  # fmt: skip


def add_voicevox_routes(app: FastAPI, state: ServerState) -> None:
    """The VOICEVOX routes, over the server's voices, limits and admission gate."""
    vox = VoxSynthesis(state)
    style_of = vox.style_of
    check_chars, check_text, check_cost = vox.check_chars, vox.check_text, vox.check_cost
    presets = PresetStore(state.config.presets_path)
    route = vox_router(app, state)
    # A query weighs ~200 bytes a character: its routes read larger bodies than /tts.
    state.body_limits.update(
        dict.fromkeys(QUERY_PATHS, query_body_limit(state.config.max_input_chars))
    )

    @route("GET", "/version")
    async def version(request: Request) -> Response:
        return json_response(__version__)

    @route("GET", "/core_versions")
    async def core_versions(request: Request) -> Response:
        return json_response([__version__])

    @route("GET", "/engine_manifest")
    async def engine_manifest(request: Request) -> Response:
        # The first voice's rate; AivisSpeech's own while none is loaded yet.
        rate = next((card.sample_rate for card in state.voices.values()), 44100)
        return json_response(_manifest(rate, state.config.compat))

    @route("GET", "/speakers")
    async def list_speakers(request: Request) -> Response:
        return json_response([_speaker_json(s) for s in vox.speakers])

    @route("GET", "/speaker_info")
    async def speaker_info(request: Request) -> Response:
        uid = text_param(request, "speaker_uuid")
        speaker = vox.catalog.by_uuid.get(uid)
        if speaker is None:
            raise VoxError(404, f"no speaker with uuid {uid[:60]!r}; GET /speakers lists them")
        card = state.card(speaker.voice)
        licence = policy(card.credits.license, card.credits.uuid) if card.credits else None
        return json_response({
            "policy": licence or f"{speaker.voice}: the voice's publisher gave no licence text "
                                 "with it; ask them what its use allows.",
            "portrait": "",
            # A style with no portrait of its own: null, as VOICEVOX's engine sends it
            # (its document says string); editors then show the speaker's.
            "style_infos": [{"id": s.id, "icon": "", "portrait": None, "voice_samples": []}
                            for s in speaker.styles],
        })  # fmt: skip

    @route("GET", "/supported_devices")
    async def supported_devices(request: Request) -> Response:
        # cuda: what --use_gpu (the editor's GPU mode) could use, or what runs now
        cuda = cuda_may_run() or any("cuda" in c.runtime for c in state.voices.values())
        return json_response({"cpu": True, "cuda": cuda, "dml": False})

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
        rate = state.card(style.voice).sample_rate
        async with VoxWork(state, request) as work:
            readings = await work.run(lambda: state.service.read(style.voice, text, options))
        query = audio_query(readings, text, rate)
        # AivisSpeech's queries carry its own field, at its default.
        aivis = state.config.compat == "aivisspeech"
        return replace(query, tempoDynamicsScale=1.0) if aivis else query

    def returnable(phrases: Sequence[AccentPhrase]) -> None:
        """Accent phrases this server made for a text, if the routes that take phrases
        would take them back: the moras of a text can outnumber its characters (㍿ is 7
        moras, w is 4), so a text within ``--max-chars`` may make phrases past the
        limits (413 here, where the text was sent, rather than at /synthesis)."""
        # AivisSpeech's shape sends each pause as a mora of its phrase (phrases_out).
        pauses_in_moras = state.config.compat == "aivisspeech"
        moras = sum(len(p.moras) + (pauses_in_moras and p.pause_mora is not None)
                    for p in phrases)  # fmt: skip
        if moras > MAX_MORAS:
            raise VoxError(413, f"the text makes {moras} moras; a query holds at most "
                                f"{MAX_MORAS}: send it in parts")  # fmt: skip
        spoken, limit = spoken_chars(phrases), state.config.max_input_chars
        if spoken > limit:
            raise VoxError(413, f"the text reads as {spoken} characters of kana; this server "
                                f"reads {limit}: send it in parts")  # fmt: skip

    def returnable_query(query: AudioQuery) -> AudioQuery:
        """``query`` if ``/synthesis`` would take it back (:func:`returnable`, and the
        audio it would make)."""
        returnable(query.accent_phrases)
        check_cost([query])
        return query

    @route("POST", "/audio_query")
    async def make_audio_query(request: Request) -> Response:
        style = style_of(request)
        query = returnable_query(await read(request, style, text_param(request, "text")))
        return json_response(vox.query_out(query))

    @route("POST", "/audio_query_from_preset")
    async def query_from_preset(request: Request) -> Response:
        preset_id = int_param(request, "preset_id")
        text = text_param(request, "text")
        preset = presets.get(preset_id) if preset_id is not None else None
        if preset is None:
            raise VoxError(422, f"no preset with id {preset_id}")
        style = vox.styles.get(preset.style_id)
        if style is None:
            raise VoxError(422, f"preset {preset_id} names style {preset.style_id}, not loaded")
        query = returnable_query(await read(request, style, text))
        scales = {k: v for k, v in preset.to_json().items()
                  if k not in ("id", "name", "speaker_uuid", "style_id")}  # fmt: skip
        return json_response({**vox.query_out(query), **scales})

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
        return json_response(vox.phrases_out(retime(specs, fresh)))

    @route("POST", "/accent_phrases")
    async def make_accent_phrases(request: Request) -> Response:
        style = style_of(request)
        text = text_param(request, "text")
        if flag_param(request, "is_kana", False):
            check_text(text, "text")
            return await retimed(request, style, _kana(text), "text")
        query = await read(request, style, text)
        returnable(query.accent_phrases)
        return json_response(vox.phrases_out(query.accent_phrases))

    @route("POST", "/validate_kana")
    async def validate_kana(request: Request) -> Response:
        _kana(text_param(request, "text"))
        return json_response(True)

    async def requery(request: Request) -> Response:
        """Lengths and pitches for phrases a client sent: the voice reads their kana."""
        style = style_of(request)
        phrases = vox.query_in(
            AudioQuery(parse_accent_phrases(await json_body(request)))
        ).accent_phrases
        check_chars(spoken_chars(phrases), "accent_phrases")
        return await retimed(request, style, [spec_of(p) for p in phrases], "accent_phrases")

    for path in ("/mora_data", "/mora_length", "/mora_pitch"):
        route("POST", path)(requery)

    @route("POST", "/synthesis")
    async def synthesis(request: Request) -> Response:
        style = style_of(request)
        # Questions are read as questions whatever this says; the flag is checked only.
        flag_param(request, "enable_interrogative_upspeak", True)
        query = vox.query_in(parse_audio_query(await json_body(request)))
        check_cost([query])
        async with VoxWork(state, request) as work:
            wav, _ = await vox.synthesize(work, style, query, 0.0)
        return await temp_file_response(wav, "audio/wav")

    @route("POST", "/multi_synthesis")
    async def multi_synthesis(request: Request) -> Response:
        style = style_of(request)
        body = await json_body(request)
        if not isinstance(body, list) or not 0 < len(body) <= MAX_QUERIES:
            raise invalid(("body",), f"the body must be a list of 1-{MAX_QUERIES} AudioQueries")
        queries = [vox.query_in(_query_at(n, q)) for n, q in enumerate(body)]
        if len({q.outputSamplingRate for q in queries}) > 1:
            raise VoxError(422, "the queries ask for different sampling rates")
        check_cost(queries)
        async with VoxWork(state, request) as work:
            wavs: list[str] = []  # files, so that no WAV is held whole (server/spool.py)
            try:
                made = 0.0
                for query in queries:
                    wav, seconds = await vox.synthesize(work, style, query, made)
                    wavs.append(wav)
                    made += seconds
                archive = temp_file(".zip")
                try:
                    await work.run(lambda: _zip(archive, wavs, work.check))
                except BaseException:
                    remove(archive)
                    raise
            finally:
                for wav in wavs:
                    remove(wav)
        return await temp_file_response(archive, "application/zip")

    add_streaming_routes(route, state, vox, synthesis)
    for method, path in UNSUPPORTED:

        async def unsupported(request: Request, path: str = path) -> Response:
            raise VoxError(501, f"{path}: Style-Bert-VITS2 voices cannot sing or morph")

        route(method, path)(unsupported)


def _zip(archive: str, wavs: Sequence[str], check: Callable[[], None]) -> None:
    """``/multi_synthesis``'s archive of the WAV files ``wavs`` into the file ``archive``
    (blocking: compression takes a while)."""
    try:
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
            for i, wav in enumerate(wavs, start=1):
                check()
                out.write(wav, f"{i:03d}.wav")
    except OSError as exc:
        raise SpoolError.of(exc) from None


def _query_at(n: int, data: Any) -> AudioQuery:
    """The ``n``th query of a list, a fault in it placed under its index."""
    try:
        return parse_audio_query(data)
    except QueryError as exc:
        raise invalid(["body", n, *body_loc(exc.field)[1:]], f"query {n + 1}: {exc}") from None


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


def _manifest(sample_rate: int, compat: Compat) -> dict[str, Any]:
    """VOICEVOX's engine manifest; as AivisSpeech's (``--compat aivisspeech``), its audio
    and frame rates, which its clients assume, and no pause lengths (they are ignored).
    The editor shows a slider only for a feature said here, so each is one that works:
    pitch and (VOICEVOX's) intonation only where WORLD does."""
    features = {key: value for key, (value, _) in SUPPORTED_FEATURES.items()}
    if not world_available():
        features["adjust_pitch_scale"] = False
        if compat != "aivisspeech":  # AivisSpeech's intonation is the style's strength
            features["adjust_intonation_scale"] = False
    frame_rate = sample_rate / 512
    if compat == "aivisspeech":
        sample_rate, frame_rate = aivisspeech.SAMPLING_RATE, aivisspeech.FRAME_RATE
        features["adjust_pause_length"] = False
    return {
        "manifest_version": "0.13.1",
        "name": "yomiage",
        "brand_name": "yomiage",
        "uuid": ENGINE_UUID,
        "url": "https://github.com/yomiage/yomiage",
        "icon": "",
        "default_sampling_rate": sample_rate,
        "frame_rate": frame_rate,
        "terms_of_service": "Each voice has its own licence: GET /speaker_info shows it.",
        "update_infos": [],
        "dependency_licenses": [],
        # null, as VOICEVOX's engine sends it while it takes no library (manage_library is
        # false); its document says string and leaves the null out (docs/voicevox.md).
        "supported_vvlib_manifest_version": None,
        "supported_features": features,
    }


__all__ = ["add_voicevox_routes"]
