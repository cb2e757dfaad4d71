"""The plans chosen from the same measurements do not change: each scenario of
``tests/data/plan_replay.json`` (recorded from c453008's planner by
``tests/plan_replay_record.py``) runs through today's planner, which must ask for the
same measuring, choose the same plan and have the voice load the same graphs.

A made-up machine's measurements are fed back as they were recorded; what is compared
is the plan (decoder choice, flow, threads, predicted peak, budget, refusals, the options
in their order) and what the voice then loads (engine, precision and graph of the
decoder, the flow, the windows). That commit spelt float32 "f32": it is read as "fp32".
One difference is meant: where ``int8`` was asked, that commit's plan said ONNX Runtime
float32 and the backend swapped in the int8 graph afterwards; the plan says int8 now.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from yomiage.runtime.bundle import DECODER_GRAPHS, read_manifest
from yomiage.runtime.chunking import Windowing
from yomiage.runtime.engines.placement import ORT_FP32
from yomiage.runtime.plan.job import BertGraph
from yomiage.runtime.plan.measurements import measurements_from_json as _measurements
from yomiage.runtime.plan.planner import Planner
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.store import cpu_identity

DATA = json.loads((Path(__file__).parent / "data" / "plan_replay.json").read_text("utf-8"))
TINY = Path(__file__).parent / "data" / "voices" / "tiny"
BIG_DECODER_BYTES = 59_000_000
SCENARIOS = DATA["scenarios"]


def spelt_now(value: Any) -> Any:
    """``value`` as recorded, with each precision spelt as the code spells it today."""
    if isinstance(value, str):
        return re.sub(r"\bf32\b", "fp32", value)
    if isinstance(value, list):
        return [spelt_now(v) for v in value]
    if isinstance(value, dict):
        return {k: spelt_now(v) for k, v in value.items()}
    return value


def int8_planned(recorded: dict[str, Any]) -> dict[str, Any]:
    """A recorded int8 scenario as the plan says it now: the decoder int8 on ONNX Runtime
    in the plan itself, not patched in after it."""
    plan = {**recorded["plan"], "decoder": {**recorded["plan"]["decoder"], "precision": "int8"}}
    plan["describe"] = plan["describe"].replace("onnxruntime fp32", "onnxruntime int8", 1)
    loads = {**recorded["loads"], "decoder": ["onnxruntime", "int8"]}
    return {**recorded, "plan": plan, "loads": loads}


class FakeSessions:
    """What the planner reads of a backend's sessions."""

    def __init__(self, threads: int | None, openvino: bool, native_bf16: bool) -> None:
        self.threads = threads or 2
        self.thread_choices = (threads,) if threads else (2, 4)
        self.has_openvino = openvino
        self.native_bf16 = openvino and native_bf16


class FakeLayouts:
    """Decoders in other layouts, named but never made."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def graph(self, decoder: Path, key: str, layout: int) -> Path:
        return decoder if layout == 0 else self.root / f"{key}-2d{layout}" / "decoder.onnx"

    def discard(self, graph: Path) -> None:
        pass


def normal(text: str) -> str:
    return re.sub(r"\(\d{4}-\d\d-\d\d\)", "(DAY)", text.replace(cpu_identity()[0], "CPU"))


def plain_job(job: Any) -> dict[str, Any]:
    return {
        "threads": job.threads,
        "thread_choices": list(job.thread_choices),
        "threads_length": job.threads_length,
        "lengths": sorted([[k.engine, k.precision, list(v)] for k, v in job.lengths.items()]),
        "families": sorted(
            [[k.engine, k.precision, [list(g) for g in v]] for k, v in job.families.items()]
        ),
        "ort_windows": list(job.ort_windows),
        "context": job.context,
        "layouts": sorted(job.layouts),
        "flows": [[f.engine, f.precision] for f in job.flows],
        "openvino_windows": list(job.openvino_windows),
    }


def replay(record: dict[str, Any], root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The scenario through today's planner: what it asked to measure, chose and loads."""
    scenario = record["scenario"]
    decoder_bytes = 300_000 if scenario["small"] else BIG_DECODER_BYTES
    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: decoder_bytes)
    monkeypatch.setattr("yomiage.runtime.plan.store.graph_bytes", lambda path: decoder_bytes)
    jobs: list[Any] = []

    def measure(job: Any, steps: Any = None) -> Any:
        jobs.append(job)
        return _measurements(spelt_now(DATA["measurements"][record["measurements"]]))

    openvino, native = record["openvino"], record["native_bf16"]
    windowing = Windowing(**scenario["windowing"]) if scenario["windowing"] else None
    from yomiage.runtime.plan.store import PlanStore

    bert = BertGraph(TINY / "bert", TINY / "bert" / "bert_q8.onnx", None, "q8")
    planner = Planner(
        FakeSessions(scenario["threads"], openvino, native),  # type: ignore[arg-type]
        bert,
        PlanRequest(scenario["precision"], scenario["budget_mb"], scenario["measure"], windowing),
        store=PlanStore(root / "plans") if scenario["store"] else None,
        layouts=FakeLayouts(root / "decoders") if scenario["layouts"] else None,  # type: ignore[arg-type]
        measure_fn=measure,
    )
    manifest = read_manifest(TINY)
    out: dict[str, Any] = {"name": record["name"]}
    try:
        plan = planner.plan_for(manifest)
    except ValueError as exc:
        out["error"] = str(exc)
        return out
    out["job"] = plain_job(jobs[0]) if jobs else None
    d = plan.decoder
    out["plan"] = {
        "decoder": {"engine": d.engine, "precision": d.precision, "window_frames": d.window_frames,
                    "first_window_frames": d.first_window_frames, "layout": d.layout},
        "budget_mb": plan.request.memory_budget_mb,
        "basis": normal(plan.basis),
        "threads": plan.threads,
        "encoder": [plan.encoder.engine, plan.encoder.precision],
        "flow": [plan.flow.engine, plan.flow.precision],
        "peak_mb": plan.peak_mb,
        "threads_ms": [list(t) for t in plan.threads_ms],
        "fits_budget": plan.fits_budget,
        "options": [[str(o), o.total_s, o.peak_mb, o.refused] for o in plan.options],
        "describe": normal(plan.describe()),
    }  # fmt: skip
    # What the voice loads is the plan as it is (onnx_voice.BundleVoice).
    decoder, flow = plan.decoder.placement, plan.flow
    moved = f", flow {flow.precision} on {flow.engine}" if flow != ORT_FP32 else ""
    out["loads"] = {
        "decoder": [decoder.engine, decoder.precision],
        "flow": [flow.engine, flow.precision],
        "encoder": [plan.encoder.engine, plan.encoder.precision],
        "precision": decoder.precision,
        "graph": f"2d{plan.decoder.layout}"
        if plan.decoder_graph
        else DECODER_GRAPHS[decoder.precision],
        "windowing": plan.windowing.__dict__,
        "describe": f"decoder {decoder.precision} on {decoder.engine}{moved}",
    }
    return out


def recorded(record: dict[str, Any]) -> dict[str, Any]:
    """What c453008 did in ``record``'s scenario, spelt as today."""
    out = {"name": record["name"]}
    if "error" in record:
        return {**out, "error": record["error"]}
    job = DATA["jobs"][record["job"]] if record.get("job") is not None else None
    now = spelt_now({**out, "job": job, "plan": record["plan"], "loads": record["loads"]})
    return int8_planned(now) if record["scenario"]["precision"] == "int8" else now


def test_the_recording_covers_what_the_plan_decides() -> None:
    """The scenarios reach each kind of decision, or the replay would hold little."""
    plans = [r["plan"] for r in SCENARIOS if "plan" in r]
    bases = {p["basis"].split(":")[0].split(" (")[0] for p in plans}
    assert {"measured on CPU", "fallback", "the int8 decoder runs on ONNX Runtime"} <= bases
    assert any(p["basis"].startswith("a small decoder") for p in plans)
    decoders = {(p["decoder"]["engine"], p["decoder"]["window_frames"], p["decoder"]["layout"],
                 tuple(p["flow"]), p["threads"], p["fits_budget"]) for p in plans}  # fmt: skip
    assert len(decoders) >= 12
    assert any(r.get("error") for r in SCENARIOS)
    assert any(o[3] and "slower than ONNX Runtime" in o[3] for p in plans for o in p["options"])


def refused_for_rounding(record: dict[str, Any]) -> bool:
    """Whether c453008 refused an option of ``record`` for a fraction of a MB: predicted
    at most half a MB over the budget (1,000.2 MB for 1,000), which issue 48 meant to
    change (plan/choose.py: _over)."""
    plan = record.get("plan")
    if plan is None:
        return False
    budget = plan["budget_mb"]
    return any(o[3] and "over the" in o[3] and round(o[2]) <= budget for o in plan["options"])


ROUNDED = [r for r in SCENARIOS if refused_for_rounding(r)]
SAME = [r for r in SCENARIOS if not refused_for_rounding(r)]


@pytest.mark.parametrize("record", SAME, ids=[r["name"] for r in SAME])
def test_the_same_measurements_give_the_same_plan(
    record: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert replay(record, tmp_path, monkeypatch) == recorded(record)


@pytest.mark.parametrize("record", ROUNDED, ids=[r["name"] for r in ROUNDED])
def test_an_option_refused_for_a_fraction_of_a_mb_now_fits(
    record: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where c453008 refused an option for a rounding of its prediction, that option
    now fits (it is judged with the others: here the lighter, even one still wins), and
    the plan is at least as fast as before."""
    now, was = replay(record, tmp_path, monkeypatch)["plan"], recorded(record)["plan"]
    budget = now["budget_mb"]
    rounded = {o[0] for o in was["options"] if o[3] and round(o[2]) <= budget}
    assert rounded and all(o[3] is None for o in now["options"] if o[0] in rounded)
    chosen, before = now["options"][0], was["options"][0]
    assert chosen[3] is None and round(chosen[2]) <= budget and now["fits_budget"]
    assert chosen[1] <= before[1]  # predicted seconds


def test_the_recording_holds_an_option_refused_for_a_rounding() -> None:
    assert len(ROUNDED) >= 1 and len(SAME) > 150
