"""VOICEVOX's user-dictionary words over yomiage's own user dictionary.

VOICEVOX names each word by a UUID and stores its MeCab fields; yomiage keeps
one word per surface. The UUID here is derived from the surface (uuid5), so it
is the same in every process and after a restart without storing anything new,
and a word added through either API is visible and editable through the other.
The cost: rewriting a word under a new surface gives it a new UUID (clients
re-read the dictionary after a change, as VOICEVOX's editor does).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from yomiage.errors import UserDictionaryError
from yomiage.text.mora import mora_count
from yomiage.text.user_word import DEFAULT_PRIORITY, DEFAULT_WORD_TYPE, WORD_TYPES, UserWord

_NAMESPACE = uuid.UUID("8a0c3d3e-4f57-5b8e-9d0a-2f5e6c7b8a91")
# VOICEVOX's word types and the left/right context id of each in naist-jdic
# (left-id.def of the bundled dictionary).
WORD_TYPE_NAMES = {
    "PROPER_NOUN": "proper_noun",
    "COMMON_NOUN": "common_noun",
    "VERB": "verb",
    "ADJECTIVE": "adjective",
    "SUFFIX": "suffix",
}
_CONTEXT_IDS = {"proper_noun": 1348, "common_noun": 1345, "verb": 642, "adjective": 20,
                "suffix": 1358}  # fmt: skip
_TYPE_OF_POS = {fields: name for name, fields in WORD_TYPES.items()}


def word_uuid(surface: str) -> str:
    """The UUID of the word written ``surface`` (already normalised by UserWord)."""
    return str(uuid.uuid5(_NAMESPACE, surface))


def word_json(word: UserWord) -> dict[str, Any]:
    """A word as VOICEVOX's ``UserDictWord``."""
    pos = WORD_TYPES[word.word_type]
    return {
        "surface": word.surface,
        "priority": word.priority,
        "context_id": _CONTEXT_IDS[word.word_type],
        "part_of_speech": pos[0],
        "part_of_speech_detail_1": pos[1],
        "part_of_speech_detail_2": pos[2],
        "part_of_speech_detail_3": pos[3],
        "inflectional_type": "*",
        "inflectional_form": "*",
        "stem": "*",
        "yomi": word.reading,
        "pronunciation": word.reading,
        "accent_type": word.accent,
        "mora_count": mora_count(word.reading),
        "accent_associative_rule": "*",
    }


def word_type_of(name: str | None) -> str:
    """yomiage's word type for VOICEVOX's ``word_type`` (PROPER_NOUN when left out)."""
    if name is None:
        return "proper_noun"
    try:
        return WORD_TYPE_NAMES[name]
    except KeyError:
        raise UserDictionaryError(
            f"word_type {name[:40]!r} is not one of {', '.join(WORD_TYPE_NAMES)}"
        ) from None


def word_from_json(value: Any, where: str) -> UserWord:
    """A ``UserDictWord`` a client sent (``/import_user_dict``) as a checked word; its
    part of speech picks the word type (a proper noun when it matches none)."""
    if not isinstance(value, Mapping):
        raise UserDictionaryError(f"{where}: a word must be a JSON object")
    pos = tuple(
        value.get(key, "*")
        for key in ("part_of_speech", "part_of_speech_detail_1", "part_of_speech_detail_2",
                    "part_of_speech_detail_3")
    )  # fmt: skip
    priority = value.get("priority", DEFAULT_PRIORITY)
    try:
        return UserWord.create(
            value.get("surface", ""),
            value.get("pronunciation", value.get("yomi")),
            value.get("accent_type"),
            priority,
            _TYPE_OF_POS.get(pos, DEFAULT_WORD_TYPE),
        )
    except UserDictionaryError as exc:
        raise UserDictionaryError(f"{where}: {exc}") from None


def words_from_import(body: Any) -> list[UserWord]:
    """The words of an ``/import_user_dict`` body (``{uuid: UserDictWord}``), all checked
    before any is used."""
    if not isinstance(body, Mapping):
        raise UserDictionaryError("the body must be a JSON object of {uuid: word}")
    return [word_from_json(value, f"word {key[:40]!r}") for key, value in body.items()]
