"""Another layout of the decoder is timed call for call beside the bundle's own, in one
measuring process, and its times are the bundle's times that ratio (issue 48, fifth
pass: a layout timed in a process of its own came out 18% slower in a disturbed run
where it was 7-10% faster, and was shipped so). The measuring processes are stood in
for; the ratio's own arithmetic runs on stand-in graphs and a stand-in clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from yomiage.plan_child import measure as child_measure
from yomiage.runtime.engines.placement import ORT_FP32
from yomiage.runtime.plan import measure as plan_measure
from yomiage.runtime.plan.checks import step_problem
from yomiage.runtime.plan.job import MeasureJob
from yomiage.runtime.plan.measure import PAIRED_WINDOWS

LENGTHS = (23, 31, 47, 62, 94, 158, 286)
CONTEXT = 15


def _job(tmp_path: Path) -> MeasureJob:
    return MeasureJob(
        decoder=tmp_path / "decoder.onnx", bundle=tmp_path, bert=tmp_path / "bert.onnx",
        tokenizer=None, bert_precision="q8", threads=2, lengths={ORT_FP32: LENGTHS},
        thread_choices=(2,), threads_length=62, ort_windows=(128,), context=CONTEXT,
        compiled_dir=None, layouts={128: tmp_path / "decoders" / "x-2d128" / "decoder.onnx"},
    )  # fmt: skip


class Children:
    """The measuring processes: the bundle's layout at 4 ms a frame; the other at
    ``own`` ms a frame in its own process, ``ratio`` of the bundle's side by side."""

    def __init__(self, own: float, ratio: float | None) -> None:
        self.own, self.ratio = own, ratio
        self.asked: list[dict[str, Any]] = []

    def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(args)
        if args["what"] == "floor":
            return {"peak_mb": 600.0, "ort_peak_mb": {"128": 700.0}, "flow_ms": {"40": 5.0}}
        other = "paired_with" in args
        per_frame = self.own if other else 4.0
        figures = {
            "call_ms": {str(n): per_frame * n for n in args["lengths"]},
            "memory_mb": {str(n): 40.0 + n / 10 for n in args["lengths"]},
            "threads_ms": {},
            "balanced_trims": False,
        }
        return figures | ({"paired_ratio": self.ratio} if other else {})


@pytest.mark.parametrize(("own", "ratio", "want"), [(5.0, 0.9, 3.6), (3.0, 1.2, 4.8)])
def test_another_layout_is_timed_as_the_bundles_own_times_their_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own: float, ratio: float, want: float
) -> None:
    children = Children(own, ratio)
    monkeypatch.setattr(plan_measure, "_child", children)
    measured = plan_measure.measure(_job(tmp_path), progress=lambda message: None)
    bundles = measured.engine("onnxruntime", "fp32", 0)
    other = measured.engine("onnxruntime", "fp32", 128)
    assert bundles is not None and other is not None
    assert bundles.call_ms == {n: 4.0 * n for n in LENGTHS}
    assert other.call_ms == pytest.approx({n: want * n for n in LENGTHS})
    assert other.memory_mb == {n: 40.0 + n / 10 for n in LENGTHS}  # its own, as measured
    [layout_step] = [a for a in children.asked if "paired_with" in a]
    assert layout_step["paired_with"] == str(tmp_path / "decoder.onnx")
    assert layout_step["paired_lengths"] == [w + 2 * CONTEXT for w in PAIRED_WINDOWS]


def test_without_a_ratio_a_layout_keeps_its_own_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_measure, "_child", Children(3.0, None))
    measured = plan_measure.measure(_job(tmp_path), progress=lambda message: None)
    other = measured.engine("onnxruntime", "fp32", 128)
    assert other is not None and other.call_ms == {n: 3.0 * n for n in LENGTHS}


@pytest.mark.parametrize("ratio", [0.0, -1.0, 7.5, float("nan"), "fast", True])
def test_a_ratio_that_makes_no_sense_is_a_step_problem(ratio: object) -> None:
    assert step_problem({"call_ms": {"62": 10.0}, "paired_ratio": ratio})
    assert step_problem({"call_ms": {"62": 10.0}, "paired_ratio": None}) is None
    assert step_problem({"call_ms": {"62": 10.0}, "paired_ratio": 0.93}) is None


class Graph:
    """A graph whose every call moves the stand-in clock by ``ms`` (its first call,
    a warm-up, by ten times that)."""

    def __init__(self, clock: list[float], ms: float) -> None:
        self.clock, self.ms, self.calls = clock, ms, 0

    def run(self, feeds: dict[str, Any]) -> None:
        self.calls += 1
        self.clock[0] += (self.ms * (10 if self.calls == 1 else 1) + feeds["extra"]) / 1000


def test_the_ratio_is_the_fastest_calls_summed_one_over_the_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(child_measure.time, "perf_counter", lambda: clock[0])
    ours, theirs = Graph(clock, 9.0), Graph(clock, 10.0)
    calls = [{"extra": 0.0}, {"extra": 10.0}]  # 9 + 19 against 10 + 20
    assert child_measure._paired_ratio(ours, theirs, calls) == round(28 / 30, 4)
    assert ours.calls == theirs.calls == 2 * (1 + child_measure.TIMED_RUNS)
