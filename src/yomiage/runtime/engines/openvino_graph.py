"""An OpenVINO compiled graph behind the :class:`~yomiage.runtime.engines.sessions.GraphSession`
interface, and the reading that keeps a graph's overridable inputs inputs.

Kept apart from :mod:`yomiage.runtime.engines.sessions` (which opens graphs on either
engine) because what OpenVINO needs beyond a plain call is its own: an infer
request per concurrent caller, its buffers released when idle, the pages of
what it compiled from given back (:mod:`yomiage.mapped_files`),
inputs that its ONNX reader would fold into constants, and the flow's mask of
real frames, so it can run at a few padded lengths.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.mapped_files import drop_resident_pages
from yomiage.runtime.engines.placement import Placement
from yomiage.runtime.engines.telemetry import engines_without_telemetry
from yomiage.runtime.flow_lengths import FRAME_MASK_INPUT
from yomiage.runtime.stage_trims import TRIM_INPUT

Array = npt.NDArray[Any]
Dim = int | str | None  # a fixed size, a named dynamic one, or unknown

# Inputs with a default that a caller may still feed: the decoder's stage trims.
OVERRIDABLE_INPUTS = frozenset({TRIM_INPUT})


class OpenVinoGraph:
    """An OpenVINO compiled model; each call takes an idle infer request (one per caller
    at a time), so concurrent calls never share one."""

    few_shapes = True

    def __init__(
        self,
        path: Path,
        compiled: Any,
        placement: Placement,
        mapped: tuple[Path, ...] = (),
        defaults: Mapping[str, Array] | None = None,
    ) -> None:
        """``mapped``: the files (or folders) OpenVINO compiled it from and keeps mapped,
        whose pages are given back after a call meets a new length
        (:mod:`yomiage.mapped_files`); ``defaults``: what inputs a caller may
        leave out take then, as ONNX Runtime does with an input's default."""
        self.path = path
        self.placement = placement
        self._compiled = compiled
        self._inputs = frozenset(i.get_any_name() for i in compiled.inputs)
        self._outputs = list(compiled.outputs)
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._running = 0
        self._lock = threading.Lock()
        self._mapped = mapped
        self._shapes: set[tuple[tuple[str, tuple[int, ...]], ...]] = set()
        self._new_shape = False
        self._defaults = dict(defaults or {})

    @property
    def input_names(self) -> frozenset[str]:
        return self._inputs

    @property
    def output_names(self) -> list[str]:
        return [o.get_any_name() for o in self._outputs]

    def input_shape(self, name: str) -> list[Dim]:
        port = next(i for i in self._compiled.inputs if i.get_any_name() == name)
        return _dims(port.get_partial_shape())

    def output_shape(self, index: int) -> list[Dim]:
        return _dims(self._outputs[index].get_partial_shape())

    def run(self, feeds: Mapping[str, Array]) -> list[Array]:
        with self._lock:
            self._running += 1
        try:
            try:
                request = self._idle.get_nowait()
            except queue.Empty:
                request = self._compiled.create_infer_request()
            try:
                given = {**self._defaults, **feeds}
                chosen = {k: np.ascontiguousarray(v) for k, v in given.items() if k in self._inputs}
                shape = tuple(sorted((k, v.shape) for k, v in chosen.items()))
                with self._lock:
                    if shape not in self._shapes:
                        self._shapes.add(shape)
                        self._new_shape = True
                results = request.infer(chosen)
                return [np.array(results[o]) for o in self._outputs]
            finally:
                self._idle.put(request)
        finally:
            self._release_when_idle()

    def _release_when_idle(self) -> None:
        """Hand back the intermediate buffers once no call is running.

        OpenVINO keeps buffers and kernels per input length it has seen (on the
        full-size decoder ~260 MB for the four window lengths); releasing after
        each call frees the buffers (~40 MB of it) at no measurable cost."""
        with self._lock:
            self._running -= 1
            if self._running == 0:
                with contextlib.suppress(AttributeError, RuntimeError):  # older OpenVINO
                    self._compiled.release_memory()
                if self._new_shape:  # only then were the compiled-from weights read
                    self._new_shape = False
                    drop_resident_pages(self._mapped)


def _dims(shape: Any) -> list[Dim]:
    return [d.get_length() if d.is_static else None for d in shape]


def read_with_inputs(core: Any, path: Path, names: frozenset[str]) -> tuple[Any, dict[str, Array]]:
    """``path`` read by OpenVINO, with those of ``names`` that the graph gives a default
    value made inputs again, and those defaults.

    An ONNX input with a default is a constant to OpenVINO's reader, folded away when
    it compiles; the decoder's stage trims must stay an input to be fed
    (:mod:`yomiage.runtime.stage_trims`)."""
    with engines_without_telemetry():  # loaded already with the core; the guard is the rule
        import openvino.opset13 as ops

    model = core.read_model(str(path))
    defaults: dict[str, Array] = {}
    for op in model.get_ops():
        if op.get_type_name() != "Constant" or not names & op.output(0).get_names():
            continue
        name = next(iter(names & op.output(0).get_names()))
        defaults[name] = np.array(op.get_data())
        parameter = ops.parameter(op.get_output_partial_shape(0), op.get_output_element_type(0))
        parameter.output(0).set_names({name})
        op.output(0).replace(parameter.output(0))
        model.add_parameters([parameter])
    if defaults:
        model.validate_nodes_and_infer_types()
    return model, defaults


def with_frame_mask(model: Any) -> Any:
    """``model`` (the flow, read by OpenVINO) taking a mask of its real frames as
    :data:`~yomiage.runtime.flow_lengths.FRAME_MASK_INPUT`, so it may run padded to a
    few lengths (:mod:`yomiage.runtime.flow_lengths`).

    Only two kinds of its operations mix frames: attention, whose scores get a bias
    of -1e4 at the padded keys before their softmax (exp of it is 0), and the
    feed-forward convolutions wider than one frame, whose inputs are multiplied by
    the mask so they read zeros past the real frames, as they would without
    padding. Everything else works frame by frame. ValueError for a graph with no
    attention (not a flow: padding it could not be hidden)."""
    with engines_without_telemetry():
        import openvino as ov
        import openvino.opset13 as ops

    mask = ops.parameter(ov.PartialShape([1, 1, -1]), ov.Type.f32, name=FRAME_MASK_INPUT)
    mask.output(0).set_names({FRAME_MASK_INPUT})
    hidden = ops.multiply(ops.subtract(mask, np.float32(1.0)), np.float32(1e4))
    key_bias = ops.unsqueeze(hidden, np.int64(2))  # [1, 1, 1, frames]: over every query
    softmaxes = 0
    for op in list(model.get_ordered_ops()):
        kind = op.get_type_name()
        if kind in ("Convolution", "GroupConvolution"):
            weights = op.input(1).get_partial_shape()
            spatial = list(weights)[3 if kind == "GroupConvolution" else 2 :]
            if all(d.is_static and d.get_length() == 1 for d in spatial):
                continue  # one frame wide: nothing to hide
            source = op.input(0).get_source_output()
            op.input(0).replace_source_output(ops.multiply(source, mask).output(0))
        elif kind == "Softmax":
            source = op.input(0).get_source_output()
            op.input(0).replace_source_output(ops.add(source, key_bias).output(0))
            softmaxes += 1
    if not softmaxes:
        raise ValueError("the graph has no attention: its padding could not be masked")
    model.add_parameters([mask])
    model.validate_nodes_and_infer_types()
    return model
