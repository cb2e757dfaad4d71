"""Small things a newcomer met on the command line (issue 49, 4 and 6)."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import pytest

from tests.conftest import TEST_VOICES
from yomiage.cli.main import main

TINY = str(TEST_VOICES / "tiny")
ROOT = Path(__file__).resolve().parents[1]


def _help(*command: str) -> str:
    from yomiage.cli.main import build_parser

    parser = build_parser()
    for name in command:
        sub = next(a for a in parser._actions if hasattr(a, "choices") and a.choices
                   and name in a.choices)  # fmt: skip
        parser = sub.choices[name]  # type: ignore[index]
    return parser.format_help()


def _speed_examples(text: str) -> list[tuple[float, str]]:
    """Each example that sets --speed, with the comment that says what it does (on its
    line or the next)."""
    lines = text.splitlines()
    found = []
    for n, line in enumerate(lines):
        match = re.search(r"--speed[ =]([0-9.]+)", line)
        if match is None or "yomiage" not in line:
            continue
        said = line.partition("#")[2] + " " + (lines[n + 1] if n + 1 < len(lines) else "")
        found.append((float(match.group(1)), said))
    return found


@pytest.mark.parametrize("where", ["generate", "docs/cli.md"])
def test_a_speed_example_says_which_way_it_goes(where: str) -> None:
    """``--style Happy --speed 1.1`` read as "faster" and slowed the voice (speed is
    a length scale)."""
    text = _help("generate") if where == "generate" else (ROOT / where).read_text("utf-8")
    examples = _speed_examples(text)
    assert examples, "no example sets --speed"
    for value, said in examples:
        assert "#" in said, f"--speed {value}: no comment says which way it goes"
        head = said.split("#", 1)[1].split("(")[0]  # what it does, before any aside
        assert ("faster" in head) == (value < 1), f"--speed {value}: {said!r}"
        assert ("slower" in head) == (value > 1), f"--speed {value}: {said!r}"


@pytest.mark.parametrize("command", ["generate", "batch"])
def test_the_speed_flag_says_below_one_is_faster(command: str) -> None:
    text = " ".join(_help(command).split())
    assert "length scale" in text and "below 1 is faster, above 1 slower" in text
    assert "OpenAI route's speed is the inverse" in text


def test_a_file_that_is_not_a_voice_is_called_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--model README.md`` said "no such folder" for a file that exists."""
    readme = tmp_path / "README.md"
    readme.write_text("# not a voice\n", "utf-8")
    assert main(["generate", "こんにちは。", "--model", str(readme), "-o", "x.wav"]) == 1
    err = capsys.readouterr().err
    assert "no such folder" not in err and "is a file, not a voice" in err
    assert ".aivmx" in err and "SBV2 folder" in err and err.count("\n") == 1
    assert main(["generate", "こんにちは。", "--model", str(tmp_path / "none")]) == 1
    assert "no such folder" in capsys.readouterr().err  # what is missing is still missing


@pytest.mark.parametrize("command", ["g2p", "generate"])
def test_emoji_only_text_names_the_skipped_characters_once(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    command: str,
) -> None:
    args = [command, "🍵😊"]
    if command == "generate":
        args += ["--model", TINY, "-o", str(tmp_path / "x.wav"), "-q"]
    with caplog.at_level(logging.WARNING):
        assert main(args) == 1
    err = capsys.readouterr().err + caplog.text
    assert err.count("U+1F375") == 1 and err.count("U+1F60A") == 1
    assert "nothing to read in" in err


def test_emoji_among_words_are_still_named(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert main(["g2p", "お茶🍵をどうぞ😊"]) == 0
    assert "skipped 🍵 (U+1F375), 😊 (U+1F60A)" in caplog.text
    assert "オチャ" in capsys.readouterr().out


def test_the_batch_bar_moves_and_estimates_during_the_first_item() -> None:
    """It showed "0.0 s of audio" and no time left until its first item was done."""
    from yomiage.batch import ItemProgress
    from yomiage.cli.batch_progress import BatchProgress

    out = io.StringIO()
    bar = BatchProgress(3, quiet=False, tty=True, out=out)
    bar.item_progress(ItemProgress("ch1", 100, 1000, 12.0))
    bar.item_progress(ItemProgress("ch1", 300, 1000, 36.0))
    line = out.getvalue().rsplit("\r", 1)[1]
    assert "0/3 items" in line and "36.0 s of audio" in line
    assert re.search(r"~\d+(\.\d)? (s|min|h) left", line), line
    assert "(ch1 30%)" in line
