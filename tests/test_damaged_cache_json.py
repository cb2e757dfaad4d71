"""A JSON file of the cache nested 100,000 deep stopped every start (issue 49, item 10):
``json.loads`` raised RecursionError, which no reader caught, so ``yomiage generate``
printed a traceback and ``yomiage serve`` could not start, start after start. Every
file the cache reads is now read through :mod:`yomiage.json_file`, and such a file is
ignored (made or measured again) like a truncated one."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from yomiage.errors import ModelLoadError
from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.derived import bundle_files
from yomiage.runtime.integrity import _memo_path, file_sha256, verify_files
from yomiage.runtime.layouts import declared_name
from yomiage.sources.manifest import read_manifest as read_snapshot_manifest

TINY = Path(__file__).parent / "data" / "voices" / "tiny"
DEEP = "[" * 100_000


def test_a_deeply_nested_file_is_a_json_file_error_naming_it(tmp_path: Path) -> None:
    from yomiage.json_file import JsonFileError, read_json_file, read_json_object

    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    with pytest.raises(JsonFileError, match=r"deep\.json nests"):
        read_json_file(path)
    path.write_text('{"a": ' * 50_000)
    with pytest.raises(JsonFileError, match=r"deep\.json"):
        read_json_object(path)


@pytest.mark.parametrize(
    ("content", "why"),
    [(b"\xff\xfe\x00binary", "cannot be read"), (b"{not json", "cannot be read"),
     (b"[1, 2]", "not an object"), (b"", "cannot be read")],
)  # fmt: skip
def test_damaged_files_are_json_file_errors(tmp_path: Path, content: bytes, why: str) -> None:
    from yomiage.json_file import JsonFileError, read_json_object

    path = tmp_path / "damaged.json"
    path.write_bytes(content)
    with pytest.raises(JsonFileError, match=why):
        read_json_object(path)


def test_a_missing_file_is_not_found_and_a_folder_or_fifo_is_not_read(tmp_path: Path) -> None:
    from yomiage.json_file import JsonFileError, read_json_file

    with pytest.raises(FileNotFoundError):
        read_json_file(tmp_path / "missing.json")
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(JsonFileError, match="not a regular file"):
        read_json_file(tmp_path / "folder.json")
    if hasattr(os, "mkfifo"):  # reading a FIFO would wait for a writer forever
        os.mkfifo(tmp_path / "fifo.json")
        with pytest.raises(JsonFileError, match="not a regular file"):
            read_json_file(tmp_path / "fifo.json")
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 100 + "0]")
    with pytest.raises(JsonFileError, match="over the 64 expected"):
        read_json_file(big, max_bytes=64)


def test_a_deeply_nested_verified_memo_only_means_hashing_again(tmp_path: Path) -> None:
    memo = tmp_path / "verified"
    manifest = read_manifest(TINY)
    memo_file = _memo_path(memo, TINY)
    memo_file.parent.mkdir(parents=True)
    memo_file.write_text(DEEP)
    verify_files(TINY, manifest.files, ["decoder.onnx"], memo)
    kept = json.loads(memo_file.read_text())  # rewritten whole
    assert kept["files"]["decoder.onnx"][2] == manifest.files["decoder.onnx"]
    memo_file.write_text(DEEP)
    assert file_sha256(TINY / "decoder.onnx", memo) == manifest.files["decoder.onnx"]


def test_a_deeply_nested_manifest_is_one_clear_error_or_nothing(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(TINY, bundle)
    (bundle / "voice.json").write_text(DEEP)
    with pytest.raises(ModelLoadError, match=r"voice\.json nests"):
        read_manifest(bundle)
    assert bundle_files(bundle) == {}  # what a removal finds: nothing, not a crash
    assert declared_name(bundle) is None
    snapshot = tmp_path / "manifests" / "s3.json"
    snapshot.parent.mkdir()
    snapshot.write_text(DEEP)
    assert read_snapshot_manifest(snapshot) is None  # taken as not cached: fetched again


def test_a_deeply_nested_bert_manifest_is_one_clear_error(tmp_path: Path) -> None:
    from yomiage.runtime.onnx_bert import _bundle_graph

    bert = tmp_path / "bert"
    shutil.copytree(TINY / "bert", bert)
    (bert / "bert.json").write_text(DEEP)
    with pytest.raises(ModelLoadError, match=r"bert\.json nests"):
        _bundle_graph(bert, "q8", None)


def test_a_deeply_nested_load_journal_is_read_as_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("fastapi")
    from yomiage.server.engine.load_journal import LoadJournal

    (tmp_path / "crashed.json").write_text(DEEP)
    with caplog.at_level(logging.WARNING):
        journal = LoadJournal(tmp_path)  # a worker starting: it used to die here
    assert not journal.crashed(TINY)
    assert "crashed.json nests" in caplog.text


def test_generate_speaks_with_a_deeply_nested_verified_memo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The prober's reproduction: ``"[" * 100000`` into ``verified/*.json`` made
    ``yomiage generate`` end in a traceback, on every run."""
    from yomiage.cli import main

    memo = Path(os.environ["YOMIAGE_CACHE"]) / "verified"
    memo.mkdir(parents=True)
    for folder in (TINY, TINY / "bert"):
        _memo_path(memo, folder).write_text(DEEP)
    out = tmp_path / "out.wav"
    assert main(["generate", "--model", str(TINY), "こんにちは。", "-o", str(out), "-q"]) == 0
    assert out.stat().st_size > 1000
