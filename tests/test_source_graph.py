"""Reading a bundle's graph with its weights for the made graphs (plan_child/source_graph.py):
also where the weights' file has other hard links, never from outside the graph's folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from yomiage.plan_child.layout import make_layout
from yomiage.plan_child.light_flow import make_light_flow
from yomiage.plan_child.made import save_graph
from yomiage.plan_child.source_graph import SourceGraphError, load_graph

TINY = Path(__file__).parent / "data" / "voices" / "tiny"


def _graph(folder: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """A graph with one initializer and one Constant kept outside it, in ``folder``."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((64, 64)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    constant = helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(bias, "b"))
    nodes = [constant, helper.make_node("MatMul", ["x", "w"], ["y0"]),
             helper.make_node("Add", ["y0", "b"], ["y"])]  # fmt: skip
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(weight, "w")],
    )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "g.onnx"
    save_graph(helper.make_model(graph), path)
    return path, weight, bias


def _weights(model: onnx.ModelProto) -> tuple[np.ndarray, np.ndarray]:
    weight = numpy_helper.to_array(model.graph.initializer[0])
    bias = numpy_helper.to_array(model.graph.node[0].attribute[0].t)
    return weight, bias


def test_the_graph_comes_with_its_weights(tmp_path: Path) -> None:
    path, weight, bias = _graph(tmp_path)
    model = load_graph(path)
    got_weight, got_bias = _weights(model)
    np.testing.assert_array_equal(got_weight, weight)
    np.testing.assert_array_equal(got_bias, bias)
    assert not any(t.external_data for t in model.graph.initializer)


def test_weights_with_another_hard_link_are_read(tmp_path: Path) -> None:
    path, weight, _ = _graph(tmp_path / "bundle")
    os.link(path.with_name("g.onnx.data"), tmp_path / "deduplicated.data")
    assert path.with_name("g.onnx.data").stat().st_nlink == 2
    np.testing.assert_array_equal(_weights(load_graph(path))[0], weight)


def _pointing(path: Path, location: str, offset: int = 0, length: int | None = None) -> None:
    model = onnx.load(str(path), load_external_data=False)
    entries = model.graph.initializer[0].external_data
    for entry in entries:
        if entry.key == "location":
            entry.value = location
        elif entry.key == "offset":
            entry.value = str(offset)
        elif entry.key == "length" and length is not None:
            entry.value = str(length)
    path.write_bytes(model.SerializeToString())


@pytest.mark.parametrize("location", ["../secret.data", "/etc/passwd", "", "missing.data"])
def test_weights_named_outside_the_graphs_folder_are_refused(tmp_path: Path, location: str) -> None:
    path, _, _ = _graph(tmp_path / "bundle")
    (tmp_path / "secret.data").write_bytes(bytes(64 * 64 * 4))
    _pointing(path, location)
    with pytest.raises(SourceGraphError, match="tensor 'w'"):
        load_graph(path)


def test_weights_behind_a_symbolic_link_are_refused(tmp_path: Path) -> None:
    path, _, _ = _graph(tmp_path / "bundle")
    shutil.copy(path.with_name("g.onnx.data"), tmp_path / "elsewhere.data")
    path.with_name("linked.data").symlink_to(tmp_path / "elsewhere.data")
    _pointing(path, "linked.data")
    with pytest.raises(SourceGraphError, match="not a plain file"):
        load_graph(path)


def test_weights_past_the_end_of_their_file_are_refused(tmp_path: Path) -> None:
    path, _, _ = _graph(tmp_path / "bundle")
    size = path.with_name("g.onnx.data").stat().st_size
    _pointing(path, "g.onnx.data", offset=size - 8, length=64 * 64 * 4)
    with pytest.raises(SourceGraphError, match="run past the end"):
        load_graph(path)


@pytest.fixture
def linked_tiny(tmp_path: Path) -> Path:
    """The tiny voice with each weights file hard-linked a second time, as a
    deduplicating tool leaves a bundle (onnx.load refuses such weights)."""
    bundle = tmp_path / "tiny"
    shutil.copytree(TINY, bundle)
    for data in bundle.glob("*.onnx.data"):
        os.link(data, tmp_path / f"{data.name}.again")
    return bundle


def test_a_bundle_with_hard_links_still_gets_its_made_graphs(
    tmp_path: Path, linked_tiny: Path
) -> None:
    assert make_light_flow(linked_tiny / "flow.onnx", tmp_path / "flows" / "abc-bf16w") > 0
    assert make_layout(linked_tiny / "decoder.onnx", tmp_path / "layouts" / "abc-1", 1)
    assert (tmp_path / "layouts" / "abc-1" / "decoder.onnx").is_file()
