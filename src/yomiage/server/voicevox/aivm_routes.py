"""AivisSpeech's ``/aivm_models`` routes: voices installed, loaded and removed while serving.

The installed voices are the AIVMX files of the server's models folder
(:class:`~yomiage.aivmx.store.ModelStore`); installing one also loads it, so
it is in ``/speakers``, ``/v1/voices`` and the OpenAI routes at once, and the
next start loads it again (:mod:`yomiage.aivmx.installed`). Guarded like the
dictionary (``--model-api``): ``read`` lists, loads and unloads; ``write`` also
installs, updates and uninstalls. An upload is streamed to a partial file under
its own size limit and checked before it replaces anything
(:mod:`yomiage.server.voicevox.upload_form`). One change runs at a time; an unloaded
voice's requests in flight finish first (they hold the voice). Loading runs on
threads of its own, never on the synthesis threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage.aivmx.installed import installed_voice_name
from yomiage.aivmx.reader import AivmxError
from yomiage.aivmx.store import (
    InstalledModel,
    ModelNotInstalledError,
    ModelStore,
    ModelStoreError,
    NoUpdateError,
    UploadTooLargeError,
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
from yomiage.server.voicevox.http import VoxError, json_response, no_content, vox_router
from yomiage.server.voicevox.synthesis import VoxCatalog
from yomiage.server.voicevox.upload_form import FormError, read_install_form
from yomiage.voicevox.aivm_info import aivm_info

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

    def loaded_as(uuid: str) -> str | None:
        """The name the voice of AIVM model ``uuid`` is loaded under, if it is."""
        for name, card in state.voices.items():
            if card.credits is not None and card.credits.uuid == uuid:
                return name
        return None

    def info(model: InstalledModel) -> dict[str, Any]:
        licence = model.manifest.get("license")
        return aivm_info(model.manifest, path=str(model.path), size=model.size,
                         loaded=loaded_as(model.uuid) is not None,
                         licence=licence if isinstance(licence, str) else None)  # fmt: skip

    async def unload(name: str) -> None:
        """Unload a voice, keeping a default voice loaded (the OpenAI routes need one)."""
        if name == config.default_voice or name in config.voice_aliases.values():
            raise VoxError(400, f"voice {name!r} is this server's --default-voice or the target "
                                "of a --voice-alias; it stays loaded")  # fmt: skip
        others = [n for n in state.voices if n != name]
        if not others:
            raise VoxError(400, f"voice {name!r} is the only voice loaded; load or install "
                                "another before unloading it")  # fmt: skip
        await run(lambda: state.service.unload_voice(name))
        if state.default_voice == name:
            state.default_voice = others[0]
        state.metrics.voices.set(len(state.voices))

    async def load(model: InstalledModel) -> None:
        """Load an installed voice; an older file of it that is loaded is swapped out
        under the same name (its requests in flight finish on it)."""
        old = loaded_as(model.uuid)
        name = old or installed_voice_name(model.name, model.uuid, set(state.voices))
        try:
            if old is not None:
                await run(lambda: state.service.unload_voice(old))
            await run(lambda: state.service.load_voice(name, str(model.path)))
            try:
                VoxCatalog.of(state.voices.values())  # two styles with one VOICEVOX id
            except ModelLoadError as exc:
                await run(lambda: state.service.unload_voice(name))
                raise VoxError(422, str(exc)) from None
        finally:
            if state.default_voice not in state.voices and state.voices:
                state.default_voice = next(iter(state.voices))
            state.metrics.voices.set(len(state.voices))

    async def install_and_load(model: InstalledModel, fresh: bool) -> None:
        try:
            await load(model)
        except VoxError as exc:
            if fresh:  # nothing of it stays: as if the install had not happened
                await run(lambda: store.uninstall(model.uuid))
            raise VoxError(exc.status, f"the voice was not loaded: {exc.detail}") from None

    @route("GET", "/aivm_models")
    async def installed(request: Request) -> Response:
        models = await run(store.installed)
        return json_response({uuid: info(model) for uuid, model in models.items()})

    @route("GET", "/aivm_models/{aivm_model_uuid}")
    async def one(request: Request) -> Response:
        uuid = request.path_params["aivm_model_uuid"]
        return json_response(info(await run(lambda: store.get(uuid))))

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
                before = set(await run(store.installed))
                if form.has_file:
                    model = await run(lambda: store.install_upload(upload))
                else:
                    url = form.url or ""
                    model = await run(lambda: store.install_from(url))
                await install_and_load(model, fresh=model.uuid not in before)
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/load")
    async def load_model(request: Request) -> Response:
        uuid = request.path_params["aivm_model_uuid"]
        async with changing:
            model = await run(lambda: store.get(uuid))
            if loaded_as(uuid) is None:
                await load(model)
        return no_content()

    async def unload_installed(uuid: str) -> None:
        """Unload an installed voice if it is loaded (404 if it is not installed)."""
        await run(lambda: store.get(uuid))
        name = loaded_as(uuid)
        if name is not None:
            await unload(name)

    @route("POST", "/aivm_models/{aivm_model_uuid}/unload")
    async def unload_model(request: Request) -> Response:
        async with changing:
            await unload_installed(request.path_params["aivm_model_uuid"])
        return no_content()

    @route("POST", "/aivm_models/{aivm_model_uuid}/update")
    async def update(request: Request) -> Response:
        allow_write()
        uuid = request.path_params["aivm_model_uuid"]
        async with changing:
            model = await run(lambda: store.update(uuid))
            await install_and_load(model, fresh=False)
        return no_content()

    @route("DELETE", "/aivm_models/{aivm_model_uuid}/uninstall")
    async def uninstall(request: Request) -> Response:
        allow_write()
        uuid = request.path_params["aivm_model_uuid"]
        async with changing:
            name = loaded_as(uuid)  # not unload_installed: an unreadable file goes too
            if name is not None:
                await unload(name)
            await run(lambda: store.uninstall(uuid))
        return no_content()
