"""VOICEVOX's user-dictionary routes over the engine's own user dictionary.

The words are the server's (``--user-dict``, or the per-user file): the same
words ``/v1/dictionary`` lists, under the same checks and the same
``--dict-api`` permission. Word UUIDs are derived from the surface
(:mod:`yomiage.voicevox.user_dict`). A change is saved before it is used; an
import is checked whole and saved in one write, so a bad word leaves the
dictionary as it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import Response

from yomiage.errors import DictionaryStorageError, UserDictionaryError
from yomiage.server.dictionary_routes import dictionary_refusal
from yomiage.server.voicevox.http import (
    VoxError,
    flag_param,
    int_param,
    invalid,
    json_body,
    json_response,
    no_content,
    text_param,
    vox_router,
)
from yomiage.text.user_word import DEFAULT_PRIORITY, UserWord
from yomiage.voicevox.user_dict import (
    WORD_TYPE_NAMES,
    word_json,
    word_type_of,
    word_uuid,
    words_from_import,
)

if TYPE_CHECKING:
    from yomiage.server.state import ServerState

T = TypeVar("T")


def add_voicevox_dictionary_routes(app: FastAPI, state: ServerState) -> None:
    route = vox_router(app, state)

    def allow(write: bool) -> None:
        refusal = dictionary_refusal(state, write=write)
        if refusal is not None:
            raise VoxError(403, refusal)

    async def call(work: Callable[[], T]) -> T:
        """``work`` in the executor; a word the dictionary refuses is a 422 naming why."""
        try:
            return await asyncio.get_running_loop().run_in_executor(state.executor, work)
        except DictionaryStorageError as exc:
            raise VoxError(500, str(exc)) from None
        except UserDictionaryError as exc:
            raise VoxError(422, str(exc)) from None

    async def word_of(uid: str) -> UserWord:
        for word in await call(state.service.words):
            if word_uuid(word.surface) == uid:
                return word
        raise VoxError(422, f"no word with uuid {uid[:60]!r}; GET /user_dict lists them")

    def word_from(request: Request) -> UserWord:
        """The word the query parameters give. Parameters of the wrong type or range are
        malformed (VOICEVOX's FastAPI checks them); a word the dictionary refuses is
        VOICEVOX's 422 with a message."""
        surface = text_param(request, "surface")
        pronunciation = text_param(request, "pronunciation")
        accent = int_param(request, "accent_type")
        priority = int_param(request, "priority", required=False)
        if priority is not None and not 0 <= priority <= 10:  # VOICEVOX's range, and ours
            kind = "less_than_equal" if priority > 10 else "greater_than_equal"
            raise invalid(("query", "priority"), "query parameter 'priority' must be 0-10", kind)
        word_type = request.query_params.get("word_type")
        if word_type is not None and word_type not in WORD_TYPE_NAMES:
            names = ", ".join(WORD_TYPE_NAMES)
            raise invalid(("query", "word_type"), f"query parameter 'word_type' must be one "
                                                  f"of {names}", "enum")  # fmt: skip
        try:
            return UserWord.create(
                surface,
                pronunciation,
                accent,
                DEFAULT_PRIORITY if priority is None else priority,
                word_type_of(word_type),
            )
        except UserDictionaryError as exc:
            raise VoxError(422, str(exc)) from None

    @route("GET", "/user_dict")
    async def list_words(request: Request) -> Response:
        allow(write=False)
        words = await call(state.service.words)
        return json_response({word_uuid(w.surface): word_json(w) for w in words})

    @route("POST", "/user_dict_word")
    async def add_word(request: Request) -> Response:
        """Add (or replace: one word per surface) and answer its uuid."""
        allow(write=True)
        word = word_from(request)
        await call(lambda: state.service.update_words([word], (), False))
        return json_response(word_uuid(word.surface))

    @route("PUT", "/user_dict_word/{word_uuid}")
    async def rewrite_word(request: Request) -> Response:
        allow(write=True)
        old = await word_of(request.path_params["word_uuid"])
        word = word_from(request)
        await call(lambda: state.service.update_words([word], [old.surface], False))
        return no_content()

    @route("DELETE", "/user_dict_word/{word_uuid}")
    async def delete_word(request: Request) -> Response:
        allow(write=True)
        old = await word_of(request.path_params["word_uuid"])
        await call(lambda: state.service.update_words([], [old.surface], False))
        return no_content()

    @route("POST", "/import_user_dict")
    async def import_words(request: Request) -> Response:
        """Words of another engine's dictionary; ``override``: they replace ours with
        the same surface (else ours stay)."""
        allow(write=True)
        override = flag_param(request, "override", None)
        body = await json_body(request)
        try:
            words = words_from_import(body)
        except UserDictionaryError as exc:  # as VOICEVOX's FastAPI checks the body's words
            raise invalid(("body",), str(exc)) from None
        await call(lambda: state.service.update_words(words, (), not override))
        return no_content()


__all__ = ["add_voicevox_dictionary_routes"]
