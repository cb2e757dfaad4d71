"""The plan's measuring and its kept file under the prober's faults (issue 49, items 10,
11 and 14): figures that make no sense, a measuring step killed, a measuring stopped
midway, two processes measuring one voice, a cache that cannot be written, a budget
nothing fits. The measuring processes are stood in for (``yomiage.runtime.plan.measure._child``) with
plausible figures; the planner, the steps, the store and the lock are the real ones."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from yomiage.runtime.bundle import VoiceManifest, read_manifest
from yomiage.runtime.engines.placement import ORT_FP32
from yomiage.runtime.engines.sessions import Sessions
from yomiage.runtime.plan import measure as plan_measure
from yomiage.runtime.plan.job import BertGraph
from yomiage.runtime.plan.measure import MeasureError, MeasureJob
from yomiage.runtime.plan.measurements import EngineTimings, Measurements
from yomiage.runtime.plan.planner import Planner
from yomiage.runtime.plan.request import DEFAULT_MEMORY_BUDGET_MB, PlanRequest
from yomiage.runtime.plan.store import PlanKey, PlanStore

TINY = Path(__file__).parent / "data" / "voices" / "tiny"
BERT = BertGraph(TINY / "bert", TINY / "bert" / "bert_q8.onnx", None, "q8")


@pytest.fixture
def big_voice(monkeypatch: pytest.MonkeyPatch) -> VoiceManifest:
    """The tiny voice's manifest, its decoder taken for a full-size one (so it is
    planned), on a CPU with OpenVINO's native bfloat16 (so there is more to measure)."""
    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: 59_000_000)
    monkeypatch.setattr(Sessions, "has_openvino", property(lambda self: True))
    monkeypatch.setattr(Sessions, "native_bf16", property(lambda self: True))
    return read_manifest(TINY)


def planner(root: Path, budget_mb: int = DEFAULT_MEMORY_BUDGET_MB, **kw: Any) -> Planner:
    """A planner of a new process on the cache ``root`` (threads asked for: one count)."""
    request = PlanRequest(memory_budget_mb=budget_mb, measure_plan=True)
    return Planner(Sessions(2, openvino=False), BERT, request, store=PlanStore(root / "plans"),
                   **kw)  # fmt: skip


def figures(args: dict[str, Any]) -> dict[str, Any]:
    """What a measuring process would print for ``args``: plausible figures, bfloat16
    twice as fast as float32."""
    what = args["what"]
    if what == "decoder":
        per_frame = 4.0 if args["engine"] == "onnxruntime" else 2.0
        lengths = args["lengths"]
        counts = args["thread_choices"]
        return {
            "call_ms": {str(n): per_frame * n for n in lengths},
            "memory_mb": {str(n): 40.0 + 10 * i for i, n in enumerate(lengths)},
            "threads_ms": {str(t): 900.0 / t for t in counts} if len(counts) > 1 else {},
            "balanced_trims": False,
        }
    if what == "floor":
        return {"peak_mb": 600.0, "ort_peak_mb": {str(w): 700.0 + w / 10 for w in args["ort_windows"]},
                "flow_ms": {"40": 5.0, "96": 10.0, "896": 90.0}}  # fmt: skip
    if what == "flow":
        return {"peak_mb": {str(w): 800.0 + w for w in args["windows"]},
                "flow_ms": {"40": 3.0, "96": 6.0, "896": 50.0}}  # fmt: skip
    return {"compiled": args.get("precisions", [])}


def step_of(args: dict[str, Any]) -> tuple[object, ...]:
    """A measuring process's arguments as what it measures (paths left out)."""
    return (args["what"], args.get("engine"), args.get("flow") and tuple(args["flow"]),
            tuple(args.get("lengths", ())), tuple(args.get("windows", ())))  # fmt: skip


class Children:
    """Stands for the measuring processes: records each one asked for, fails those
    ``fail`` says to (raising what it returns), answers the rest with :func:`figures`."""

    def __init__(self, fail: Callable[[dict[str, Any]], BaseException | None] | None = None):
        self.asked: list[dict[str, Any]] = []
        self.fail = fail

    def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(args)
        error = self.fail(args) if self.fail else None
        if error is not None:
            raise error
        return figures(args)

    @property
    def steps(self) -> list[tuple[object, ...]]:
        return [step_of(a) for a in self.asked]


def use(monkeypatch: pytest.MonkeyPatch, children: Children) -> Children:
    monkeypatch.setattr(plan_measure, "_child", children)
    return children


def killed(args: dict[str, Any]) -> BaseException | None:
    """The bfloat16 decoder's first measuring process killed (the prober's kill -9)."""
    if args["what"] == "decoder" and args["engine"] == "openvino":
        return MeasureError("measuring decoder failed (killed by SIGKILL): no output")
    return None


# -- a step that failed once (D9) ---------------------------------------------------------


def test_a_measuring_step_killed_is_measured_again_at_the_next_start(
    tmp_path: Path, big_voice: VoiceManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was kept out of the plan for good: never measured again, and ``--decoder
    bf16`` then planned from the rest."""
    first = use(monkeypatch, Children(fail=killed))
    plan = planner(tmp_path).plan_for(big_voice)
    assert plan.decoder.engine == "onnxruntime"  # bf16 left out this time
    assert ("decoder", "openvino") in {s[:2] for s in first.steps}
    again = use(monkeypatch, Children())
    plan = planner(tmp_path).plan_for(big_voice)
    # Only what failed is measured, the rest is kept; bf16 is an option again.
    assert again.steps and {s[:2] for s in again.steps} == {("decoder", "openvino")}
    assert plan.decoder.engine == "openvino" and plan.decoder.precision == "bf16"
    third = use(monkeypatch, Children())
    assert planner(tmp_path).plan_for(big_voice) == plan
    assert third.asked == []


def test_a_step_that_fails_every_start_is_left_out_after_three(
    tmp_path: Path, big_voice: VoiceManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    for _ in range(3):
        children = use(monkeypatch, Children(fail=killed))
        plan = planner(tmp_path).plan_for(big_voice)
        assert ("decoder", "openvino") in {s[:2] for s in children.steps}
    last = use(monkeypatch, Children(fail=killed))
    assert planner(tmp_path).plan_for(big_voice) == plan
    assert last.asked == []  # no longer costs every start its time


def test_a_step_the_engine_refuses_is_left_out_at_once(
    tmp_path: Path, big_voice: VoiceManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(args: dict[str, Any]) -> BaseException | None:
        if args["what"] == "decoder" and args["engine"] == "openvino":
            return MeasureError("OpenVINO is not available", lasting=True)
        return None

    use(monkeypatch, Children(fail=refused))
    planner(tmp_path).plan_for(big_voice)
    again = use(monkeypatch, Children())
    planner(tmp_path).plan_for(big_voice)
    assert again.asked == []


def test_figures_that_make_no_sense_are_measured_again(
    tmp_path: Path,
    big_voice: VoiceManifest,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def zeros(args: dict[str, Any]) -> dict[str, Any]:
        out = figures(args)
        if args["what"] == "decoder" and args["engine"] == "openvino":
            out["memory_mb"] = {n: 0.0 for n in out["memory_mb"]}
        return out

    monkeypatch.setattr(plan_measure, "_child", zeros)
    with caplog.at_level(logging.WARNING):
        plan = planner(tmp_path).plan_for(big_voice)
    assert plan.decoder.engine == "onnxruntime" and "make no sense" in caplog.text
    again = use(monkeypatch, Children())
    assert planner(tmp_path).plan_for(big_voice).decoder.engine == "openvino"
    assert {s[:2] for s in again.steps} == {("decoder", "openvino")}


# -- a measuring stopped midway (D1) ------------------------------------------------------


class Stopped(BaseException):
    """The start stopped mid-measuring (the server's limit, a SIGTERM, Ctrl-C)."""


def test_a_measuring_stopped_midway_resumes_from_the_steps_it_kept(
    tmp_path: Path, big_voice: VoiceManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing was kept until the last step, so every retry began from the first."""
    first = use(monkeypatch, Children(fail=lambda a: Stopped() if a["what"] == "floor" else None))
    with pytest.raises(Stopped):
        planner(tmp_path).plan_for(big_voice)
    done = [s for s in first.steps if s[0] == "decoder"]
    assert len(done) >= 2
    again = use(monkeypatch, Children())
    plan = planner(tmp_path).plan_for(big_voice)
    assert not set(done) & set(again.steps)  # none of the finished steps measured again
    assert again.steps[0][0] == "floor"
    assert plan.basis.startswith("measured on")


# -- kept figures checked for sense (item 10) -------------------------------------------


def key(**changes: Any) -> PlanKey:
    base = dict(cpu="Test CPU", cpu_flags=("avx2",), threads=2, thread_choices=(2,),
                architecture=(("decoder", 59_000_000), ("context", 15)),
                engines=(("onnxruntime", "1.0"), ("openvino", "2026.1")))  # fmt: skip
    return PlanKey(**{**base, **changes})  # type: ignore[arg-type]


ORT = EngineTimings("onnxruntime", "fp32", {62: 250.0, 94: 380.0}, {62: 40.0, 94: 50.0},
                    {2: 900.0})  # fmt: skip
GOOD = Measurements(600.0, (ORT,), 15, {128: 700.0})


def _tamper(data: dict[str, Any], change: str) -> None:
    m, engine = data["measurements"], data["measurements"]["engines"][0]
    if change == "memory all 0":
        m["floor_mb"] = 0
        m["ort_peak_mb"] = {k: 0 for k in m["ort_peak_mb"]}
        engine["memory_mb"] = {k: 0 for k in engine["memory_mb"]}
    elif change == "NaN call times":
        engine["call_ms"] = {k: math.nan for k in engine["call_ms"]}
    elif change == "thread count -1":
        engine["threads_ms"] = {"-1": 900.0}
    elif change == "thread count 100000":
        engine["threads_ms"] = {"100000": 900.0}
    elif change == "layout 999999":
        engine["layout"] = 999999
    elif change == "1e400":
        m["floor_mb"] = math.inf
    elif change == "negative memory":
        engine["memory_mb"] = {k: -5.0 for k in engine["memory_mb"]}
    elif change == "another context":
        m["context"] = 99


@pytest.mark.parametrize(
    "change",
    ["memory all 0", "NaN call times", "thread count -1", "thread count 100000",
     "layout 999999", "1e400", "negative memory", "another context"],
)  # fmt: skip
def test_kept_figures_that_make_no_sense_are_not_trusted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, change: str
) -> None:
    """A plan file whose memory figures were zero made the plan "~1 MB peak"."""
    store = PlanStore(tmp_path)
    store.save(key(), GOOD, "2026-12-06")
    assert store.load(key()) == (GOOD, "2026-12-06")
    path = store.path(key())
    data = json.loads(path.read_text())
    _tamper(data, change)
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING):
        assert store.load(key()) is None
    assert str(path) in caplog.text and "measuring again" in caplog.text


def test_a_plan_file_of_zeros_is_measured_again_not_planned_at_1_mb(
    tmp_path: Path, big_voice: VoiceManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(monkeypatch, Children())
    plan = planner(tmp_path).plan_for(big_voice)
    (path,) = (tmp_path / "plans").glob("*.json")
    data = json.loads(path.read_text())
    for e in data["measurements"]["engines"]:
        e["memory_mb"] = {k: 0 for k in e["memory_mb"]}
    data["measurements"]["floor_mb"] = 0
    path.write_text(json.dumps(data))
    rebuilt = use(monkeypatch, Children())
    replanned = planner(tmp_path).plan_for(big_voice)
    assert replanned == plan and replanned.peak_mb is not None and replanned.peak_mb > 100
    assert rebuilt.asked == []  # put together again from the steps kept, which make sense
    data = json.loads(path.read_text())
    for record in data["steps"].values():  # and those tampered too: measured again
        if "memory_mb" in record.get("result", {}):
            record["result"]["memory_mb"] = {k: 0 for k in record["result"]["memory_mb"]}
    data["measurements"]["floor_mb"] = 0
    path.write_text(json.dumps(data))
    again = use(monkeypatch, Children())
    assert planner(tmp_path).plan_for(big_voice) == plan
    assert {s[0] for s in again.steps} == {"decoder"}


def test_a_deeply_nested_plan_file_is_measured_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = PlanStore(tmp_path)
    store.path(key()).write_text("[" * 100_000)
    with caplog.at_level(logging.WARNING):
        assert store.load(key()) is None
    assert "nests" in caplog.text


# -- two processes measuring one voice (D6) -----------------------------------------------


class SlowMeasure:
    """A measuring that takes a while (the whole plan, stood in for)."""

    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, job: MeasureJob, steps: object = None) -> Measurements:
        with self.lock:
            self.count += 1
        time.sleep(1.5)
        engine = EngineTimings("onnxruntime", "fp32", {n: 4.0 * n for n in job.lengths[ORT_FP32]},
                               {n: 40.0 for n in job.lengths[ORT_FP32]})  # fmt: skip
        return Measurements(600.0, (engine,), job.context,
                            {w: 700.0 for w in job.ort_windows})  # fmt: skip


def test_two_measurers_of_one_voice_measure_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Both measured the whole plan (1,288 s each, one alone took 989 s)."""
    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: 59_000_000)
    manifest = read_manifest(TINY)
    measure = SlowMeasure()
    plans: list[object] = []

    def start() -> None:  # each its own planner and store: two processes' worth
        plans.append(planner(tmp_path, measure_fn=measure).plan_for(manifest))

    threads = [threading.Thread(target=start) for _ in range(2)]
    with caplog.at_level(logging.WARNING):
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert measure.count == 1 and len(plans) == 2 and plans[0] == plans[1]
    assert "another process is measuring the plan for tiny" in caplog.text


_HOLDER = """
import sys, time
from pathlib import Path
from yomiage.runtime.plan.lock import measuring_turn
with measuring_turn(Path(sys.argv[1]), Path(sys.argv[2])) as held:
    print("held" if held else "not held", flush=True)
    time.sleep(600)
"""


def _holder(store: PlanStore, plan_key: PlanKey) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(store.lock_path(plan_key)), str(store.note_path(plan_key))],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_measurer_whose_holder_died_measures_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: 59_000_000)
    manifest = read_manifest(TINY)
    waiting = planner(tmp_path, measure_fn=(measure := SlowMeasure()))
    assert waiting.store is not None
    holder = _holder(waiting.store, waiting._key(manifest))
    try:
        done: list[object] = []
        thread = threading.Thread(target=lambda: done.append(waiting.plan_for(manifest)))
        with caplog.at_level(logging.WARNING):
            thread.start()
            deadline = time.monotonic() + 60
            while "waiting for its result" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.05)
            assert measure.count == 0 and not done  # it waits for the holder
            holder.kill()
            thread.join(120)
        assert measure.count == 1 and done
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_that_makes_no_progress_is_waited_for_a_bounded_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from yomiage.runtime.plan.lock import measuring_turn

    store = PlanStore(tmp_path)
    holder = _holder(store, key())
    try:
        turn = measuring_turn(store.lock_path(key()), store.note_path(key()), stall_s=1.0)
        with caplog.at_level(logging.WARNING), turn as held:
            assert held is False  # measured here too, without the lock
        assert "made no progress for 1 s; measuring here too" in caplog.text
    finally:
        holder.kill()
        holder.wait()


# -- a cache that cannot be written (D10) ---------------------------------------------


def test_an_unwritable_cache_is_said_at_warning_up_front(
    tmp_path: Path,
    big_voice: VoiceManifest,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It said "(kept in …/plans)" at WARNING, then "cannot keep" at INFO only, and every
    start measured again. (A file where the cache's folder should be: as root, a
    read-only mode stops nothing.)"""
    (tmp_path / "cache").write_text("not a folder")
    use(monkeypatch, Children())
    with caplog.at_level(logging.WARNING):
        plan = planner(tmp_path / "cache").plan_for(big_voice)
    assert plan.basis.startswith("measured on")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    said = next(w for w in warnings if w.startswith("cannot keep the plan in"))
    assert (
        "it will be measured again at every start; YOMIAGE_PLAN_MEASURE=0 skips measuring" in said
    )
    assert warnings.index(said) < next(
        i for i, w in enumerate(warnings) if w.startswith("choosing how to run")
    )
    assert not any("kept in" in w for w in warnings)


# -- a budget nothing fits (item 14) --------------------------------------------------


def test_no_option_fitting_the_budget_is_said_at_warning(
    tmp_path: Path,
    big_voice: VoiceManifest,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    use(monkeypatch, Children())
    with caplog.at_level(logging.WARNING):
        plan = planner(tmp_path, budget_mb=300).plan_for(big_voice)
    assert any(r.levelno == logging.WARNING and "no option fits the budget" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    assert not plan.fits_budget  # for /ready to say so


def test_a_plan_kept_before_its_steps_were_is_used_as_it_is(
    tmp_path: Path, big_voice: VoiceManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade does not measure again: a file of c453008 holds no steps."""
    use(monkeypatch, Children())
    plan = planner(tmp_path).plan_for(big_voice)
    (path,) = (tmp_path / "plans").glob("*.json")
    data = json.loads(path.read_text())
    del data["steps"], data["retry"]
    path.write_text(json.dumps(data))
    again = use(monkeypatch, Children())
    assert planner(tmp_path).plan_for(big_voice) == plan and again.asked == []
