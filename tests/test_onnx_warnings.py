"""ONNX Runtime's load-time warnings stay out of the user's terminal, for yomiage's
sessions and for those others' code makes for it (the int8 quantizer's calibration)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from yomiage.runtime.engines.onnx_session import load_warnings_off, quiet_options

WARNING = "[W:onnxruntime"


def _graph_with_a_defaulted_input(path: Path) -> Path:
    """y = x + trim, where ``trim`` is an input with a default: what a bundle's decoder
    has, and what ONNX Runtime warns about at every load."""
    add = helper.make_node("Add", ["x", "trim"], ["y"])
    graph = helper.make_graph(
        [add],
        "defaulted",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "trim")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        initializer=[numpy_helper.from_array(np.zeros(1, np.float32), "trim")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _load(path: Path, options: ort.SessionOptions | None = None) -> None:
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def test_others_sessions_load_quietly_inside_and_warn_again_after(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    graph = _graph_with_a_defaulted_input(tmp_path / "g.onnx")
    _load(graph)
    assert WARNING in capfd.readouterr().err  # the warning this is about
    with load_warnings_off():
        _load(graph)
    assert WARNING not in capfd.readouterr().err
    _load(graph)
    assert WARNING in capfd.readouterr().err  # ONNX Runtime's default is back


def test_a_failure_inside_still_sets_the_level_back(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    graph = _graph_with_a_defaulted_input(tmp_path / "g.onnx")
    with pytest.raises(RuntimeError), load_warnings_off():
        raise RuntimeError("calibration failed")
    capfd.readouterr()
    _load(graph)
    assert WARNING in capfd.readouterr().err


def test_yomiages_own_sessions_load_quietly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    _load(_graph_with_a_defaulted_input(tmp_path / "g.onnx"), quiet_options())
    assert WARNING not in capfd.readouterr().err
