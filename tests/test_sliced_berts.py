"""The BERT's graph with sliced position tables, kept in the cache
(:mod:`yomiage.runtime.sliced_berts`): made once in a child, checked before each use,
made again when damaged, never half made; the BERT runs it with its own weights and
gives the same features, and runs its own graph where it cannot be made."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from yomiage.runtime import sliced_berts
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.onnx_bert import OnnxBert
from yomiage.runtime.sliced_berts import RECORD, SlicedBertError, SlicedBerts

TEXTS = ["こんにちは、今日はいい天気ですね。", "短い文。" * 12, "あ"]


@pytest.fixture
def bert_dir(test_voice: Path, tmp_path: Path) -> Path:
    """A copy of the test voice's BERT (its graph not yet sliced)."""
    return Path(shutil.copytree(test_voice / "bert", tmp_path / "bert"))


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The child processes started to make a sliced graph (they still run)."""
    started: list[list[str]] = []
    make = sliced_berts.make_in_child

    def counting(program: str, args: list[str], *rest: object) -> None:
        started.append(args)
        make(program, args, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(sliced_berts, "make_in_child", counting)
    return started


def _features(bert: OnnxBert) -> list[np.ndarray]:
    return bert.features(TEXTS)


def test_the_bert_runs_its_sliced_graph_made_once_and_gives_the_same_features(
    bert_dir: Path, tmp_path: Path, children: list[list[str]]
) -> None:
    sessions = Sessions(1)
    cache = SlicedBerts(tmp_path / "berts")
    sliced = OnnxBert(bert_dir, sessions, sliced=cache)
    whole = OnnxBert(bert_dir, sessions)
    assert len(children) == 1
    (folder,) = (tmp_path / "berts").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["bert.onnx", "sha256.json", RECORD]
    # the graph alone: its weights are the BERT's own, read from the BERT's folder
    assert (folder / "bert.onnx").stat().st_size < 2 * (bert_dir / "bert_q8.onnx").stat().st_size
    for got, expected in zip(_features(sliced), _features(whole), strict=True):
        assert np.array_equal(got, expected)
    OnnxBert(bert_dir, sessions, sliced=cache)  # kept: no second child
    assert len(children) == 1


def test_a_damaged_sliced_graph_is_made_again(
    bert_dir: Path, tmp_path: Path, children: list[list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    cache = SlicedBerts(tmp_path / "berts")
    graph = cache.graph(bert_dir / "bert_q8.onnx")
    assert graph is not None
    made = graph.read_bytes()
    graph.write_bytes(made[:100] + bytes([made[100] ^ 1]) + made[101:])
    with caplog.at_level(logging.WARNING):
        assert cache.graph(bert_dir / "bert_q8.onnx") == graph
    assert len(children) == 2 and graph.read_bytes() == made
    assert "made again" in caplog.text


@pytest.mark.parametrize("lost", ["bert.onnx", RECORD])
def test_a_kept_folder_missing_a_file_is_made_again(
    bert_dir: Path, tmp_path: Path, children: list[list[str]], lost: str
) -> None:
    cache = SlicedBerts(tmp_path / "berts")
    graph = cache.graph(bert_dir / "bert_q8.onnx")
    assert graph is not None
    (graph.parent / lost).unlink()
    assert cache.graph(bert_dir / "bert_q8.onnx") == graph
    assert len(children) == 2 and graph.is_file()


def test_graphs_that_need_no_child_run_as_they_are(
    bert_dir: Path, tmp_path: Path, children: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sliced already, without a Tile, or holding its weights inside: told from the
    graph's bytes, with no child and nothing written."""
    from yomiage.export.bert_positions import slice_position_tables

    cache = SlicedBerts(tmp_path / "berts")
    graph = bert_dir / "bert_q8.onnx"
    assert slice_position_tables(graph) > 0
    assert cache.graph(graph) is None
    plain = onnx.helper.make_model(onnx.helper.make_graph([], "empty", [], []))
    onnx.save(plain, str(tmp_path / "plain.onnx"))
    assert cache.graph(tmp_path / "plain.onnx") is None
    monkeypatch.setattr(sliced_berts, "MAX_GRAPH_BYTES", 1000)
    assert cache.graph(bert_dir / "bert_q8.onnx") is None
    assert children == [] and not (tmp_path / "berts").exists()


def test_a_graph_with_tiles_but_not_the_pattern_is_recorded_so(
    tmp_path: Path, children: list[list[str]]
) -> None:
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.ones((2, 3, 4), np.float32), "table")
    repeats = numpy_helper.from_array(np.array([2, 1, 1], np.int64), "repeats")
    tile = helper.make_node("Tile", ["table", "repeats"], ["out"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 3, 4])
    model = helper.make_model(helper.make_graph([tile], "g", [], [out], [table, repeats]))
    onnx.save(model, str(tmp_path / "bert.onnx"))
    cache = SlicedBerts(tmp_path / "berts")
    assert cache.graph(tmp_path / "bert.onnx") is None
    assert cache.graph(tmp_path / "bert.onnx") is None
    assert len(children) == 1  # the record kept says so
    (folder,) = (tmp_path / "berts").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["sha256.json", RECORD]


@pytest.mark.parametrize("failure", [OSError("disk full"), MemoryError("cut off midway")])
def test_a_child_that_fails_midway_leaves_nothing_and_the_bert_runs_whole(
    bert_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
) -> None:
    """The child's work, run here with its writing failing after the graph is written:
    no folder is left half made; the parent says why and runs the BERT's own graph."""
    from yomiage.plan_child import made, sliced_bert

    written = made.record_made

    def failing(folder: Path, names: object) -> None:
        written(folder, names)  # type: ignore[arg-type]
        raise failure

    monkeypatch.setattr(made, "record_made", failing)
    root = tmp_path / "berts"
    with pytest.raises(SlicedBertError, match=r"cannot slice bert_q8\.onnx"):
        sliced_bert.make_sliced_bert(bert_dir / "bert_q8.onnx", root / "x")
    assert list(root.iterdir()) == []

    def child(program: str, args: list[str], what: str, error: type[Exception]) -> None:
        raise error("the child stopped: no space left")

    monkeypatch.setattr(sliced_berts, "make_in_child", child)
    with caplog.at_level(logging.WARNING):
        bert = OnnxBert(bert_dir, Sessions(1), sliced=SlicedBerts(root))
    assert "runs with its whole position tables" in caplog.text
    expected = OnnxBert(bert_dir, Sessions(1))
    for got, want in zip(_features(bert), _features(expected), strict=True):
        assert np.array_equal(got, want)
    assert list(root.iterdir()) == []
