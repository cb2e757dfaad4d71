"""The shape of the graphs ``yomiage convert`` writes, on the committed tiny bundle (made by
``tools/make_test_voices.py``): what keeps a voice light is checked here, where a
regression in the exporter would otherwise only show as memory in a benchmark."""

from __future__ import annotations

from collections import Counter
from typing import Any

import onnx
import pytest

from tests.conftest import TEST_VOICES

TINY = TEST_VOICES / "tiny"


def _graph(name: str) -> Any:
    return onnx.load(str(TINY / f"{name}.onnx"), load_external_data=False).graph


@pytest.mark.parametrize("name", ["flow", "decoder"])
def test_the_flow_and_decoder_take_the_speaker_id_not_its_vector(name: str) -> None:
    """Each speaker's projections are table rows (yomiage.export.speaker_tables), so no
    graph keeps the weights that made them."""
    graph = _graph(name)
    inputs = {i.name for i in graph.input}
    assert "sid" in inputs and "g" not in inputs
    tables = [i for i in graph.initializer if i.name.startswith("speaker_table__")]
    assert tables and all(t.dims[0] == 2 for t in tables)  # the tiny voice's two speakers


def test_the_flow_has_no_speaker_projections_and_no_pads() -> None:
    ops = Counter(n.op_type for n in _graph("flow").node)
    assert ops["Gemm"] == 0  # spk_emb_linear of each attention stack: now table rows
    assert ops["Pad"] == 0  # the feed-forward convolutions pad themselves
    # One band of keys per attention stack (4 coupling layers), not one per layer.
    assert ops["Expand"] == 4
    assert ops["ScatterElements"] > ops["Expand"]
