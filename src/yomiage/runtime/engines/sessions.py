"""One small interface over the two inference engines a voice's graphs may run on.

A voice asks :class:`Sessions` for each of its graphs with a :class:`Placement`
(engine and precision) and gets a :class:`GraphSession` back; nothing else in
the pipeline knows which engine runs what. ONNX Runtime runs every graph and
is the fallback; OpenVINO (``pip install openvino``, which ``yomiage`` depends
on where it has wheels) runs the decoder faster, in float32 or, on CPUs with
native bfloat16 arithmetic, in bfloat16 (:mod:`yomiage.runtime.engines.placement` says
which graph goes where, and why).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from yomiage.errors import ModelLoadError
from yomiage.mapped_files import drop_resident_pages
from yomiage.runtime.engines.compile_ahead import compile_ahead, has_blob
from yomiage.runtime.engines.compiled_cache import checked_cache
from yomiage.runtime.engines.cpu import BF16_FLAGS, cpu_flags, physical_cores, thread_choices
from yomiage.runtime.engines.onnx_session import input_names, load_session, session_options
from yomiage.runtime.engines.openvino_graph import (
    OVERRIDABLE_INPUTS,
    Dim,
    OpenVinoGraph,
    read_with_inputs,
    with_frame_mask,
)
from yomiage.runtime.engines.placement import (
    ONNXRUNTIME,
    OPENVINO,
    ORT_FP32,
    EngineKind,
    Placement,
    Precision,
)
from yomiage.runtime.engines.telemetry import engines_without_telemetry

with engines_without_telemetry():  # the engines decide at their start: see that module
    import onnxruntime as ort

log = logging.getLogger(__name__)

Array = npt.NDArray[Any]
# Bumped when what OpenVINO is given to compile changes, so that blobs compiled from
# the old form, which it would never read again, leave the cache. 2: the trims are an
# input (each compiled blob of the full-size decoder is ~58 MB).
COMPILED_FORM = 2


def probe_speaker(graph: GraphSession, rng: np.random.Generator) -> dict[str, Array]:
    """A speaker feed for running a flow or decoder on made-up inputs (measuring, warming):
    ``sid`` 0 where the graph has speaker tables (:mod:`yomiage.export.speaker_tables`),
    else a random ``g`` of the width it takes."""
    if "g" not in graph.input_names:
        return {"sid": np.zeros(1, np.int64)}
    width = graph.input_shape("g")[1]
    return {"g": rng.standard_normal((1, width if isinstance(width, int) else 1, 1), np.float32)}


class GraphSession(Protocol):
    """A loaded graph. ``run`` takes the feeds it knows (others are ignored) and returns
    the outputs in the graph's order. Safe to call from several threads.
    ``few_shapes``: the engine keeps kernels per input shape, so callers should
    show it only a few (:func:`yomiage.runtime.chunking.fixed_windows`)."""

    placement: Placement
    few_shapes: bool

    @property
    def input_names(self) -> frozenset[str]: ...

    @property
    def output_names(self) -> list[str]: ...

    def input_shape(self, name: str) -> list[Dim]: ...

    def output_shape(self, index: int) -> list[Dim]: ...

    def run(self, feeds: Mapping[str, Array]) -> list[Array]: ...


class OrtGraph:
    """A graph on ONNX Runtime's CPU provider; ``placement``: ONNX Runtime in the
    precision its graph is made in (an int8 decoder's QDQ graph, a flow's bfloat16
    weights, or float32)."""

    few_shapes = False

    def __init__(
        self,
        path: Path,
        options: ort.SessionOptions,
        placement: Placement = ORT_FP32,
        weights_dir: Path | None = None,
    ) -> None:
        self.placement = placement
        # bf16 on ONNX Runtime: a graph with bfloat16 weights widened as they are used
        self.session = load_session(path, options, keep_casts=placement.precision == "bf16",
                                    weights_dir=weights_dir)  # fmt: skip
        # with the initializers a caller may override (the decoder's trims)
        overridable = {i.name for i in self.session.get_overridable_initializers()}
        self._inputs = input_names(self.session) | overridable

    @property
    def input_names(self) -> frozenset[str]:
        return self._inputs

    @property
    def output_names(self) -> list[str]:
        return [o.name for o in self.session.get_outputs()]

    def input_shape(self, name: str) -> list[Dim]:
        return list(next(i.shape for i in self.session.get_inputs() if i.name == name))

    def output_shape(self, index: int) -> list[Dim]:
        return list(self.session.get_outputs()[index].shape)

    def run(self, feeds: Mapping[str, Array]) -> list[Array]:
        chosen = {k: v for k, v in feeds.items() if k in self._inputs}
        return list(self.session.run(None, chosen))


class Sessions:
    """Opens graphs for one backend: ``threads`` intra-op threads on either engine, or
    as many as a graph's :meth:`open` asks (a voice's plan may choose another count).

    OpenVINO is imported on first use; where it is missing or refuses a graph,
    the graph runs on ONNX Runtime in float32 instead (logged). With a
    ``cache_dir``, OpenVINO keeps each compiled graph under
    ``<cache_dir>/<OpenVINO version>-form<COMPILED_FORM>/<graph sha256>/``
    (measured on the full-size decoder: load 0.3 s -> 0.15 s, 15 MB less): a new
    graph or a new OpenVINO gets a new folder, and folders of other versions or
    forms are removed. Each blob there is checked against the sha256 recorded when
    OpenVINO wrote it before it is used (:mod:`yomiage.runtime.engines.compiled_cache`).
    OpenVINO's own cache key is the graph's path, not its content, hence the
    folder per sha256.
    """

    def __init__(
        self,
        threads: int | None = None,
        *,
        cache_dir: Path | None = None,
        openvino: bool | None = None,
        compile_ahead: bool = False,
    ) -> None:
        """``openvino=False`` keeps every graph on ONNX Runtime; by default OpenVINO is
        used where it is installed, unless the environment sets ``YOMIAGE_OPENVINO=0``
        (a way out should an OpenVINO release misbehave on some machine).
        ``compile_ahead``: a graph whose compiled form is not cached yet is compiled in
        a child process first (:mod:`yomiage.runtime.engines.compile_ahead`)."""
        self.threads = threads or physical_cores()
        # The counts a plan may choose among: only the one asked for, if one was.
        self.thread_choices = (threads,) if threads else thread_choices()
        self.ort_options = session_options(self.threads)
        self._ort_options_by_threads = {self.threads: self.ort_options}
        self._cache_dir = cache_dir
        self.compile_ahead = compile_ahead
        if openvino is None:
            openvino = os.environ.get("YOMIAGE_OPENVINO", "1").strip() not in ("0", "false", "no")
        self._core: Any = None if openvino else False
        self._lock = threading.Lock()

    def open(
        self,
        path: Path,
        placement: Placement = ORT_FP32,
        *,
        sha256: str | None = None,
        threads: int | None = None,
        frame_mask: bool = False,
        weights_dir: Path | None = None,
    ) -> GraphSession:
        """The graph at ``path`` on ``placement``'s engine (ONNX Runtime if that fails),
        on ``threads`` threads (default: the backend's).

        ``sha256`` (the graph's, as its manifest records it) lets OpenVINO's
        compiled graph be cached. ``frame_mask``: the graph is a flow, which an
        engine that keeps shapes runs padded, taking a mask of its real frames
        (:mod:`yomiage.runtime.flow_lengths`). ``weights_dir``: its weights are there,
        not beside it (on ONNX Runtime only:
        :func:`~yomiage.runtime.engines.onnx_session.load_session`)."""
        threads = threads or self.threads
        if weights_dir is not None:  # options of its own: they name the weights' folder
            on_ort = placement if placement.kind is ONNXRUNTIME else ORT_FP32
            return OrtGraph(path, session_options(threads), on_ort, weights_dir)
        if placement.kind is OPENVINO:
            core = self._openvino()
            if core is not None:
                try:
                    return self._open_openvino(
                        core, path, placement.precision, sha256, threads, frame_mask
                    )
                except ModelLoadError:
                    raise
                except Exception as exc:  # OpenVINO raises its own RuntimeError types
                    log.warning("OpenVINO cannot run %s (%s); using ONNX Runtime", path.name, exc)
        # ONNX Runtime runs the graph in the precision it was made in: float32 for a
        # graph OpenVINO was to run, whatever precision it was to run it in.
        on_ort = placement if placement.kind is ONNXRUNTIME else ORT_FP32
        return OrtGraph(path, self._ort_options(threads), on_ort)

    def _ort_options(self, threads: int) -> ort.SessionOptions:
        with self._lock:
            if threads not in self._ort_options_by_threads:
                self._ort_options_by_threads[threads] = session_options(threads)
            return self._ort_options_by_threads[threads]

    @property
    def has_openvino(self) -> bool:
        """Whether OpenVINO is installed and allowed. Answered from the package's
        metadata, without importing it: loading OpenVINO and its CPU plugin costs a
        process tens of MB (measured: benchmarks/history/issue-32.md, fourth pass),
        which a plan that keeps every graph on ONNX Runtime should not pay. One that
        is installed but cannot start is found out when a graph is opened on it
        (that graph then runs on ONNX Runtime, with a warning)."""
        return self._core is not False and OPENVINO.version() is not None

    def runs(self, engine: EngineKind) -> bool:
        """Whether graphs may be opened on ``engine`` here: it is installed and, for
        OpenVINO, allowed (:attr:`has_openvino`)."""
        return self.has_openvino if engine is OPENVINO else engine.version() is not None

    @property
    def native_bf16(self) -> bool:
        """Whether OpenVINO computes bfloat16 natively on this CPU (AVX512_BF16 or AMX).

        OpenVINO's CPU plugin defaults to bfloat16 exactly there (elsewhere bfloat16
        would be emulated, slower than float32). Where the CPU's flags can be read
        (Linux) they answer, without loading OpenVINO; elsewhere OpenVINO's own default
        is asked. Either way a plan only takes bfloat16 where it measured faster."""
        if not self.has_openvino:
            return False
        flags = cpu_flags()
        if flags is not None:
            return bool(flags & BF16_FLAGS)
        core = self._openvino()
        if core is None:
            return False
        try:
            hint = core.get_property("CPU", "INFERENCE_PRECISION_HINT")
        except Exception:  # an OpenVINO without this property
            return False
        return str(getattr(hint, "type_name", hint)).lower() in ("bf16", "bfloat16")

    def _openvino(self) -> Any:
        with self._lock:
            if self._core is None:
                self._core = _make_core()
            return self._core or None

    def _open_openvino(
        self,
        core: Any,
        path: Path,
        precision: Precision,
        sha256: str | None,
        threads: int,
        frame_mask: bool = False,
    ) -> OpenVinoGraph:
        if not path.is_file():
            raise ModelLoadError(f"ONNX graph not found: {path}")
        config: dict[str, Any] = {
            "INFERENCE_NUM_THREADS": threads,
            "INFERENCE_PRECISION_HINT": _element_type(precision),
            "PERFORMANCE_HINT": "LATENCY",
            "NUM_STREAMS": 1,
        }
        cache = self._graph_cache(sha256)
        if self.compile_ahead and cache is not None and not has_blob(cache):
            compile_ahead(path, precision, threads, cache, frame_mask=frame_mask)
        model, defaults = read_with_inputs(core, path, OVERRIDABLE_INPUTS)
        if frame_mask:
            model = with_frame_mask(model)
        # Its blobs checked against their sha256 first (runtime/engines/compiled_cache.py).
        with checked_cache(cache) as cached:
            if cached:
                config["CACHE_DIR"] = str(cache)
            compiled = core.compile_model(model, "CPU", config)
        del model  # the compiled graph holds what it needs
        # What it keeps mapped: its compiled blob, or the graph and its weights; and the
        # weights it read to find the blob by, which a first load after the compiling
        # ahead left resident (+53 MB on the full-size decoder, never read again).
        graph = (path, path.with_name(f"{path.name}.data"))
        mapped = (cache, *graph) if cached and cache else graph
        drop_resident_pages(mapped)
        return OpenVinoGraph(path, compiled, Placement(OPENVINO.name, precision), mapped, defaults)

    def _graph_cache(self, sha256: str | None) -> Path | None:
        """The folder for one graph's compiled forms, or None (no cache, or it is not writable)."""
        version = OPENVINO.version()
        if self._cache_dir is None or sha256 is None or version is None:
            return None
        root = self._cache_dir
        kind = _safe_name(f"{version}-form{COMPILED_FORM}")
        folder = root / kind / sha256
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.info("OpenVINO cache %s is not writable (%s); compiling every load", root, exc)
            return None
        for other in root.iterdir():
            if other.is_dir() and other.name != kind:
                # compiled by another OpenVINO, or from another form of the graphs
                shutil.rmtree(other, ignore_errors=True)
        return folder


def _element_type(precision: Precision) -> Any:
    """OpenVINO's element type for the arithmetic of ``precision`` (its own names)."""
    with engines_without_telemetry():  # loaded already with the core; the guard is the rule
        import openvino

    return {"fp32": openvino.Type.f32, "bf16": openvino.Type.bf16}[precision]


def _safe_name(version: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in version)


def _make_core() -> Any:
    """An OpenVINO Core, or False when OpenVINO is not installed or cannot start."""
    try:
        with engines_without_telemetry():
            import openvino
    except ImportError:
        log.info("OpenVINO is not installed; every graph runs on ONNX Runtime")
        return False
    try:
        return openvino.Core()
    except Exception as exc:
        log.warning("OpenVINO cannot start (%s); every graph runs on ONNX Runtime", exc)
        return False
