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
runs on threads of its own, never on the synthesis threads. An install's file is
received before the change lock, within ``--install-timeout`` and a few at once
(:mod:`yomiage.server.voicevox.install_receive`); a change leaves no converted
bundle behind that no voice uses (:mod:`yomiage.server.voicevox.aivm_bundles`);
listings are built on a thread, once for the requests that ask together.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage.aivmx.reader import AivmxError
from yomiage.aivmx.stop import DownloadTimeoutError, FetchStop
from yomiage.aivmx.store import (
    ModelNotInstalledError,
    ModelStore,
    ModelStoreError,
    NoUpdateError,
    UploadTooLargeError,
    canonical_uuid,
)
from yomiage.errors import (
    CacheError,
    InvalidSourceError,
    ModelLoadError,
    NoSpaceError,
    OfflineError,
    SourceAuthError,
    SourceNetworkError,
    SourceNotFoundError,
)
from yomiage.server.voicevox.aivm_bundles import ConvertedBundles
from yomiage.server.voicevox.aivm_voices import ModelVoices
from yomiage.server.voicevox.hidden_paths import without_paths
from yomiage.server.voicevox.http import VoxError, encoded_json, json_bytes, no_content, vox_router
from yomiage.server.voicevox.install_receive import ReceivingSlots, fetch_watched, receive_form
from yomiage.server.voicevox.shared_build import SharedBuild
from yomiage.server.voicevox.upload_form import FormError
from yomiage.sources.cache import Cache

if TYPE_CHECKING:
    from yomiage.server.state import ServerState

T = TypeVar("T")
# How a store or loading failure answers: the first matching type wins.
# A full disk is never the voice's fault (507), nor is a cache that cannot be written (500).
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (NoSpaceError, 507), (ModelNotInstalledError, 404), (UploadTooLargeError, 413),
    (NoUpdateError, 422), (AivmxError, 422), (FormError, 422), (InvalidSourceError, 422),
    (SourceNotFoundError, 422), (SourceAuthError, 422), (OfflineError, 503),
    (DownloadTimeoutError, 504), (SourceNetworkError, 502), (CacheError, 500),
    (ModelLoadError, 422), (ModelStoreError, 500),
)  # fmt: skip


def _answer(exc: Exception) -> Exception:
    """The VoxError a store, fetch or loading failure answers with (``exc`` if none); its
    message names files, not the server's folders (a loading error names the file it
    read: :mod:`yomiage.server.voicevox.hidden_paths`)."""
    if isinstance(exc, VoxError) and isinstance(exc.detail, str):
        return VoxError(exc.status, without_paths(exc.detail))
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return VoxError(status, without_paths(str(exc)))
    return exc


def add_aivm_routes(app: FastAPI, state: ServerState) -> None:
    """The routes over ``config.models_dir`` (the caller checks it is set and the API on)."""
    config = state.config
    models_dir = config.models_dir
    if models_dir is None:
        raise ValueError("the /aivm_models routes need ServerConfig.models_dir")
    store = ModelStore(models_dir, max_bytes=config.max_upload_bytes, cache_dir=state.cache_dir)
    voices = ModelVoices(state, store)
    cache = Cache.at(state.cache_dir)
    cache.sweep_converted()  # what conversions killed before this start left
    bundles = ConvertedBundles(cache, store, lambda: state.voices)
    listing = SharedBuild(lambda: json_bytes(voices.listing()))
    receiving = ReceivingSlots()
    route = vox_router(app, state)
    changing = asyncio.Lock()

    @asynccontextmanager
    async def change() -> AsyncIterator[None]:
        """One change at a time; a listing begun before it ends is not shared after."""
        async with changing:
            try:
                yield
            finally:
                listing.changed()

    def allow_write() -> None:
        if config.model_api != "write":
            raise VoxError(
                403, "installing, updating and uninstalling voices is off on this server; "
                "start it with --model-api write to allow them",
            )  # fmt: skip

    async def answered(work: Awaitable[T]) -> T:
        """``work``'s result; a store, fetch or loading failure as the VoxError it is."""
        try:
            return await work
        except Exception as exc:
            answer = _answer(exc)
            if answer is exc:
                raise
            raise answer from None

    async def run(work: Callable[[], T]) -> T:
        return await answered(asyncio.to_thread(work))

    async def fetched(request: Request, fetch: Callable[[FetchStop], T], start: float) -> T:
        """``fetch`` (into an upload) outside the lock, within what is left of the
        install's time, stopped if the client leaves."""
        left = max(0.0, start + config.install_timeout - time.monotonic())
        return await answered(fetch_watched(request, fetch, left, limit=config.install_timeout))

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
        return encoded_json(await answered(listing.get()))

    @route("GET", "/aivm_models/{aivm_model_uuid}")
    async def one(request: Request) -> Response:
        uuid = model_uuid(request)
        return encoded_json(await run(lambda: json_bytes(voices.info(uuid))))

    @route("POST", "/aivm_models/install")
    async def install(request: Request) -> Response:
        allow_write()
        start = time.monotonic()
        with receiving.take(), store.receive() as upload:
            # Received before the lock: a slow client or source holds back no other change.
            form = await receive_form(request, upload, idle_timeout=config.body_timeout,
                                      total_timeout=config.install_timeout)  # fmt: skip
            if not form.has_file and not form.url:
                raise VoxError(422, "Either file or url must be provided.")
            url = form.url or ""
            source = None if form.has_file else await fetched(
                request, lambda stop: store.fetch_into(url, upload, stop=stop), start
            )  # fmt: skip
            async with change():
                await run(upload.close)  # its bytes on disk: read for the file it replaces
                replaced = await run(lambda: bundles.replaced_by(upload.path))
                if source is None:
                    await run(lambda: voices.install(lambda c: store.install_upload(upload, c)))
                else:
                    await run(lambda: voices.install(
                        lambda c: store.install_fetched(upload, source, check=c)))  # fmt: skip
                await run(lambda: bundles.forget(replaced))
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/load")
    async def load_model(request: Request) -> Response:
        uuid = model_uuid(request)
        async with change():
            await run(lambda: voices.load(uuid))
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/unload")
    async def unload_model(request: Request) -> Response:
        uuid = model_uuid(request)
        async with change():
            await run(lambda: voices.unload(uuid))
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/update")
    async def update(request: Request) -> Response:
        allow_write()
        uuid = model_uuid(request)
        await run(lambda: voices.refuse_fixed(uuid, "updated"))
        start = time.monotonic()
        with receiving.take(), store.receive() as upload:
            model = await fetched(
                request, lambda stop: store.fetch_update(uuid, upload, stop=stop), start
            )  # fmt: skip
            async with change():
                replaced = await run(lambda: bundles.content(model.path))
                await run(lambda: voices.install(
                    lambda c: store.install_update(upload, model, check=c)))  # fmt: skip
                await run(lambda: bundles.forget(replaced))
        return no_content()

    @route("DELETE", "/aivm_models/{aivm_model_uuid}/uninstall")
    async def uninstall(request: Request) -> Response:
        allow_write()
        uuid = model_uuid(request)
        async with change():
            removed = await run(lambda: bundles.installed(uuid))
            # An unreadable <uuid>.aivmx (never listed) goes too: the store removes it.
            await run(lambda: voices.uninstall(uuid, lambda: store.uninstall(uuid)))
            await run(lambda: bundles.forget(removed))
        return no_content()
