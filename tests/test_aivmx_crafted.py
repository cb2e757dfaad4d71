"""Crafted AIVMX files (issue 22 item 8): every damaged or hostile variant of the committed
tiny.aivmx is a ``yomiage.errors`` error naming the file and what is wrong with it,
through ``TTS().load``, ``yomiage voices FILE`` and ``yomiage convert``; and what a
file says is never printed raw to a terminal."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from tests.test_aivmx import AIVMX, _edited, _manifest_edit
from yomiage import TTS
from yomiage.aivmx import read_aivmx
from yomiage.cli.main import main
from yomiage.cli.terminal import printable, printable_json
from yomiage.errors import ModelLoadError

Craft = Callable[[Path], Path]


def _bytes(change: Callable[[bytes], bytes]) -> Craft:
    def craft(tmp_path: Path) -> Path:
        path = tmp_path / "crafted.aivmx"
        path.write_bytes(change(AIVMX.read_bytes()))
        return path

    return craft


def _model(edit: Callable[[Any, dict[str, str]], Any]) -> Craft:
    return lambda tmp_path: _edited(tmp_path, edit, "crafted.aivmx")


def _manifest(change: Callable[[dict[str, Any]], Any]) -> Craft:
    return _model(_manifest_edit(change))


def _meta(key: str, value: str) -> Craft:
    return _model(lambda model, meta: meta.update({key: value}))


def _npy(array: Any) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return base64.b64encode(buffer.getvalue()).decode()


def _huge_npy() -> str:
    """A .npy whose header declares 10^12 rows but holds one."""
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((1, 256), np.float32))
    data = buffer.getvalue().replace(b"(1, 256)", b"(1000000000000, 256)")
    return base64.b64encode(data).decode()


def _drop_nodes(keep: Callable[[Any], bool]) -> Craft:
    def edit(model: Any, meta: dict[str, str]) -> None:
        kept = [n for n in model.graph.node if keep(n)]
        del model.graph.node[:]
        model.graph.node.extend(kept)

    return _model(edit)


def _no_speaker_embedding(model: Any, meta: dict[str, str]) -> None:
    for tensor in model.graph.initializer:
        if tensor.name == "emb_g.weight":
            tensor.name = "renamed.weight"


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


CRAFTED: dict[str, tuple[Craft, str]] = {
    # the file
    "truncated": (_bytes(lambda d: d[: len(d) // 3]), "not an ONNX model"),
    "wrong magic (a zip)": (_bytes(lambda d: b"PK\x03\x04" + d[4:200]), "not an ONNX model"),
    "empty": (_bytes(lambda d: b""), "no aivm_manifest"),
    "huge declared length": (
        _bytes(lambda d: b"\x12\xff\xff\xff\xff\x0f" + d[:64]),
        "not an ONNX model",
    ),
    # the manifest
    "manifest not JSON": (_meta("aivm_manifest", "{nope"), "aivm_manifest is not valid JSON"),
    "manifest nested 100000 deep": (
        _meta("aivm_manifest", _deep(100_000)),
        "aivm_manifest is not valid JSON",
    ),
    "manifest a list": (_meta("aivm_manifest", "[1, 2]"), "aivm_manifest must be a JSON object"),
    "name a number": (_manifest(lambda m: m.update(name=5)), "has no name"),
    "version an object": (_manifest(lambda m: m.update(version={"a": 1})), "version is dict"),
    "licence a number": (_manifest(lambda m: m.update(license=5)), "license is int"),
    "speakers an object": (_manifest(lambda m: m.update(speakers={"a": 1})), "lists no speakers"),
    "speaker name a number": (
        _manifest(lambda m: m["speakers"][0].update(name=3)),
        "a speaker has no name",
    ),
    "languages a string": (
        _manifest(lambda m: m["speakers"][0].update(supported_languages="ja")),
        "supported_languages must be a list",
    ),
    "languages a number": (
        _manifest(lambda m: m["speakers"][0].update(supported_languages=5)),
        "supported_languages must be a list",
    ),
    "styles a number": (
        _manifest(lambda m: m["speakers"][0].update(styles=5)),
        "needs a list of at least one style",
    ),
    "style name a list": (
        _manifest(lambda m: m["speakers"][0]["styles"][0].update(name=[1])),
        "style 0 has no name",
    ),
    "style id true": (
        _manifest(lambda m: m["speakers"][0]["styles"][0].update(local_id=True)),
        "local_id True",
    ),
    "speaker id beyond the graph": (
        _manifest(lambda m: m["speakers"][0].update(local_id=10**12)),
        "the graph embeds 2 speaker",
    ),
    "two speakers of one name": (
        _manifest(lambda m: m["speakers"][1].update(name="spk_a")),
        "two speakers are named 'spk_a'",
    ),
    "speaker uuid an object": (
        _manifest(lambda m: m["speakers"][0].update(uuid={})),
        "uuid must be text",
    ),
    # the hyper-parameters and the style vectors
    "hyper-parameters not JSON": (
        _meta("aivm_hyper_parameters", "]"),
        "aivm_hyper_parameters is not valid JSON",
    ),
    "hyper-parameters a list": (_meta("aivm_hyper_parameters", "[1]"), "must be a JSON object"),
    "style vectors of one dimension": (
        _meta("aivm_style_vectors", _npy(np.zeros(256))),
        r"shape \[256\]",
    ),
    "style vectors of text": (
        _meta("aivm_style_vectors", _npy(np.array([["a"] * 256]))),
        "expected real numbers",
    ),
    "style vectors beyond float32": (
        _meta("aivm_style_vectors", _npy(np.full((3, 256), 1e300))),
        "NaN or infinity",
    ),
    "style vectors declaring 10^12 rows": (
        _meta("aivm_style_vectors", _huge_npy()),
        "not a base64 .npy array",
    ),
    # the graph
    "no speaker embedding": (_model(_no_speaker_embedding), "no speaker embedding"),
    "no decoder": (
        _drop_nodes(lambda n: not n.name.startswith("/dec/")),
        "not an SBV2 JP-Extra export",
    ),
    "an unknown opset": (
        _model(lambda model, meta: [setattr(o, "version", 999) for o in model.opset_import]),
        "not a usable SBV2 JP-Extra export",
    ),
}


CUT_ONLY = {"no decoder", "an unknown opset"}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_aivmx_files_are_load_errors_naming_what_is_wrong(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    craft, message = CRAFTED[name]
    path = craft(tmp_path)
    described = main(["voices", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if name in CUT_ONLY:  # `voices` reads the metadata; the graph is cut only to load it
        assert described == 0
    else:
        assert described == 1
        assert str(path) in err
        assert len(err.strip().splitlines()) == 1
    tts = TTS(threads=1, cache_dir=tmp_path / "cache",
              bert_source=AIVMX.parent.parent / "voices" / "tiny" / "bert")  # fmt: skip
    with pytest.raises(ModelLoadError, match=message) as caught:
        tts.load("crafted", source=path).prepare()
    assert str(path) in str(caught.value)
    tts.close()


def test_convert_cli_refuses_a_crafted_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _manifest(lambda m: m["speakers"][0].update(styles=5))(tmp_path)
    assert main(["convert", str(path), str(tmp_path / "out"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "needs a list of at least one style" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()


# -- what the file says, on a terminal ------------------------------------------------------

HOSTILE = {
    "name": "evil\x1b]0;owned\x07\x1b[2J",
    "speaker": "spk\u202eA",
    "style": "Happy\x9b31m",
    "licence": "line one\x1b[8m hidden\tcolumn\nline two\u2066\u2028",
}


def _hostile(model: Any, meta: dict[str, str]) -> None:
    manifest = json.loads(meta["aivm_manifest"])
    manifest.update(name=HOSTILE["name"], license=HOSTILE["licence"])
    manifest["speakers"][0]["name"] = HOSTILE["speaker"]
    manifest["speakers"][0]["styles"][1]["name"] = HOSTILE["style"]
    meta["aivm_manifest"] = json.dumps(manifest, ensure_ascii=False)


RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2028")


def test_voices_prints_control_characters_from_the_file_as_visible_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _edited(tmp_path, _hostile)
    assert main(["voices", str(path)]) == 0
    out = capsys.readouterr().out
    assert not [c for c in RAW if c in out]
    for shown in ("evil\\x1b]0;owned\\x07\\x1b[2J", "spk\\u202eA", "Happy\\x9b31m",
                  "line one\\x1b[8m hidden\tcolumn", "line two\\u2066"):  # fmt: skip
        assert shown in out
    assert main(["voices", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert not [c for c in RAW if c in out]
    [record] = json.loads(out)  # the same values, escaped as JSON
    assert record["name"] == HOSTILE["name"]
    assert record["license"] == HOSTILE["licence"]
    assert HOSTILE["speaker"] in [s["name"] for s in record["speakers"]]


def test_printable_escapes_controls_bidi_and_lone_surrogates_only() -> None:
    assert printable("こんにちは、Happy 😀") == "こんにちは、Happy 😀"
    assert printable("a\x1bb\x7f\x85\u200f\ud800") == "a\\x1bb\\x7f\\x85\\u200f\\ud800"
    assert printable("a\tb", keep="\t") == "a\tb"
    assert printable("a\tb") == "a\\x09b"
    assert json.loads(printable_json(["\x9b\u202e\ud800x"])) == ["\x9b\u202e\ud800x"]


def test_an_intact_file_still_reads(tmp_path: Path) -> None:
    """The checks refuse only what is wrong: the committed file passes them all."""
    voice = read_aivmx(AIVMX)
    assert voice.n_speakers == 2
    assert onnx.load(str(AIVMX), load_external_data=False).graph.node


@pytest.mark.server
def test_serve_refuses_a_crafted_file_without_a_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _meta("aivm_manifest", "{nope")(tmp_path)
    bert = AIVMX.parent.parent / "voices" / "tiny" / "bert"
    command = [sys.executable, "-m", "yomiage", "serve", "--model", str(path), "--bert", str(bert),
               "--host", "127.0.0.1", "--port", "0", "--cache-dir", str(tmp_path / "cache")]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert f"{path}: aivm_manifest is not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
