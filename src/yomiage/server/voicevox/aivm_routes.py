"""AivisSpeech's ``/aivm_models`` routes: voices installed, loaded and removed while serving.

The installed voices are the AIVMX files of the server's models folder
(:class:`~yomiage.aivmx.store.ModelStore`); installing one also loads it, so
it is in ``/speakers``, ``/v1/voices`` and the OpenAI routes at once, and the
next start loads it again (:mod:`yomiage.aivmx.installed`). The AIVMX voices
the server was started with are listed too, but stay as they are. Guarded like
the dictionary (``--model-api``): ``read`` lists, loads and unloads; ``write``
also installs, updates and uninstalls. An upload is streamed to a partial file
under its own size limit and checked before it replaces anything
(:mod:`yomiage.server.voicevox.upload_form`). One change runs at a time, and
completes or changes nothing (:mod:`yomiage.server.voicevox.aivm_voices`); an
unloaded voice's requests in flight finish first (they hold the voice). Loading
runs on threads of its own, never on the synthesis threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage.aivmx.reader import AivmxError
from yomiage.aivmx.store import (
    ModelNotInstalledError,
    ModelStore,
    ModelStoreError,
    NoUpdateError,
    UploadTooLargeError,
    canonical_uuid,
)
from yomiage.errors import (
    InvalidSourceError,
    ModelLoadError,
    OfflineError,
    SourceAuthError,
    SourceNetworkError,
    SourceNotFoundError,
)
from yomiage.server.request_body import ClientGone
from yomiage.server.voicevox.aivm_voices import ModelVoices
from yomiage.server.voicevox.http import VoxError, json_response, no_content, vox_router
from yomiage.server.voicevox.upload_form import FormError, read_install_form

if TYPE_CHECKING:
    from yomiage.server.state import ServerState

T = TypeVar("T")
# How a store or loading failure answers: the first matching type wins.
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (ModelNotInstalledError, 404), (UploadTooLargeError, 413), (NoUpdateError, 422),
    (AivmxError, 422), (FormError, 422), (InvalidSourceError, 422),
    (SourceNotFoundError, 422), (SourceAuthError, 422), (OfflineError, 503),
    (SourceNetworkError, 502), (ModelLoadError, 422), (ModelStoreError, 500),
)  # fmt: skip


def add_aivm_routes(app: FastAPI, state: ServerState) -> None:
    """The routes over ``config.models_dir`` (the caller checks it is set and the API on)."""
    config = state.config
    models_dir = config.models_dir
    if models_dir is None:
        raise ValueError("the /aivm_models routes need ServerConfig.models_dir")
    store = ModelStore(models_dir, max_bytes=config.max_upload_bytes)
    voices = ModelVoices(state, store)
    route = vox_router(app, state)
    changing = asyncio.Lock()

    def allow_write() -> None:
        if config.model_api != "write":
            raise VoxError(
                403, "installing, updating and uninstalling voices is off on this server; "
                "start it with --model-api write to allow them",
            )  # fmt: skip

    async def run(work: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(work)
        except Exception as exc:
            for kind, status in _STATUS:
                if isinstance(exc, kind):
                    raise VoxError(status, str(exc)) from None
            raise

    def model_uuid(request: Request) -> str:
        """The path's uuid in the one form the store and the voices use (lower case), so
        no route can miss a voice by spelling its uuid otherwise; 404 if it is none."""
        raw = request.path_params["aivm_model_uuid"]
        key = canonical_uuid(raw)
        if key is None:
            raise VoxError(404, f"model {raw[:60]!r} is not installed")
        return key

    @route("GET", "/aivm_models")
    async def installed(request: Request) -> Response:
        return json_response(await run(voices.listing))

    @route("GET", "/aivm_models/{aivm_model_uuid}")
    async def one(request: Request) -> Response:
        uuid = model_uuid(request)
        return json_response(await run(lambda: voices.info(uuid)))

    @route("POST", "/aivm_models/install")
    async def install(request: Request) -> Response:
        allow_write()
        with store.receive() as upload:
            # Received before the lock: a slow upload holds back no other change.
            try:
                form = await read_install_form(
                    request.receive, request.headers.get("content-type", ""), upload,
                    idle_timeout=config.body_timeout,
                )  # fmt: skip
            except (FormError, UploadTooLargeError) as exc:
                raise VoxError(413 if isinstance(exc, UploadTooLargeError) else 422,
                               str(exc)) from None  # fmt: skip
            except TimeoutError:
                stalled = f"the upload stalled for {config.body_timeout:g} s"
                raise VoxError(408, stalled) from None
            except ClientGone:
                raise VoxError(400, "the client left before the upload ended") from None
            if not form.has_file and not form.url:
                raise VoxError(422, "Either file or url must be provided.")
            async with changing:
                if form.has_file:
                    await run(lambda: voices.install(lambda c: store.install_upload(upload, c)))
                else:
                    url = form.url or ""
                    await run(lambda: voices.install(lambda c: store.install_from(url, check=c)))
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/load")
    async def load_model(request: Request) -> Response:
        uuid = model_uuid(request)
        async with changing:
            await run(lambda: voices.load(uuid))
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/unload")
    async def unload_model(request: Request) -> Response:
        uuid = model_uuid(request)
        async with changing:
            await run(lambda: voices.unload(uuid))
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/update")
    async def update(request: Request) -> Response:
        allow_write()
        uuid = model_uuid(request)
        async with changing:
            await run(lambda: voices.refuse_fixed(uuid, "updated"))
            await run(lambda: voices.install(lambda c: store.update(uuid, check=c)))
        return no_content()

    @route("DELETE", "/aivm_models/{aivm_model_uuid}/uninstall")
    async def uninstall(request: Request) -> Response:
        allow_write()
        uuid = model_uuid(request)
        async with changing:
            # An unreadable <uuid>.aivmx (never listed) goes too: the store removes it.
            await run(lambda: voices.uninstall(uuid, lambda: store.uninstall(uuid)))
        return no_content()
