"""Records ``tests/data/plan_replay.json``: the plans the planner of c453008 chose for a set
of made-up machines, for ``tests/test_plan_replay.py`` to hold later code to.

Run once, against that commit's package (it imports the planner by its old paths)::

    git worktree add /tmp/old c453008
    PYTHONPATH=/tmp/old/src python tests/plan_replay_record.py

Each scenario is a machine (a profile: which engines it has, what each costs per frame
and per length met, what the rest of the engine holds), a request (decoder precision,
memory budget, threads asked, measuring on or off, decoder layouts kept or not, a
backend's windows) and a voice (the committed tiny voice, its decoder taken for a
full-size one unless the scenario says small). The measuring is made up from the job
the planner asks for (every length, thread count, layout and flow it names), so the
job is recorded beside the measurements it got and the plan it chose; and what the
backend of that commit then loaded: the decoder's engine, precision and graph, the
flow's, the windows. Precisions are written as that commit spelt them ("f32").
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "voices" / "tiny"
OUT = ROOT / "tests" / "data" / "plan_replay.json"
BIG_DECODER_BYTES = 59_000_000  # a full-size SBV2 decoder's weights
FLOW_FRAMES = (40, 96, 160, 384, 896)


@dataclass(frozen=True)
class Cost:
    """A made-up engine: ``fixed_ms + ms_per_frame * n`` a call (less per frame on long
    calls by ``long_gain``), memory added per length met (``keeps``: every length,
    as OpenVINO; else the largest, as ONNX Runtime's arena)."""

    fixed_ms: float
    ms_per_frame: float
    mb_base: float
    mb_per_frame: float
    keeps: bool
    long_gain: float = 0.0
    threads: dict[int, float] = field(default_factory=lambda: {2: 1.0, 4: 0.9})

    def ms(self, n: int) -> float:
        return round(self.fixed_ms + self.ms_per_frame * n * (1 - self.long_gain * n / 1000), 3)


@dataclass(frozen=True)
class Profile:
    name: str
    openvino: bool
    native_bf16: bool
    floor_mb: float
    costs: dict[tuple[str, str], Cost]
    layout_speed: dict[int, float] = field(default_factory=dict)  # ONNX Runtime, per layout
    flow_ms_per_frame: float = 0.25
    flow_bf16_factor: float | None = 0.6  # None: the flow cannot run there
    flow_extra_mb: float = 45.0
    unavailable: tuple[tuple[str, str], ...] = ()


ORT = ("onnxruntime", "f32")
BF16 = ("openvino", "bf16")
PROFILES = [
    # AVX2 only (a Zen 3): no bfloat16; decoder layouts differ in speed.
    Profile("avx2", openvino=True, native_bf16=False, floor_mb=640.0,
            costs={ORT: Cost(12.0, 4.4, 70.0, 0.42, keeps=False, long_gain=0.12,
                             threads={2: 1.0, 4: 1.02})},
            layout_speed={64: 0.9, 128: 0.96}),
    # AVX-512 BF16 (a Zen 4 or 5): bfloat16 costs a lot per call, little per frame.
    Profile("avx512-bf16", openvino=True, native_bf16=True, floor_mb=700.0,
            costs={ORT: Cost(10.0, 4.0, 65.0, 0.4, keeps=False, long_gain=0.1),
                   BF16: Cost(40.0, 1.7, 40.0, 0.35, keeps=True, threads={2: 1.0, 4: 0.97})},
            layout_speed={64: 1.01, 128: 0.9}, flow_bf16_factor=0.55),
    # AMX (a Xeon): bfloat16 about as fast per frame at every length, memory steep.
    Profile("amx", openvino=True, native_bf16=True, floor_mb=828.2,
            costs={ORT: Cost(20.0, 3.6, 60.0, 0.5, keeps=False),
                   BF16: Cost(5.0, 1.0, 150.0, 2.4, keeps=True)},
            flow_bf16_factor=0.5, flow_extra_mb=70.0),
    # bfloat16 faster per frame but slow to start: slower than float32 on short sentences.
    Profile("slow-start", openvino=True, native_bf16=True, floor_mb=600.0,
            costs={ORT: Cost(8.0, 4.0, 40.0, 0.3, keeps=False),
                   BF16: Cost(300.0, 1.0, 10.0, 0.1, keeps=True)},
            flow_bf16_factor=None),
    # OpenVINO installed but unable to run the decoder: that engine left out for good.
    Profile("broken-openvino", openvino=True, native_bf16=True, floor_mb=650.0,
            costs={ORT: Cost(10.0, 4.2, 60.0, 0.4, keeps=False)},
            flow_bf16_factor=None, unavailable=(BF16,)),
]  # fmt: skip


def measurements_for(profile: Profile, job: Any) -> dict[str, Any]:
    """Made-up measurements for everything ``job`` asks, as a plan file holds them."""
    context = job.context
    engines = []
    for (engine, precision), lengths in sorted(job.lengths.items()):
        cost = profile.costs.get((engine, precision))
        if cost is None:
            continue
        groups = job.families.get((engine, precision)) or (lengths,)
        memory: dict[int, float] = {}
        for group in groups:
            added = 0.0
            for n in sorted(group):
                if cost.keeps:
                    added += cost.mb_base / 2 + cost.mb_per_frame * n
                else:
                    added = cost.mb_base + cost.mb_per_frame * n
                memory[n] = round(added, 1)
        threads = {}
        if len(job.thread_choices) > 1:
            threads = {t: round(cost.ms(job.threads_length) * cost.threads.get(t, 1.0), 3)
                       for t in job.thread_choices}  # fmt: skip
        entry = {"engine": engine, "precision": precision,
                 "call_ms": {str(n): cost.ms(n) for n in sorted(lengths)},
                 "memory_mb": {str(n): mb for n, mb in sorted(memory.items())},
                 "threads_ms": {str(t): ms for t, ms in sorted(threads.items())},
                 "layout": 0, "balanced_trims": cost.keeps}  # fmt: skip
        engines.append(entry)
        if (engine, precision) == ORT:
            for layout in sorted(job.layouts):
                speed = profile.layout_speed.get(layout, 1.0)
                engines.append({**entry, "layout": layout,
                                "call_ms": {k: round(v * speed, 3)
                                            for k, v in entry["call_ms"].items()},
                                "memory_mb": {k: round(v + 4.0 * layout / 64, 1)
                                              for k, v in entry["memory_mb"].items()},
                                "threads_ms": {k: round(v * speed, 3)
                                               for k, v in entry["threads_ms"].items()}})  # fmt: skip
    ort = profile.costs[ORT]
    from yomiage.runtime.chunking import window_lengths

    ort_peaks = {
        str(w): round(profile.floor_mb + 25.0 + ort.mb_base + ort.mb_per_frame
                      * window_lengths(w, context, 32)[-1], 1)
        for w in job.ort_windows
    }  # fmt: skip
    flows = [{"engine": "onnxruntime", "precision": "f32", "peak_mb": {},
              "call_ms": {str(n): round(3.0 + profile.flow_ms_per_frame * n, 3)
                          for n in FLOW_FRAMES}}]  # fmt: skip
    bf16 = profile.costs.get(BF16)
    if job.flows and profile.flow_bf16_factor is not None and bf16 is not None:
        from yomiage.runtime.plan_schedules import openvino_first_window

        peaks = {}
        for w in job.openvino_windows:
            lengths = window_lengths(w, context, openvino_first_window(w))
            held = sum(bf16.mb_base / 2 + bf16.mb_per_frame * n for n in lengths)
            peaks[str(w)] = round(profile.floor_mb + held + profile.flow_extra_mb, 1)
        factor = profile.flow_bf16_factor
        flows.append({"engine": "openvino", "precision": "bf16", "peak_mb": peaks,
                      "call_ms": {str(n): round((3.0 + profile.flow_ms_per_frame * n) * factor, 3)
                                  for n in FLOW_FRAMES}})  # fmt: skip
    unavailable = [list(u) for u in profile.unavailable if u in job.lengths]
    return {"floor_mb": profile.floor_mb, "ort_peak_mb": ort_peaks, "context": context,
            "unavailable": unavailable, "engines": engines, "flows": flows}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    profile: str
    precision: str = "auto"
    budget_mb: int = 1000
    threads: int | None = 2  # None: none asked, the plan chooses among 2 and 4
    measure: bool = True
    store: bool = True
    layouts: bool = False
    small: bool = False
    windowing: dict[str, int] | None = None  # the backend's own windows

    def name(self) -> str:
        parts = [self.profile, self.precision, f"{self.budget_mb}MB",
                 f"threads-{self.threads or 'chosen'}"]  # fmt: skip
        parts += ["layouts"] * self.layouts + ["measuring-off"] * (not self.measure)
        parts += ["no-cache"] * (not self.store) + ["small-decoder"] * self.small
        parts += [f"windows-{self.windowing['window_frames']}"] if self.windowing else []
        return " ".join(parts)


def scenarios() -> list[Scenario]:
    out = []
    for profile in PROFILES:
        for precision in ("auto", "fp32", "bf16", "int8"):
            for budget in (800, 1000, 1400, 2000):
                out.append(Scenario(profile.name, precision, budget))
            if precision in ("auto", "fp32"):
                for budget in (800, 1000, 1400):
                    out.append(Scenario(profile.name, precision, budget, layouts=True))
                out.append(Scenario(profile.name, precision, 1000, threads=None))
                out.append(Scenario(profile.name, precision, 1400, threads=None, layouts=True))
    for openvino, native in ((False, False), (True, False), (True, True)):
        name = {(False, False): "no-openvino", (True, False): "avx2", (True, True): "amx"}[
            openvino, native
        ]
        for precision in ("auto", "fp32", "bf16", "int8"):
            for budget in (1000, 1899, 1900, 2400):
                out.append(Scenario(name, precision, budget, measure=False))
            out.append(Scenario(name, precision, 1000, small=True))
        out.append(Scenario(name, "auto", 2400, store=False))
    out.append(Scenario("avx512-bf16", "fp32", 1000, windowing={"window_frames": 128}))
    out.append(
        Scenario(
            "avx512-bf16", "auto", 2000, windowing={"window_frames": 96, "first_window_frames": 16}
        )
    )
    return out


class FakeSessions:
    """What the planner reads of a backend's sessions."""

    def __init__(self, threads: int | None, openvino: bool, native_bf16: bool) -> None:
        self.threads = threads or 2
        self.thread_choices = (threads,) if threads else (2, 4)
        self.has_openvino = openvino
        self.native_bf16 = openvino and native_bf16


class FakeLayouts:
    """Decoders in other layouts, named but never made (the measuring is made up too)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def graph(self, decoder: Path, key: str, layout: int) -> Path:
        return decoder if layout == 0 else self.root / f"{key}-2d{layout}" / "decoder.onnx"

    def discard(self, graph: Path) -> None:
        pass


def plain_job(job: Any) -> dict[str, Any]:
    return {
        "threads": job.threads,
        "thread_choices": list(job.thread_choices),
        "threads_length": job.threads_length,
        "lengths": sorted([[e, p, list(v)] for (e, p), v in job.lengths.items()]),
        "families": sorted([[e, p, [list(g) for g in v]] for (e, p), v in job.families.items()]),
        "ort_windows": list(job.ort_windows),
        "context": job.context,
        "layouts": sorted(job.layouts),
        "flows": [list(f) for f in job.flows],
        "openvino_windows": list(job.openvino_windows),
    }


def plain_choice(choice: Any) -> dict[str, Any]:
    return {"engine": choice.engine, "precision": choice.precision,
            "window_frames": choice.window_frames,
            "first_window_frames": choice.first_window_frames, "layout": choice.layout}  # fmt: skip


def normal(text: str) -> str:
    """``text`` without this machine's CPU name and the day it was measured."""
    from yomiage.runtime.plan_store import cpu_identity

    return re.sub(r"\(\d{4}-\d\d-\d\d\)", "(DAY)", text.replace(cpu_identity()[0], "CPU"))


def run(scenario: Scenario, root: Path) -> dict[str, Any]:
    """The scenario through c453008's planner and backend: what it measured, chose and loaded."""
    import yomiage.runtime.planner as planner_module
    from yomiage.runtime.placement import resolve_decoder_precision
    from yomiage.runtime.plan_store import PlanStore, _measurements

    from yomiage.runtime.bundle import read_manifest
    from yomiage.runtime.chunking import Windowing

    profile = next((p for p in PROFILES if p.name == scenario.profile), None)
    openvino = scenario.profile != "no-openvino"
    native = scenario.profile not in ("no-openvino", "avx2")
    if profile is not None:
        openvino, native = profile.openvino, profile.native_bf16
    decoder_bytes = 300_000 if scenario.small else BIG_DECODER_BYTES
    planner_module.graph_bytes = lambda path: decoder_bytes  # type: ignore[attr-defined]
    import yomiage.runtime.plan_store as store_module

    store_module.graph_bytes = lambda path: decoder_bytes  # type: ignore[attr-defined]
    record: dict[str, Any] = {"name": scenario.name(), "scenario": scenario.__dict__,
                              "openvino": openvino, "native_bf16": native}  # fmt: skip
    jobs: list[Any] = []
    fed: list[dict[str, Any]] = []

    def measure(job: Any, steps: Any = None) -> Any:
        jobs.append(job)
        assert profile is not None
        fed.append(measurements_for(profile, job))
        return _measurements(fed[-1])

    sessions = FakeSessions(scenario.threads, openvino, native)
    bert_dir = TINY / "bert"
    bert = planner_module.BertGraph(bert_dir, bert_dir / "bert_q8.onnx", None, "q8")
    planner = planner_module.Planner(
        sessions,  # type: ignore[arg-type]
        bert,
        decoder_precision=scenario.precision,
        budget_mb=scenario.budget_mb,
        store=PlanStore(root / "plans") if scenario.store else None,
        measure_plan=scenario.measure,
        layouts=FakeLayouts(root / "decoders") if scenario.layouts else None,  # type: ignore[arg-type]
        measure_fn=measure,
    )
    manifest = read_manifest(TINY)
    # OnnxBackend.plan: an explicit bf16 is checked first (raises without OpenVINO).
    try:
        if scenario.precision == "bf16":
            resolve_decoder_precision("bf16", openvino=openvino, native_bf16=native)
        plan = planner.plan_for(manifest)
    except ValueError as exc:
        record["error"] = str(exc)
        return record
    plan, graph = planner.decoder_graph(manifest, plan)
    record["job"] = plain_job(jobs[0]) if jobs else None
    record["measurements"] = fed[0] if fed else None
    record["plan"] = {
        "decoder": plain_choice(plan.decoder),
        "budget_mb": plan.budget_mb,
        "basis": normal(plan.basis),
        "threads": plan.threads,
        "encoder": [plan.encoder.engine, plan.encoder.precision],
        "flow": [plan.flow.engine, plan.flow.precision],
        "peak_mb": plan.peak_mb,
        "threads_ms": [list(t) for t in plan.threads_ms],
        "fits_budget": "no option fits the budget" not in plan.basis,
        "options": [[str(o), o.total_s, o.peak_mb, o.refused] for o in plan.options],
        "describe": normal(plan.describe()),
    }  # fmt: skip
    # OnnxBackend._bundle_voice and BundleVoice: the placement the voice then loads.
    precision = "int8" if scenario.precision == "int8" else plan.decoder.precision
    placement = plan.placement("fp32" if precision == "f32" else precision,
                               automatic=scenario.precision == "auto")  # fmt: skip
    placement = placement.sized(decoder_bytes)
    windowing = Windowing(**scenario.windowing) if scenario.windowing else plan.windowing
    made = graph != manifest.file("decoder.onnx")
    record["loads"] = {
        "decoder": [placement.decoder.engine, placement.decoder.precision],
        "flow": [placement.flow.engine, placement.flow.precision],
        "encoder": [placement.encoder.engine, placement.encoder.precision],
        "precision": placement.precision,
        "graph": f"2d{plan.decoder.layout}" if made else placement.decoder_graph,
        "windowing": windowing.__dict__,
        "describe": placement.describe(),
    }
    return record


# The plan file written by that commit's store (format 10) for this key, and what it held:
# ``test_plan_store_format`` reads it with today's store.
FORMAT_10_FILE = ROOT / "tests" / "data" / "plan_format_10.json"
FORMAT_10_KEY = {"cpu": "Test CPU", "cpu_flags": ["avx2", "avx512_bf16"], "threads": 2,
                 "thread_choices": [2, 4], "architecture": [["decoder", 59000000], ["context", 15]],
                 "engines": [["onnxruntime", "1.0"], ["openvino", "2026.1"]]}  # fmt: skip


def record_format_10(measured: dict[str, Any]) -> None:
    """``measured`` kept by c453008's store under :data:`FORMAT_10_KEY`."""
    from yomiage.runtime.plan_store import PlanKey, PlanStore, _measurements

    fields = {k: tuple(tuple(v) if isinstance(v, list) else v for v in value)
              if isinstance(value, list) else value for k, value in FORMAT_10_KEY.items()}  # fmt: skip
    key = PlanKey(**fields)
    assert key.format == 10
    with tempfile.TemporaryDirectory() as tmp:
        store = PlanStore(Path(tmp))
        store.save(key, _measurements(measured), "2026-11-27")
        data = json.loads(store.path(key).read_text())
    # the file's name (its key's digest), for the test to check its own against
    FORMAT_10_FILE.write_text(json.dumps({"name": store.path(key).name, "file": data}) + "\n")


def main() -> int:
    records = []
    shared: dict[str, list[str]] = {"job": [], "measurements": []}  # each one written once
    for scenario in scenarios():
        with tempfile.TemporaryDirectory() as tmp:
            record = run(scenario, Path(tmp))
        for name, table in shared.items():
            if record.get(name) is not None:
                text = json.dumps(record[name], sort_keys=True)
                if text not in table:
                    table.append(text)
                record[name] = table.index(text)
        records.append(record)
    data = {"recorded_by": "c453008", "scenarios": records,
            "jobs": [json.loads(t) for t in shared["job"]],
            "measurements": [json.loads(t) for t in shared["measurements"]]}  # fmt: skip
    OUT.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    # measurements with both engines, a flow off ONNX Runtime and an engine left out
    both = next(m for m in data["measurements"] if len(m["flows"]) > 1)
    record_format_10({**both, "unavailable": [["openvino", "f32"]]})
    print(f"{len(records)} scenarios written to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
