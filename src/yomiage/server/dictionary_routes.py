"""The user dictionary over HTTP: list, add, remove (``--dict-api off|read|write``)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from yomiage.errors import UserDictionaryError
from yomiage.server.errors import APIError
from yomiage.server.schemas import WordRequest

if TYPE_CHECKING:
    from yomiage.server.app import ServerState


def add_dictionary_routes(app: FastAPI, state: ServerState) -> None:
    mode = state.config.dict_api

    def allow(write: bool) -> None:
        if mode == "off" or (write and mode != "write"):
            what = "is off" if mode == "off" else "is read-only"
            raise APIError(
                403,
                f"the user dictionary API {what} on this server "
                "(start it with --dict-api write to allow changes)",
                code="dictionary_api_disabled",
            )

    def record(word: Any) -> dict[str, Any]:
        return {
            "surface": word.surface,
            "reading": word.reading,
            "accent": word.accent,
            "priority": word.priority,
            "word_type": word.word_type,
        }

    @app.get("/user_dict", tags=["dictionary"])
    async def list_words() -> dict[str, Any]:
        allow(write=False)
        return {"words": [record(w) for w in state.tts.words()]}

    @app.post("/user_dict", tags=["dictionary"], status_code=201)
    async def add_word(body: WordRequest) -> dict[str, Any]:
        """Add or replace a word; it applies from the next request on."""
        allow(write=True)
        loop = asyncio.get_running_loop()
        try:
            word = await loop.run_in_executor(
                state.executor,
                lambda: state.tts.add_word(
                    body.surface, body.reading, body.accent, body.priority, body.word_type
                ),
            )
        except UserDictionaryError as exc:
            raise APIError(400, str(exc), code="invalid_word") from None
        return record(word)

    @app.delete("/user_dict/{surface}", tags=["dictionary"])
    async def remove_word(surface: str) -> dict[str, Any]:
        allow(write=True)
        known = {w.surface for w in state.tts.words()}
        if surface not in known:
            raise APIError(404, f"{surface!r} is not in the user dictionary", code="word_not_found")
        loop = asyncio.get_running_loop()
        try:
            word = await loop.run_in_executor(state.executor, state.tts.remove_word, surface)
        except UserDictionaryError as exc:
            raise APIError(404, str(exc), code="word_not_found") from None
        return record(word)
