"""The flow with bfloat16 weights (issue 48): the rewrite, the kept graph, the session
that keeps it narrow, and the plan that takes it only where its budget needs it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

from yomiage.export.bf16_weights import MIN_ELEMENTS, store_weights_bf16, to_bf16_bits
from yomiage.plan_child import made as made_module
from yomiage.plan_child.light_flow import make_light_flow
from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.derived import FLOWS_DIR, derived_paths, flow_key, remove_derived
from yomiage.runtime.engines.onnx_session import session_options
from yomiage.runtime.engines.placement import ORT_BF16, ORT_FP32
from yomiage.runtime.engines.sessions import Sessions, probe_speaker
from yomiage.runtime.light_flows import LightFlowError, LightFlows
from yomiage.runtime.plan.choose import LIGHT_FLOW_COST, choose_plan, judge
from yomiage.runtime.plan.measurements import EngineTimings, FlowTimings, Measurements
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.value import DecoderChoice

TINY = Path(__file__).parent / "data" / "voices" / "tiny"
FLOW = TINY / "flow.onnx"
CONTEXT = 15
LENGTHS = (62, 94, 158, 286, 542)


def _flow_output(path: Path, placement: object = ORT_FP32) -> np.ndarray:
    graph = Sessions(1, openvino=False).open(path, placement)  # type: ignore[arg-type]
    speaker = probe_speaker(graph, np.random.default_rng(0))
    channels = read_manifest(TINY).inter_channels
    z_p = np.random.default_rng(1).standard_normal((1, channels, 80)).astype(np.float32)
    return graph.run({"z_p": z_p, **speaker})[0]


# -- the rewrite ------------------------------------------------------------------------


def test_bfloat16_rounds_to_nearest_even_and_keeps_nan_and_infinity() -> None:
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, np.inf, np.nan, 1 + 2**-9],
                      np.float32)  # fmt: skip
    bits = to_bf16_bits(values)
    assert [hex(b) for b in bits[:5]] == ["0x3f80", "0x3f80", "0x3f82", "0xc020", "0x7f80"]
    assert (bits[5] & 0x7F80) == 0x7F80 and bits[5] & 0x7F  # still a NaN
    assert bits[6] == 0x3F80  # below half an ulp: down
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    finite = np.isfinite(values)
    assert np.all(np.abs(widened[finite] - values[finite]) <= np.abs(values[finite]) * 2**-8)


def test_the_flows_weights_become_bfloat16_and_its_output_stays_close() -> None:
    model = onnx.load(str(FLOW))
    before = {t.name: t for t in model.graph.initializer}
    narrowed = store_weights_bf16(model)
    bf16 = [t for t in model.graph.initializer if t.data_type == TensorProto.BFLOAT16]
    assert bf16 and narrowed.saved_bytes == sum(int(np.prod(t.dims)) * 2 for t in bf16)
    assert narrowed.widest_bytes == max(int(np.prod(t.dims)) * 4 for t in bf16)
    assert all(int(np.prod(t.dims)) >= MIN_ELEMENTS for t in bf16)
    casts = [n for n in model.graph.node if n.input[0].endswith("_bf16")]
    assert all(n.op_type == "Cast" for n in casts)
    assert {n.output[0] for n in casts} == {t.name.removesuffix("_bf16") for t in bf16}
    assert all(name in before for name in (n.output[0] for n in casts))
    onnx.checker.check_model(model)
    light = onnx.load(str(FLOW))
    store_weights_bf16(light, min_elements=10**12)  # nothing that large: unchanged
    assert all(t.data_type != TensorProto.BFLOAT16 for t in light.graph.initializer)


def test_the_session_keeps_the_weights_narrow(tmp_path: Path) -> None:
    """Folded, each Cast would become a float32 copy of its weight held from the load on:
    the optimized graph ONNX Runtime runs still has the Casts and the bfloat16 weights."""
    make_light_flow(FLOW, tmp_path / "light")
    options = session_options(1)
    options.optimized_model_filepath = str(tmp_path / "as-run.onnx")
    ort.InferenceSession(str(tmp_path / "light" / "flow.onnx"), options,
                         providers=["CPUExecutionProvider"],
                         disabled_optimizers=["ConstantFolding"])  # fmt: skip
    as_run = onnx.load(str(tmp_path / "as-run.onnx"), load_external_data=False)
    assert any(n.op_type == "Cast" for n in as_run.graph.node)
    assert any(t.data_type == TensorProto.BFLOAT16 for t in as_run.graph.initializer)
    # ...and the session a voice opens on ORT_BF16 is opened so.
    graph = Sessions(1, openvino=False).open(tmp_path / "light" / "flow.onnx", ORT_BF16)
    assert graph.placement == ORT_BF16


def test_a_light_flow_is_made_once_and_speaks_as_the_float32_one_within_rounding(
    tmp_path: Path,
) -> None:
    flows = LightFlows(tmp_path / FLOWS_DIR)
    light = flows.flow(FLOW, "abc")  # in a child
    assert light.graph == tmp_path / FLOWS_DIR / "abc-bf16w" / "flow.onnx"
    data = light.graph.with_name("flow.onnx.data")
    assert data.stat().st_size < (TINY / "flow.onnx.data").stat().st_size
    assert 0 < light.saving_mb < (TINY / "flow.onnx.data").stat().st_size / 2 / 2**20
    stamp = data.stat().st_mtime_ns
    assert flows.flow(FLOW, "abc") == light and data.stat().st_mtime_ns == stamp
    want, got = _flow_output(FLOW), _flow_output(light.graph, ORT_BF16)
    rms = float(np.sqrt(np.mean((want - got) ** 2)) / np.sqrt(np.mean(want**2)))
    assert 0 < rms < 1e-2  # rounded, not exact


def test_a_damaged_light_flow_is_made_again(tmp_path: Path) -> None:
    flows = LightFlows(tmp_path)
    light = flows.flow(FLOW, "abc")
    data = light.graph.with_name("flow.onnx.data")
    damaged = bytearray(data.read_bytes())
    damaged[100] ^= 0xFF
    data.write_bytes(bytes(damaged))
    again = flows.flow(FLOW, "abc")
    assert again.graph == light.graph and data.read_bytes() != bytes(damaged)


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyError("x")])
def test_a_light_flow_that_fails_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    def broken(model: object, path: Path) -> None:
        path.with_name("flow.onnx.data").write_bytes(b"half")  # what a crash leaves
        raise failure

    monkeypatch.setattr(made_module, "save_graph", broken)
    root = tmp_path / FLOWS_DIR
    with pytest.raises(LightFlowError, match=r"bfloat16 weights in .*flows"):
        make_light_flow(FLOW, root / "abc-bf16w")
    assert list(root.iterdir()) == []
    monkeypatch.undo()
    assert make_light_flow(FLOW, root / "abc-bf16w") > 0
    assert [p.name for p in root.iterdir()] == ["abc-bf16w"]


def test_a_light_flow_the_child_cannot_make_is_a_light_flow_error(tmp_path: Path) -> None:
    (tmp_path / FLOWS_DIR).write_text("a file where the folder should be")
    with pytest.raises(LightFlowError, match="flows"):
        LightFlows(tmp_path / FLOWS_DIR).flow(FLOW, "abc")


def test_a_light_flow_leaves_the_cache_with_its_bundle(tmp_path: Path) -> None:
    files = read_manifest(TINY).files
    key = flow_key(files)
    assert key is not None
    light = LightFlows(tmp_path / FLOWS_DIR).flow(FLOW, key)
    assert light.graph.parent in derived_paths(tmp_path, files)
    assert remove_derived(tmp_path, files) == [light.graph.parent]


# -- the plan ---------------------------------------------------------------------------


ORT = EngineTimings("onnxruntime", "fp32", {n: 4.0 * n for n in LENGTHS},
                    {n: 40.0 * (i + 1) for i, n in enumerate(LENGTHS)})  # fmt: skip
FLOW_MS = FlowTimings(ORT_FP32, {100: 50.0, 1000: 400.0})
MEASURED = Measurements(700.0, (ORT,), CONTEXT, ort_peak_mb={128: 800.0, 256: 860.0},
                        flows=(FLOW_MS,))  # fmt: skip
CHOICES = (DecoderChoice("onnxruntime", "fp32", 128), DecoderChoice("onnxruntime", "fp32", 256))


def _plan(budget: int, light_mb: float | None, precision: str = "auto"):  # type: ignore[no-untyped-def]
    return choose_plan(MEASURED, PlanRequest(precision, budget), threads=2, basis="t",
                       allowed=CHOICES, light_flow_mb=light_mb)  # fmt: skip


def test_the_light_flow_is_taken_only_where_the_budget_needs_it() -> None:
    roomy = _plan(900, 70.0)
    assert roomy.flow == ORT_FP32 and roomy.decoder.window_frames == 256  # fits as it is
    # 128 frames fit as they are, 256 (3.5% faster) only with the light flow.
    tight = _plan(800, 70.0)
    assert (tight.decoder.window_frames, tight.flow) == (256, ORT_BF16)
    assert tight.peak_mb == pytest.approx(790.0) and tight.flow_graph is None  # the planner's
    assert _plan(800, None).decoder.window_frames == 128
    # A slower flow: widening its weights costs 256 frames their lead, so 128 as they are.
    slow = replace(MEASURED, flows=(FlowTimings(ORT_FP32, {100: 150.0, 1000: 1200.0}),))
    even = choose_plan(slow, PlanRequest("auto", 800), threads=2, basis="t", allowed=CHOICES,
                       light_flow_mb=70.0)  # fmt: skip
    assert (even.decoder.window_frames, even.flow) == (128, ORT_FP32)
    tighter = _plan(760, 70.0)  # only the light flow fits: 800 - 70 and 860 - 70
    assert tighter.flow == ORT_BF16 and tighter.fits_budget
    assert tighter.peak_mb == pytest.approx(730.0)
    without = _plan(760, None)
    assert without.flow == ORT_FP32 and not without.fits_budget


def test_the_light_flow_is_timed_as_the_float32_one_widening_its_weights() -> None:
    choice = CHOICES[0]
    exact = judge(choice, MEASURED, 2000)
    light = judge(choice, MEASURED, 700, light_flow_mb=70.0)
    assert exact is not None and light is not None and light.flow == ORT_BF16
    decoder_only = judge(choice, replace(MEASURED, flows=()), 2000)
    assert decoder_only is not None
    flow_s = [e - d for e, d in zip(exact.seconds, decoder_only.seconds, strict=True)]
    light_s = [li - d for li, d in zip(light.seconds, decoder_only.seconds, strict=True)]
    assert light_s == pytest.approx([f * LIGHT_FLOW_COST for f in flow_s])


def test_where_nothing_fits_the_light_flow_lowers_the_lightest() -> None:
    plan = _plan(600, 70.0)
    assert not plan.fits_budget and plan.flow == ORT_BF16
    assert plan.peak_mb == pytest.approx(730.0)


# -- the planner and the voice ------------------------------------------------------------


def _planner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precision: str, budget: int):  # type: ignore[no-untyped-def]
    """A planner for the tiny voice taken for a full-size one, its measurements given."""
    from yomiage.runtime.plan.job import BertGraph
    from yomiage.runtime.plan.planner import Planner
    from yomiage.runtime.plan.store import PlanStore

    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: 59_000_000)
    bert = BertGraph(TINY / "bert", TINY / "bert" / "bert_q8.onnx", None, "q8")
    request = PlanRequest(precision, budget, measure_plan=True)
    return Planner(Sessions(2, openvino=False), bert, request,
                   store=PlanStore(tmp_path / "plans"), measure_fn=lambda job, steps=None: MEASURED,
                   flows=LightFlows(tmp_path / FLOWS_DIR))  # fmt: skip


def test_a_plan_over_its_budget_runs_the_light_flow_and_the_voice_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yomiage.runtime.onnx_backend import OnnxBackend

    manifest = read_manifest(TINY)
    plan = _planner(tmp_path, monkeypatch, "auto", 760).plan_for(manifest)
    # The tiny flow saves under 1 MB: still over, but the lightest there is.
    light = LightFlows(tmp_path / FLOWS_DIR).flow(FLOW, flow_key(manifest.files) or "")
    assert plan.flow == ORT_BF16 and plan.peak_mb == pytest.approx(800 - light.saving_mb)
    assert plan.flow_graph is not None and plan.flow_graph.parent.parent == tmp_path / FLOWS_DIR
    assert "flow onnxruntime bf16 weights" in plan.describe()
    backend = OnnxBackend(TINY / "bert", threads=1, openvino=False)
    monkeypatch.setattr(backend, "plan", lambda folder: plan)
    voice = backend.load_voice(TINY)
    assert voice.flow.placement == ORT_BF16  # type: ignore[attr-defined]
    assert "flow bf16 weights on onnxruntime" in voice.info.runtime
    # An exact request never rounds the flow's weights, whatever its budget.
    exact = _planner(tmp_path / "exact", monkeypatch, "fp32", 600).plan_for(manifest)
    assert exact.flow == ORT_FP32 and exact.flow_graph is None
    assert not (tmp_path / "exact" / FLOWS_DIR).exists()


def test_a_plan_that_fits_makes_no_light_flow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _planner(tmp_path, monkeypatch, "auto", 2000).plan_for(read_manifest(TINY))
    assert plan.flow == ORT_FP32 and not (tmp_path / FLOWS_DIR).exists()


def test_a_light_flow_that_does_not_load_is_removed_and_the_bundles_own_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from yomiage.runtime import made_graphs
    from yomiage.runtime.onnx_backend import OnnxBackend

    planner = _planner(tmp_path, monkeypatch, "auto", 760)
    plan = planner.plan_for(read_manifest(TINY))
    assert plan.flow_graph is not None
    plan.flow_graph.with_name("flow.onnx.data").write_bytes(b"damaged")
    monkeypatch.setattr(made_graphs, "unlike_made", lambda folder, names: {})
    backend = OnnxBackend(TINY / "bert", threads=1, openvino=False)
    backend.planner = planner
    monkeypatch.setattr(backend, "plan", lambda folder: plan)
    voice = backend.load_voice(TINY)
    assert "bundle's own flow runs" in caplog.text
    assert voice.flow.placement == ORT_FP32  # type: ignore[attr-defined]
    assert voice.plan is not None and "did not load" in voice.plan.basis
    assert not plan.flow_graph.parent.exists()  # made again on the next load
