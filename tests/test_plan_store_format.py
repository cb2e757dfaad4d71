"""A plan file of format 10 (float32 spelt "f32") is read once, translated to format 11
("fp32") and written back, never mis-read and never measured again.

``tests/data/plan_format_10.json`` is the file c453008's store wrote (by
``tests/plan_replay_record.py``): measurements of ONNX Runtime float32 and OpenVINO
bfloat16, the flow on both, and OpenVINO float32 left out as unable to run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from tests.test_plan import CountingMeasure, big_voice, planner
from yomiage.runtime.engines.placement import OPENVINO_BF16, OPENVINO_FP32, ORT_FP32
from yomiage.runtime.plan.steps import step_name
from yomiage.runtime.plan.store import FORMAT_VERSION, PlanKey, PlanStore

OLD = json.loads((Path(__file__).parent / "data" / "plan_format_10.json").read_text("utf-8"))
# The key that file was written for, in today's format.
KEY = PlanKey("Test CPU", ("avx2", "avx512_bf16"), 2, (2, 4),
              (("decoder", 59_000_000), ("context", 15)),
              (("onnxruntime", "1.0"), ("openvino", "2026.1")))  # fmt: skip


def _old_file(root: Path, data: dict | None = None) -> Path:
    """The format-10 file where c453008's store kept it for :data:`KEY`."""
    path = root / OLD["name"]
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data if data is not None else OLD["file"]))
    return path


def test_a_format_10_file_is_translated_once_and_written_back(tmp_path: Path) -> None:
    assert FORMAT_VERSION == 11 and KEY.format == 11
    store = PlanStore(tmp_path)
    old = _old_file(tmp_path)
    assert store.path(replace(KEY, format=10)) == old  # the same key, the old format
    kept = store.load(KEY)
    assert kept is not None
    measured, when = kept
    assert when == "2026-11-27"
    assert {e.placement for e in measured.engines} == {ORT_FP32, OPENVINO_BF16}
    assert measured.unavailable == (OPENVINO_FP32,)
    assert {f.placement for f in measured.flows} == {ORT_FP32, OPENVINO_BF16}
    assert measured.ort_peak_mb and measured.floor_mb == OLD["file"]["measurements"]["floor_mb"]
    # written back in format 11 under today's name, the old one gone
    assert not old.exists()
    new = json.loads(store.path(KEY).read_text())
    assert new["key"]["format"] == 11 and new["measured_at"] == "2026-11-27"
    assert '"f32"' not in store.path(KEY).read_text()
    assert store.load(KEY) == kept  # read as it is now


def test_the_planner_plans_from_a_format_10_file_without_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade keeps the plan measured before it: the planner's key for this voice,
    with its file of format 10 in the cache, plans from it and measures nothing."""
    manifest = big_voice(tmp_path, monkeypatch)
    measure = CountingMeasure(RuntimeError("measured again"))
    made = planner(tmp_path, measure)
    key = made._key(manifest)
    old = replace(key, format=10)
    data = {**OLD["file"], "key": json.loads(json.dumps(asdict(old)))}
    path = made.store.path(old)  # type: ignore[union-attr]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    plan = made.plan_for(manifest)
    assert measure.jobs == []
    assert plan.basis.startswith("measured on")
    assert not path.exists() and made.store.path(key).is_file()  # type: ignore[union-attr]
    again = planner(tmp_path, measure).plan_for(manifest)
    assert again.decoder == plan.decoder and measure.jobs == []


def test_the_kept_steps_of_a_format_10_file_keep_their_outcomes(tmp_path: Path) -> None:
    """Steps are named by their precision too: a stopped measuring of format 10 resumes
    from its steps under today's names, and what failed is measured again."""
    ort = step_name("decoder", "onnxruntime", "f32", 0, (62, 94), (2, 4))
    bf16 = step_name("decoder", "openvino", "bf16", 0, (62, 94), (2, 4))
    floor = step_name("floor", (128, 256))
    data = {key: value for key, value in OLD["file"].items() if key != "measurements"}
    data["steps"] = {ort: {"result": {"call_ms": {"62": 10.0}, "memory_mb": {"62": 5.0}}},
                     bf16: {"failed": 1, "why": "killed"}, floor: {"lasting": "no"}}  # fmt: skip
    data["retry"] = [bf16]
    _old_file(tmp_path, data)
    store = PlanStore(tmp_path)
    steps = store.steps(KEY)
    assert set(steps) == {
        step_name("decoder", "onnxruntime", "fp32", 0, (62, 94), (2, 4)),
        bf16,
        floor,
    }
    assert steps[step_name("decoder", "onnxruntime", "fp32", 0, (62, 94), (2, 4))]["result"]
    assert json.loads(store.path(KEY).read_text())["retry"] == [bf16]


def test_a_format_10_file_for_another_key_is_left_alone(tmp_path: Path) -> None:
    other = {**OLD["file"], "key": {**OLD["file"]["key"], "cpu": "Another CPU"}}
    old = _old_file(tmp_path, other)
    assert PlanStore(tmp_path).load(KEY) is None
    assert old.exists()
