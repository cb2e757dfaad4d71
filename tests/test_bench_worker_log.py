"""The bench worker shows the plan's measuring as it goes and keeps its minutes out of
the load time (issue 49, 3: "[1/2] 1 thread, decoder auto: loading…" stood for 8 minutes
and "load s" said 496.47). The clock is a fake one: nothing is timed."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from yomiage.cli import bench_worker
from yomiage.cli.bench_worker import BenchJob, PlanLog


def _record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_the_plan_measuring_steps_are_sent_and_timed_apart_from_loading(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = iter([10.0, 106.6, 506.0, 507.0])
    monkeypatch.setattr(bench_worker.time, "perf_counter", lambda: next(clock))
    log = PlanLog()
    log.handle(_record("yomiage.runtime.plan.planner", logging.WARNING,
                       "choosing how to run v on this CPU: measuring 2 engine(s), once"))  # fmt: skip
    log.handle(_record("yomiage.runtime.plan.measure", logging.WARNING,
                       "measuring the decoder on openvino bf16 (3/8, once per CPU)"))  # fmt: skip
    log.handle(_record("yomiage.runtime.plan.planner", logging.INFO, "plan for v: decoder ..."))
    log.handle(_record("yomiage.runtime.onnx_voice", logging.INFO, "opened the decoder"))
    assert log.measure_s == pytest.approx(496.0)
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["message"] for e in events] == [
        "choosing how to run v on this CPU: measuring 2 engine(s), once",
        "measuring the decoder on openvino bf16 (3/8, once per CPU)",
    ]  # INFO is not shown
    assert {e["event"] for e in events} == {"log"}


def test_a_kept_plan_takes_no_measuring_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = iter([3.0, 4.0])
    monkeypatch.setattr(bench_worker.time, "perf_counter", lambda: next(clock))
    log = PlanLog()
    log.handle(_record("yomiage.runtime.plan.store", logging.INFO, "read the plan"))
    log.handle(_record("yomiage.runtime.plan.planner", logging.INFO, "plan for v: decoder ..."))
    assert log.measure_s == 0.0 and capsys.readouterr().out == ""


def test_the_worker_sends_the_plans_measuring_steps_and_keeps_them_out_of_load_s(
    test_voice: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The worker as bench runs it, in this process: the tiny voice's decoder taken for a
    full-size one, so the planner measures, and each measuring process refused (no
    minutes spent), so the plan falls back after its steps were sent."""
    from yomiage.engine_spec import EngineSpec
    from yomiage.runtime.plan.measure import MeasureError

    def refuse(args: dict[str, Any]) -> dict[str, Any]:
        raise MeasureError(f"measuring {args['what']} refused by the test")

    monkeypatch.setenv("YOMIAGE_PLAN_MEASURE", "1")
    monkeypatch.setattr("yomiage.runtime.plan.planner.graph_bytes", lambda path: 59_000_000)
    monkeypatch.setattr("yomiage.runtime.plan.measure._child", refuse)
    spec = EngineSpec(voices=(("tiny", str(test_voice)),), cache_dir=str(tmp_path), threads=1)
    bench_worker.measure(BenchJob(spec, (), 0))
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    logs = [e["message"] for e in events if e["event"] == "log"]
    assert logs[0].startswith("choosing how to run tiny on this CPU: measuring")
    assert any(m.startswith("measuring the decoder on onnxruntime fp32") for m in logs)
    assert any(m.startswith("could not measure a plan") for m in logs)
    (loaded,) = [e for e in events if e["event"] == "loaded"]
    assert "fallback: measuring failed" in loaded["plan"]
    assert loaded["plan_measure_s"] > 0 and loaded["load_s"] > 0
    assert logging.getLogger("yomiage").level == logging.NOTSET  # left as it was
