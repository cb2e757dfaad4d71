"""The decoder in another layout of its stages: made once, whole or not at all, timed by
the plan, and run by the voice whose plan chose it."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import onnx
import pytest

from yomiage.export.decoder_layout import two_d_from
from yomiage.plan_child import made as made_module
from yomiage.plan_child.layout import make_layout
from yomiage.runtime import made_graphs
from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.decoder_layouts import LAYOUT_CHOICES, DecoderLayouts, LayoutError
from yomiage.runtime.derived import layout_key
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.plan.job import BertGraph
from yomiage.runtime.plan.measure import MeasureJob
from yomiage.runtime.plan.measurements import EngineTimings, Measurements
from yomiage.runtime.plan.planner import Planner
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.store import PlanStore
from yomiage.runtime.plan.value import DecoderChoice, Plan

TINY = Path(__file__).parent / "data" / "voices" / "tiny"
DECODER = TINY / "decoder.onnx"
LENGTHS = (23, 31, 47, 62, 94, 158, 286, 542)


def test_a_layout_is_made_once_and_the_bundles_own_is_the_bundles_file(tmp_path: Path) -> None:
    layouts = DecoderLayouts(tmp_path / "decoders")
    assert layouts.graph(DECODER, "abc", 0) == DECODER
    assert not (tmp_path / "decoders").exists()
    made = layouts.graph(DECODER, "abc", 1)  # in a child; the tiny voice's stages are narrow
    assert made == tmp_path / "decoders" / "abc-2d1" / "decoder.onnx"
    assert two_d_from(onnx.load(str(made))) == min(_upsampler_widths())
    data = made.with_name("decoder.onnx.data")  # weights beside it, mapped as a bundle's
    assert data.stat().st_size >= 0.9 * (TINY / "decoder.onnx.data").stat().st_size
    assert made.parent.stat().st_mode & 0o777 == 0o755 and data.stat().st_mode & 0o777 == 0o644
    stamp = made.stat().st_mtime_ns
    assert layouts.graph(DECODER, "abc", 1) == made and made.stat().st_mtime_ns == stamp
    # A graph that has the layout asked for already is its own: nothing is made.
    assert layouts.graph(made, "def", min(_upsampler_widths())) == made
    assert not layouts.folder("def", min(_upsampler_widths())).exists()


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyError("x")])
def test_a_layout_that_fails_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """A full disk while writing, or an error nobody expected: LayoutError naming the
    folder, and no file, whole or half, left behind; the next try makes it."""

    def broken(model: object, path: Path) -> None:
        path.with_name("decoder.onnx.data").write_bytes(b"half")  # what a crash leaves
        raise failure

    monkeypatch.setattr(made_module, "save_graph", broken)
    root = tmp_path / "decoders"
    with pytest.raises(LayoutError, match=r"2-D in .*decoders"):
        make_layout(DECODER, root / "abc-2d1", 1)
    assert list(root.iterdir()) == []
    monkeypatch.undo()
    assert make_layout(DECODER, root / "abc-2d1", 1)
    assert [p.name for p in root.iterdir()] == ["abc-2d1"]


def test_a_layout_the_child_cannot_make_is_a_layout_error(tmp_path: Path) -> None:
    (tmp_path / "decoders").write_text("a file where the folder should be")
    with pytest.raises(LayoutError, match="decoders"):
        DecoderLayouts(tmp_path / "decoders").graph(DECODER, "abc", 1)


def _upsampler_widths() -> list[int]:
    model = onnx.load(str(DECODER), load_external_data=False)
    kernels = {t.name: list(t.dims) for t in model.graph.initializer}
    return [kernels[n.input[1]][1] for n in model.graph.node if n.op_type == "ConvTranspose"]


class Measured:
    """Measurements as a plan's measuring would return them, with a faster layout."""

    def __init__(self, faster_layout: int) -> None:
        self.faster_layout = faster_layout
        self.jobs: list[MeasureJob] = []

    def __call__(self, job: MeasureJob, steps: object = None) -> Measurements:
        self.jobs.append(job)

        def timings(ms_per_frame: float, layout: int) -> EngineTimings:
            return EngineTimings("onnxruntime", "fp32", {n: ms_per_frame * n for n in LENGTHS},
                                 {n: 40.0 + n / 10 for n in LENGTHS}, layout=layout)  # fmt: skip

        engines = [timings(4.0, 0)]
        engines += [timings(3.0 if n == self.faster_layout else 4.0, n) for n in job.layouts]
        return Measurements(600.0, tuple(engines), job.context)


def _planner(tmp_path: Path, measure: Measured, layouts: bool = True) -> Planner:
    bert = BertGraph(TINY / "bert", TINY / "bert" / "bert_q8.onnx", None, "q8")
    return Planner(Sessions(2, openvino=False), bert, PlanRequest(measure_plan=True),
                   store=PlanStore(tmp_path / "plans"), measure_fn=measure,
                   layouts=DecoderLayouts(tmp_path / "decoders") if layouts else None)  # fmt: skip


@pytest.fixture
def big_tiny(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The tiny voice, its decoder taken for a full-size one (so it is planned)."""
    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: 59_000_000)
    return read_manifest(TINY)


def test_the_plan_times_each_other_layout_and_takes_the_faster(
    tmp_path: Path, big_tiny: object
) -> None:
    measure = Measured(faster_layout=128)
    planner = _planner(tmp_path, measure)
    plan = planner.plan_for(big_tiny)  # type: ignore[arg-type]
    (job,) = measure.jobs
    # The tiny bundle is 1-D: every layout of the choices is another one, made to be timed.
    assert set(job.layouts) == set(LAYOUT_CHOICES)
    assert all(path.is_file() and path.parent.parent == tmp_path / "decoders"
               for path in job.layouts.values())  # fmt: skip
    assert plan.decoder.layout == 128 and "2-D from 128 channels" in plan.describe()
    assert plan.decoder_graph == job.layouts[128]
    assert plan.decoder_file(big_tiny) == job.layouts[128]  # type: ignore[arg-type]


def test_a_layout_no_faster_leaves_the_bundles_own(tmp_path: Path, big_tiny: object) -> None:
    plan = _planner(tmp_path, Measured(faster_layout=-1)).plan_for(big_tiny)  # type: ignore[arg-type]
    assert plan.decoder.layout == 0


def test_without_a_cache_for_them_no_layout_is_made_or_timed(
    tmp_path: Path, big_tiny: object
) -> None:
    measure = Measured(faster_layout=128)
    plan = _planner(tmp_path, measure, layouts=False).plan_for(big_tiny)  # type: ignore[arg-type]
    assert measure.jobs[0].layouts == {} and plan.decoder.layout == 0
    assert not (tmp_path / "decoders").exists()


def test_a_layout_that_cannot_be_made_at_load_runs_the_bundles_own(
    tmp_path: Path, big_tiny: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    planner = _planner(tmp_path, Measured(faster_layout=128))
    plan = planner.plan_for(big_tiny)  # type: ignore[arg-type]
    assert plan.decoder.layout == 128 and plan.decoder_graph is not None
    shutil.rmtree(tmp_path / "decoders")  # the cache was cleared, and now the disk is full

    def full(*args: object) -> Path:
        raise LayoutError("cannot make decoder.onnx: disk full")

    monkeypatch.setattr(DecoderLayouts, "graph", full)
    running = planner.plan_for(big_tiny)  # type: ignore[arg-type]
    assert running.decoder == replace(plan.decoder, layout=0) and running.decoder_graph is None
    assert running.decoder_file(big_tiny) == DECODER  # type: ignore[arg-type]


def test_a_voice_runs_the_decoder_of_its_plans_layout_with_the_same_samples(
    tmp_path: Path,
) -> None:
    from yomiage.runtime.engines.sessions import probe_speaker
    from yomiage.runtime.onnx_voice import BundleVoice

    class Recording(Sessions):
        opened: ClassVar[list[Path]] = []

        def open(self, path: Path, *args: object, **kw: object):  # type: ignore[no-untyped-def]
            self.opened.append(path)
            return super().open(path, *args, **kw)  # type: ignore[arg-type]

    sessions = Recording(1, openvino=False)
    made = DecoderLayouts(tmp_path).graph(DECODER, "abc", 1)
    plan = Plan(DecoderChoice("onnxruntime", "fp32", layout=1), PlanRequest(), "test", threads=1)
    own = BundleVoice(TINY, sessions, replace(plan, decoder=DecoderChoice("onnxruntime", "fp32")))
    other = BundleVoice(TINY, sessions, replace(plan, decoder_graph=made))
    assert sessions.opened[2] == DECODER and sessions.opened[5] == made
    assert other.info.runtime.endswith(", decoder 2-D from 1 channels (measured)")
    assert "2-D" not in own.info.runtime
    rng = np.random.default_rng(0)
    z = rng.standard_normal((1, own.manifest.inter_channels, 9)).astype(np.float32)
    feeds = {"z": z, **probe_speaker(own.decoder, rng)}
    want = own.decoder.run(feeds)[0]
    np.testing.assert_allclose(other.decoder.run(feeds)[0], want, atol=1e-6)


def test_a_made_decoder_that_does_not_load_is_removed_and_the_bundles_own_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The net under the sha256 check (tests/test_damaged_derived_files.py): a made graph
    that passed it (damaged keeping its size and time) but does not load."""
    from yomiage.runtime.onnx_backend import OnnxBackend

    backend = OnnxBackend(TINY / "bert", threads=1, plan_request=PlanRequest("fp32"),
                          openvino=False, layouts_dir=tmp_path / "decoders")  # fmt: skip
    key = layout_key(read_manifest(TINY).files)
    assert key is not None
    made = backend.planner.layouts.graph(DECODER, key, 1)  # type: ignore[union-attr]
    made.with_name("decoder.onnx.data").write_bytes(b"damaged")
    monkeypatch.setattr(made_graphs, "unlike_made", lambda folder, names: {})
    chosen = Plan(DecoderChoice("onnxruntime", "fp32", layout=1), PlanRequest(), "test",
                  threads=1, decoder_graph=made)  # fmt: skip
    monkeypatch.setattr(backend, "plan", lambda folder: chosen)
    voice = backend.load_voice(TINY)
    assert "cannot load ONNX graph" in caplog.text and "bundle's own decoder runs" in caplog.text
    assert voice.plan is not None and voice.plan.decoder.layout == 0
    assert "2-D" not in voice.info.runtime
    assert not made.parent.exists()  # made again on the next load
    again = backend.planner.layouts.graph(DECODER, key, 1)  # type: ignore[union-attr]
    assert again == made
    assert backend.load_voice(TINY).info.runtime.endswith("2-D from 1 channels (measured)")
