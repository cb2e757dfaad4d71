"""The user dictionary over HTTP at ``/v1/dictionary``: list, add, remove
(``--dict-api off|read|write``). VOICEVOX's routes to the same words are in
:mod:`yomiage.server.voicevox.dictionary_routes`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from yomiage.errors import (
    DictionaryFullError,
    DictionaryStorageError,
    UnknownWordError,
    UserDictionaryError,
)
from yomiage.server.engine.worker import WorkerCrashed, WorkerUnavailable
from yomiage.server.errors import APIError
from yomiage.server.schemas import WordRequest
from yomiage.text.user_dict import SkippedEntry
from yomiage.text.user_word import UserWord

if TYPE_CHECKING:
    from yomiage.server.state import ServerState


PATH = "/v1/dictionary"


def dictionary_refusal(state: ServerState, *, write: bool) -> str | None:
    """Why ``--dict-api`` forbids this reading (or change) of the dictionary, or None.
    Both dictionary APIs (ours and VOICEVOX's) obey it."""
    mode = state.config.dict_api
    if mode == "write" or (mode == "read" and not write):
        return None
    what = "is off" if mode == "off" else "is read-only"
    return (
        f"the user dictionary API {what} on this server "
        "(start it with --dict-api write to allow changes)"
    )


def add_dictionary_routes(app: FastAPI, state: ServerState) -> None:
    def allow(write: bool) -> None:
        refusal = dictionary_refusal(state, write=write)
        if refusal is not None:
            raise APIError(403, refusal, code="dictionary_api_disabled")

    def record(word: UserWord | SkippedEntry) -> dict[str, Any]:
        if isinstance(word, SkippedEntry):  # an entry of the file that was not valid
            entry = word.entry if isinstance(word.entry, dict) else {"entry": word.entry}
            return {**entry, "skipped": word.reason}
        return {
            "surface": word.surface,
            "reading": word.reading,
            "accent": word.accent,
            "priority": word.priority,
            "word_type": word.word_type,
        }

    async def in_thread(fn: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(state.executor, fn, *args)
        except WorkerCrashed as exc:
            raise APIError(500, str(exc), code="worker_crashed") from None
        except WorkerUnavailable as exc:
            raise APIError(
                503, str(exc), code="worker_restarting", headers={"Retry-After": "2"}
            ) from None

    @app.get(PATH, tags=["dictionary"])
    async def list_words() -> dict[str, Any]:
        allow(write=False)
        return {"words": [record(w) for w in await in_thread(state.service.words)]}

    @app.post(PATH, tags=["dictionary"], status_code=201)
    async def add_word(body: WordRequest) -> dict[str, Any]:
        """Add or replace a word; it applies from the next request on."""
        allow(write=True)
        try:
            # Checked here, once: the word then travels whole to the dictionary.
            word = UserWord.create(**body.model_dump())
            await in_thread(state.service.update_words, [word], (), False)
        except DictionaryStorageError as exc:
            raise APIError(500, str(exc), code="dictionary_not_saved") from None
        except DictionaryFullError as exc:  # the word cap (MAX_WORDS): remove words first
            raise APIError(409, str(exc), code="dictionary_full") from None
        except UserDictionaryError as exc:
            raise APIError(400, str(exc), code="invalid_word") from None
        return record(word)

    @app.delete(PATH + "/{surface}", tags=["dictionary"])
    async def remove_word(surface: str) -> dict[str, Any]:
        allow(write=True)
        try:
            word = await in_thread(state.service.remove_word, surface)
        except UnknownWordError as exc:
            raise APIError(404, str(exc), code="word_not_found") from None
        except DictionaryStorageError as exc:
            raise APIError(500, str(exc), code="dictionary_not_saved") from None
        return record(word)
