"""The ``-v`` line per voice that ``generate`` and ``serve`` log."""

from __future__ import annotations

from yomiage.cli.runtime_info import voice_runtime_lines
from yomiage.runtime.engines.cpu import physical_cores


def test_each_voice_gets_one_line_with_engine_precision_and_threads() -> None:
    runtimes = {"tiny": "decoder bf16 on openvino", "jvnv": "one graph, fp32 on onnxruntime"}
    assert voice_runtime_lines(runtimes, 2, "q8") == [
        "voice tiny: decoder bf16 on OpenVINO, BERT q8, 2 threads",
        "voice jvnv: one graph, fp32 on ONNX Runtime, BERT q8, 2 threads",
    ]
    cores = physical_cores()
    [line] = voice_runtime_lines({"tiny": "fp32 on torch cpu"}, None)
    assert (
        line
        == f"voice tiny: fp32 on PyTorch cpu, {cores} thread{'s' * (cores != 1)} (one per core)"
    )


def test_a_voice_on_a_measured_thread_count_says_so_apart_from_its_bert() -> None:
    runtimes = {"big": "decoder fp32 on onnxruntime, 4 threads (measured)"}
    assert voice_runtime_lines(runtimes, 2, "q8") == [
        "voice big: decoder fp32 on ONNX Runtime, 4 threads (measured), BERT q8 on 2 threads"
    ]
