"""A user word's fields are declared once, by ``UserWord.create``: every ``add_word``
takes them from there, so a field added to the word reaches the engine, the
frontend, the dictionary, the CLI and the server without being typed again."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from yomiage import TTS
from yomiage.errors import UserDictionaryError
from yomiage.server.schemas import WordRequest
from yomiage.text import Frontend, UserDictionary
from yomiage.text.user_word import WORD_TYPES, UserWord, _taking_fields_of


def _parameters(method: Callable[..., object]) -> list[inspect.Parameter]:
    return list(inspect.signature(method).parameters.values())[1:]


@pytest.mark.parametrize("method", [TTS.add_word, Frontend.add_word, UserDictionary.add])
def test_every_add_word_shows_the_fields_user_word_create_declares(
    method: Callable[..., object],
) -> None:
    assert _parameters(method) == list(inspect.signature(UserWord.create).parameters.values())


def test_a_field_added_to_the_maker_reaches_the_method_with_its_default_and_check() -> None:
    """What adding a parameter to ``UserWord.create`` does to every ``add_word``:
    the new field and its default are taken and shown, and its check runs first."""
    made: list[tuple[str, int]] = []

    def create(surface: str, reading: str, *, volume: int = 7) -> UserWord:
        if volume < 0:
            raise UserDictionaryError("volume must not be negative")
        made.append((surface, volume))
        return UserWord.create(surface, reading)

    class Owner:
        @_taking_fields_of(create)
        def add(self, word: UserWord) -> UserWord:
            """Keep a word."""
            return word

    owner = Owner()
    assert owner.add("鬼滅", "きめつ").reading == "キメツ"
    owner.add("呪術", reading="ジュジュツ", volume=3)
    assert made == [("鬼滅", 7), ("呪術", 3)]
    with pytest.raises(UserDictionaryError, match="volume"):
        owner.add("推し", "オシ", volume=-1)
    assert [p.name for p in _parameters(Owner.add)] == ["surface", "reading", "volume"]
    assert inspect.signature(Owner.add).parameters["volume"].default == 7
    assert Owner.add.__doc__ == "Keep a word."
    assert Owner.add.__name__ == "add"


def test_the_server_request_and_the_cli_default_to_the_words_defaults(tmp_path: Path) -> None:
    request = WordRequest.model_validate({"surface": "担々麺", "reading": "タンタンメン"})
    assert UserWord.create(**request.model_dump()) == UserWord.create("担々麺", "タンタンメン")
    path = tmp_path / "words.json"
    cli = [sys.executable, "-m", "yomiage", "dict"]
    added = subprocess.run([*cli, "add", "担々麺", "タンタンメン", "--user-dict", str(path)],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert UserDictionary(path).words == (UserWord.create("担々麺", "タンタンメン"),)
    usage = subprocess.run([*cli, "add", "--help"], capture_output=True, text=True, check=True)
    assert all(name in usage.stdout for name in WORD_TYPES)
