"""``yomiage dict``: which file it changes, ``--user-dict`` in any place, the cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yomiage.cli import main
from yomiage.text import UserDictionary
from yomiage.text.user_dict import MAX_WORDS


def test_dict_add_and_remove_name_the_file_they_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "words.json"
    assert main(["dict", "--user-dict", str(path), "add", "担々麺", "タンタンメン"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"to {path}")
    assert main(["dict", "--user-dict", str(path), "remove", "担々麺"]) == 0
    assert capsys.readouterr().out.strip() == f"removed 担々麺 from {path}"


@pytest.mark.parametrize("action", ["add", "list", "remove"])
def test_every_dict_action_takes_user_dict_after_it(tmp_path: Path, action: str) -> None:
    path = tmp_path / "words.json"
    UserDictionary(path).add("鬼滅", "キメツ")
    rest = {"add": ["担々麺", "タンタンメン"], "list": [], "remove": ["鬼滅"]}[action]
    assert main(["dict", action, *rest, "--user-dict", str(path)]) == 0
    surfaces = {w.surface for w in UserDictionary(path).words}
    assert surfaces == {"add": {"鬼滅", "担々麺"}, "list": {"鬼滅"}, "remove": set()}[action]


def test_dict_list_names_the_file_and_says_when_it_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "words.json"
    assert main(["dict", "list", "--user-dict", str(path)]) == 0
    empty = capsys.readouterr()
    assert empty.out == "" and empty.err.strip() == f"no words in {path}"
    UserDictionary(path).add("鬼滅", "キメツ")
    assert main(["dict", "list", "--user-dict", str(path), "--json"]) == 0
    listed = capsys.readouterr()
    assert json.loads(listed.out)[0]["surface"] == "鬼滅"  # stdout is the words alone
    assert listed.err.strip() == f"1 word in {path}"


def test_dict_add_past_the_cap_is_one_message_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "words.json"
    kana = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモ"
    n = len(kana)
    words = [
        {"surface": "語" + kana[i // n // n % n] + kana[i // n % n] + kana[i % n],
         "reading": "テスト", "accent": 0, "priority": 5, "word_type": "proper_noun"}
        for i in range(MAX_WORDS)
    ]  # fmt: skip
    path.write_text(json.dumps({"version": 1, "words": words}), encoding="utf-8")
    saved = path.read_bytes()
    assert main(["dict", "add", "担々麺", "タンタンメン", "--user-dict", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"at most {MAX_WORDS}" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert path.read_bytes() == saved


@pytest.mark.parametrize("content", ["{}", "[]", '{"words": 3}', '{"version": 1}'])
def test_a_user_dictionary_without_a_words_list_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    """Issue 31, 18: a file holding ``{}`` gave "cannot read the user dictionary
    empty_dict.json: 'words'", a bare KeyError."""
    path = tmp_path / "words.json"
    path.write_text(content, "utf-8")
    why = """it has no 'words' list (a user dictionary is {"words": [...]})"""
    assert UserDictionary(path).problem == f"cannot read the user dictionary {path}: {why}"
    assert main(["dict", "add", "鬼滅", "キメツ", "--user-dict", str(path)]) == 1
    assert f"yomiage dict: cannot read the user dictionary {path}: {why}; fix or move" in (
        capsys.readouterr().err
    )
    assert path.read_text("utf-8") == content


@pytest.mark.parametrize("as_json", [False, True])
def test_dict_list_of_an_unreadable_file_fails_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    """It printed the problem and exited 0 (and with --json printed ``[]`` alone), so a
    script could not tell a broken file from an empty one."""
    path = tmp_path / "words.json"
    path.write_text("{not json", "utf-8")
    args = ["dict", "list", "--user-dict", str(path)] + ["--json"] * as_json
    assert main(args) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith(f"yomiage dict: cannot read the user dictionary {path}")
    assert path.read_text("utf-8") == "{not json"
