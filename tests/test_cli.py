from __future__ import annotations

import json
import os
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


def test_misspelled_flag_shows_the_commands_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 22 (15): the top-level usage, no hint and exit 2 before; docs/cli.md says 1."""
    with pytest.raises(SystemExit) as caught:
        main(["generate", "こんにちは。", "--sped", "1.1"])
    assert caught.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("usage: yomiage generate ")
    assert "yomiage generate: unrecognized arguments: --sped 1.1; did you mean --speed?" in err
    with pytest.raises(SystemExit) as caught:
        main(["dict", "add", "担々麺", "タンタンメン", "--acent", "3"])
    assert caught.value.code == 1
    assert "did you mean --accent?" in capsys.readouterr().err


def test_misspelled_command_suggests_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["genrate", "こんにちは。"])
    assert caught.value.code == 1
    assert "did you mean generate?" in capsys.readouterr().err


def test_missing_text_file_is_named_in_words(
    tmp_path: Path, test_voice: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.txt"
    assert main(["generate", "--file", str(missing), "--model", str(test_voice)]) == 1
    err = capsys.readouterr().err
    assert err == f"yomiage generate: cannot read {missing}: no such file\n"


def test_known_voices_are_only_voices() -> None:
    """The list shown for an unknown name held the BERT, which is no voice."""
    from yomiage.errors import UnknownVoiceError
    from yomiage.sources.catalog import BERT, lookup

    with pytest.raises(UnknownVoiceError, match="known voices: jvnv-F1-jp") as caught:
        lookup("jvnv-F9-jp")
    assert BERT.name not in str(caught.value)


def test_a_model_path_is_named_after_its_model(tmp_path: Path, test_voice: Path) -> None:
    """Issue 22 (15): ``--model PATH`` took the folder's name, not the model's."""
    from yomiage.engine_spec import parse_voices

    bundle = tmp_path / "downloaded-folder"
    bundle.mkdir()
    (bundle / "voice.json").write_text((test_voice / "voice.json").read_text("utf-8"), "utf-8")
    sbv2 = tmp_path / "model_assets" / "abc"
    sbv2.mkdir(parents=True)
    (sbv2 / "config.json").write_text(json.dumps({"model_name": "まい (v2)"}), "utf-8")
    nameless = tmp_path / "nameless"
    nameless.mkdir()
    (nameless / "config.json").write_text("{}", "utf-8")
    voices = parse_voices([], [str(bundle), str(sbv2 / "G_100.safetensors"), str(nameless)])
    assert [name for name, _ in voices] == ["tiny", "まい-v2", "nameless"]
    assert parse_voices([], [f"mine={bundle}"]) == (("mine", str(bundle)),)


def test_install_hints_work_from_a_checkout() -> None:
    """Before a release, ``pip install 'yomiage[x]'`` cannot work: say the checkout's form."""
    from yomiage.errors import MissingExtraError

    message = str(MissingExtraError("yomiage serve", "server", "fastapi"))
    assert "pip install 'yomiage[server]'" in message and "pip install '.[server]'" in message


NO_TORCH = """import sys
sys.modules["torch"] = None  # import torch: ImportError, as in the user install
from yomiage.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_convert_without_torch_names_the_torch_to_install_first(tmp_path: Path) -> None:
    """Issue 31, 18: the hint was ``pip install 'yomiage[torch]'`` alone, which on Linux
    pulls PyPI's multi-GB CUDA torch; the README installs ``torch==2.13.0`` first."""
    voice = tmp_path / "voice"
    voice.mkdir()
    args = ["convert", str(voice), str(tmp_path / "out")]
    proc = subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 1
    [line] = proc.stderr.splitlines()
    assert line.startswith("yomiage convert: ") and "pip install torch==2.13.0 first" in line
    assert "https://download.pytorch.org/whl/cpu" in line and "pip install '.[torch]'" in line


def _voice_with_two_checkpoints(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An SBV2 folder holding an older checkpoint (seed 1) and a newer one (seed 0)."""
    from yomiage.devtools.voice_writer import make_voice

    for seed in (0, 1):
        make_voice(tmp_path / f"seed{seed}", "tiny", seed)
    folder = tmp_path / "seed0"
    [newer] = folder.glob("*.safetensors")
    [other] = (tmp_path / "seed1").glob("*.safetensors")
    older = folder / "G_older.safetensors"
    older.write_bytes(other.read_bytes())
    os.utime(older, (1_000_000_000, 1_000_000_000))
    return folder, newer, older


def test_a_checkpoint_of_an_sbv2_folder_can_be_chosen(tmp_path: Path) -> None:
    """Issue 22 (9): with several checkpoints the newest was used, silently, with no way
    to choose; now a ``.safetensors`` path chooses one and ``convert`` says which it read."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from yomiage.artifacts import Artifacts
    from yomiage.export.convert import convert_voice
    from yomiage.model.loader import load_voice

    folder, newer, older = _voice_with_two_checkpoints(tmp_path)
    key = "enc_p.bert_proj.weight"
    chosen = load_voice(older).model.state_dict()[key]
    assert torch.equal(chosen, load_voice(tmp_path / "seed1").model.state_dict()[key])
    assert not torch.equal(chosen, load_voice(folder).model.state_dict()[key])
    assert Artifacts("torch").voice_folder("v", str(older)) == older

    said: list[str] = []

    class Stop(Exception):
        pass

    def first_step(step: str) -> None:
        said.append(step)
        raise Stop

    for source in (folder, older):
        with pytest.raises(Stop):
            convert_voice(source, tmp_path / "out", progress=first_step)
    assert f"checkpoint {newer.name}; the newest of 2" in said[0]
    assert f"checkpoint {older.name}, as given" in said[1]
