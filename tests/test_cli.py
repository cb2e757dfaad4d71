from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from yomiage.cli import main

TEXT = "円周率は3.14、成功率は50%です。GitHubでJSONを公開。"


def test_g2p_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["g2p", "--json", TEXT, "こんにちは。"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    record = json.loads(lines[0])
    assert set(record) == {"text", "bert_text", "phones", "tones", "word2ph"}
    assert "パーセント" in record["text"] and "ジェイソン" in record["text"]
    assert sum(record["word2ph"]) == len(record["phones"]) == len(record["tones"])
    assert json.loads(lines[1])["phones"] == [
        "_",
        "k",
        "o",
        "N",
        "n",
        "i",
        "ch",
        "i",
        "w",
        "a",
        ".",
        "_",
    ]


def test_g2p_reads_stdin_line_by_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "yomiage", "g2p", "--json", "-"],
        input="一行目です。\n\n二行目です。\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert [json.loads(line)["text"] for line in out.stdout.splitlines()] == [
        "一行目です.",
        "二行目です.",
    ]


def test_unreadable_text_exits_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["g2p", "--json", "★★"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("yomiage g2p: nothing to read") and "Traceback" not in err


def test_dict_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "d.json")
    assert (
        main(["dict", "--user-dict", path, "add", "担々麺", "タンタンメン", "--accent", "3"]) == 0
    )
    assert main(["dict", "--user-dict", path, "list"]) == 0
    assert "担々麺\tタンタンメン\taccent=3" in capsys.readouterr().out
    assert main(["g2p", "--user-dict", path, "--json", "担々麺"]) == 0
    assert "t a N t a N m e N" in " ".join(json.loads(capsys.readouterr().out)["phones"])
    assert main(["dict", "--user-dict", path, "remove", "担々麺"]) == 0
    assert main(["dict", "--user-dict", path, "remove", "担々麺"]) == 1
    assert main(["dict", "--user-dict", path, "add", "a,b", "エービー"]) == 1
    assert "cannot hold" in capsys.readouterr().err
