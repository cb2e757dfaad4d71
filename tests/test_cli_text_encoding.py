"""Text in another encoding than UTF-8 is refused naming it, or read with --encoding
(issue 49, 2): Shift_JIS on stdin became a second of noise with exit status 0 (it was
decoded with surrogateescape), ``g2p`` read it as ワイエルビーオービー, and ``--file``
showed Python's raw ``'utf-8' codec can't decode byte 0x8c``."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_VOICES
from yomiage.cli.main import main

TINY = str(TEST_VOICES / "tiny")
SENTENCES = ["吾輩は猫である。", "名前はまだ無い。"]
TEXT = "".join(SENTENCES)
# (codec, how the message names it, the codec it tells the user to give)
ENCODINGS = [
    ("cp932", "Shift_JIS (cp932)", "cp932"),
    ("euc_jp", "EUC-JP", "euc_jp"),
    ("utf-16", "UTF-16", "utf-16"),
]
IDS = [codec for codec, _, _ in ENCODINGS]


class _Stdin:
    """sys.stdin with these bytes behind it (what a shell redirection gives)."""

    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False

    def __iter__(self) -> Any:  # the old line reader: as text, with surrogateescape
        return iter(self.buffer.getvalue().decode("utf-8", "surrogateescape").splitlines(True))

    def read(self) -> str:
        return self.buffer.getvalue().decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(("codec", "label", "flag"), ENCODINGS, ids=IDS)
@pytest.mark.parametrize("source", ["stdin", "file"])
def test_generate_refuses_text_in_another_encoding_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    codec: str,
    label: str,
    flag: str,
    source: str,
) -> None:
    data = TEXT.encode(codec)
    out = tmp_path / "x.wav"
    if source == "stdin":
        monkeypatch.setattr(sys, "stdin", _Stdin(data))
        given, where = ["-"], "stdin"
    else:
        path = tmp_path / "in.txt"
        path.write_bytes(data)
        given, where = ["--file", str(path)], str(path)
    assert main(["generate", *given, "--model", TINY, "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"yomiage generate: {where}: not UTF-8 text (")
    assert f"it looks like {label}" in err and f"add --encoding {flag}" in err
    assert err.count("\n") == 1 and "codec can't decode" not in err
    assert not out.exists()


@pytest.mark.parametrize(("codec", "label", "flag"), ENCODINGS, ids=IDS)
def test_generate_with_encoding_speaks_the_text(
    tmp_path: Path, codec: str, label: str, flag: str
) -> None:
    """The sentences read (the timings file names them) are the text as written."""
    path = tmp_path / "in.txt"
    path.write_bytes(TEXT.encode(codec))
    timings = tmp_path / "t.json"
    args = ["generate", "--file", str(path), "--encoding", flag, "--model", TINY, "-q",
            "-o", str(tmp_path / "x.wav"), "--timings", str(timings), "--threads", "1"]  # fmt: skip
    assert main(args) == 0
    record = json.loads(timings.read_text("utf-8"))
    assert [s["text"] for s in record["sentences"]] == SENTENCES


def _g2p_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[Any], str]:
    code = main(["g2p", "--json", *args])
    captured = capsys.readouterr()
    return code, [json.loads(line) for line in captured.out.splitlines()], captured.err


@pytest.mark.parametrize(("codec", "label", "flag"), ENCODINGS, ids=IDS)
def test_g2p_on_stdin_refuses_or_reads_another_encoding(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    codec: str,
    label: str,
    flag: str,
) -> None:
    lines = "\n".join(SENTENCES) + "\n"
    monkeypatch.setattr(sys, "stdin", _Stdin(lines.encode(codec)))
    code, records, err = _g2p_json(capsys, "-")
    assert code == 1 and records == []  # nothing read from mis-decoded bytes
    assert err.startswith("yomiage g2p: stdin:1: not UTF-8 text (")
    assert f"it looks like {label}" in err and f"add --encoding {flag}" in err

    expected = [_g2p_json(capsys, s)[1][0] for s in SENTENCES]
    monkeypatch.setattr(sys, "stdin", _Stdin(lines.encode(codec)))
    code, records, err = _g2p_json(capsys, "-", "--encoding", flag)
    assert code == 0 and err == ""
    assert records == expected  # the same phonemes as the text given as an argument


def test_a_utf8_byte_order_mark_is_read_past(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marked = ("\n".join(SENTENCES) + "\n").encode("utf-8-sig")
    expected = [_g2p_json(capsys, s)[1][0] for s in SENTENCES]
    monkeypatch.setattr(sys, "stdin", _Stdin(marked))
    code, records, _ = _g2p_json(capsys, "-")
    assert code == 0 and records == expected
    chapter = tmp_path / "ch01.txt"
    chapter.write_bytes(TEXT.encode("utf-8-sig"))
    from yomiage.batch import read_items

    assert read_items([chapter])[0].text == TEXT


@pytest.mark.parametrize(("codec", "label", "flag"), ENCODINGS, ids=IDS)
def test_batch_refuses_a_chapter_in_another_encoding_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: str, label: str, flag: str
) -> None:
    chapter = tmp_path / "ch01.txt"
    chapter.write_bytes(TEXT.encode(codec))
    out = tmp_path / "out"
    assert main(["batch", str(chapter), "--model", TINY, "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"yomiage batch: {chapter}: not UTF-8 text (")
    assert f"it looks like {label}" in err and f"add --encoding {flag}" in err
    assert not out.exists()  # refused before any work


@pytest.mark.parametrize(("codec", "label", "flag"), ENCODINGS, ids=IDS)
def test_batch_reads_chapters_in_the_encoding_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str, label: str, flag: str
) -> None:
    chapter = tmp_path / "ch01.txt"
    chapter.write_bytes(TEXT.encode(codec))
    from yomiage import batch

    read: list[Any] = []
    real = batch.read_items

    class Stop(Exception):
        pass

    def reading(paths: Any, encoding: str | None = None) -> Any:
        read.extend(real(paths, encoding))
        raise Stop  # what the command reads is the point, not the audio

    monkeypatch.setattr(batch, "read_items", reading)
    with pytest.raises(Stop):
        main(["batch", str(chapter), "--encoding", flag, "--model", TINY, "-o", str(tmp_path)])
    assert [(i.id, i.text) for i in read] == [("ch01", TEXT)]


def test_a_jsonl_line_in_another_encoding_is_named_by_its_line(tmp_path: Path) -> None:
    from yomiage.batch import BatchInputError, read_items

    corpus = tmp_path / "c.jsonl"
    good = json.dumps({"id": "a", "text": "はい。"}) + "\n"
    bad = json.dumps({"id": "b", "text": TEXT}, ensure_ascii=False) + "\n"
    corpus.write_bytes(good.encode() + bad.encode("cp932"))
    with pytest.raises(BatchInputError, match=rf"{corpus}:2: not UTF-8 text .*cp932"):
        read_items([corpus])
    assert [i.text for i in read_items([corpus], "cp932")] == ["はい。", TEXT]


def test_an_unknown_encoding_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["g2p", "-", "--encoding", "klingon"])
    assert caught.value.code == 1
    err = capsys.readouterr().err
    assert "unknown text encoding 'klingon'" in err and "cp932" in err


@pytest.mark.parametrize(
    ("data", "codec"),
    [
        (TEXT.encode("cp932"), "cp932"),
        (TEXT.encode("euc_jp"), "euc_jp"),
        (TEXT.encode("utf-16"), "utf-16"),
        (TEXT.encode("utf-16-le"), "utf-16-le"),
        (TEXT.encode("utf-16-be"), "utf-16-be"),
        ("abc def".encode("utf-16-le"), "utf-16-le"),
        (TEXT.encode("utf-32"), "utf-32"),
    ],
    ids=["cp932", "euc_jp", "utf-16", "utf-16-le", "utf-16-be", "ascii-utf-16-le", "utf-32"],
)
def test_the_guess_names_the_encoding(data: bytes, codec: str) -> None:
    from yomiage import text_input

    guess = text_input.guess(data)
    assert guess is not None and guess.codec == codec
    with pytest.raises(text_input.TextInputError, match=f"add --encoding {codec}"):
        text_input.decode(data, where="x")
    assert text_input.decode(data, codec, where="x").strip() in (TEXT, "abc def")


def test_noise_is_not_given_an_encoding() -> None:
    import random

    from yomiage import text_input

    rng = random.Random(0)
    noise = bytes(rng.randrange(128, 256) for _ in range(400))
    assert text_input.guess(noise) is None
    with pytest.raises(text_input.TextInputError, match="name its encoding with --encoding"):
        text_input.decode(noise, where="x")


@pytest.mark.parametrize("marked", [False, True])
def test_a_text_cut_short_in_a_character_is_called_so(marked: bool) -> None:
    from yomiage import text_input

    data = ("\ufeff" if marked else "").encode() + TEXT.encode()[:-1]
    with pytest.raises(text_input.TextInputError, match="ends in the middle of a UTF-8 char"):
        text_input.decode(data, where="ch01.txt")
