"""The flow on ONNX Runtime float32 against OpenVINO float32 and bfloat16 and ONNX
Runtime with bfloat16 weights, as requests run it (issue 24 item 2; issues 32, 48):
OpenVINO padded to the span's bucket with its mask of real frames
(runtime/flow_lengths.py), ONNX Runtime at the span's own length.

Run: .venv/bin/python benchmarks/flow_engines.py BUNDLE [--threads 2] [--frames 40,141,300,495]

BUNDLE is a full-size bundle (``yomiage convert``); its flow with bfloat16 weights is
made into a temporary folder (runtime/light_flows.py). For each length: median of 5
calls on each engine after one warm-up, and the SNR of each other output against ONNX
Runtime float32 (the exact path) on the same random latent, of the flow's output and
of the audio the bundle's decoder (ONNX Runtime float32) makes of it. Then, in a fresh
process per engine, the resident memory the flow adds: loaded, after one 141-frame
span, and after every length it may run at (OpenVINO keeps what it made for each; ONNX
Runtime's arena grows to the longest; mapped weights count once read).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.runtime.chunking import FLOW_SPAN_FRAMES
from yomiage.runtime.derived import flow_key
from yomiage.runtime.engines.memory import release_free_memory
from yomiage.runtime.engines.placement import (
    OPENVINO_BF16,
    OPENVINO_FP32,
    ORT_BF16,
    ORT_FP32,
    Placement,
)
from yomiage.runtime.engines.sessions import Sessions, probe_speaker
from yomiage.runtime.flow_lengths import FRAME_MASK_INPUT, flow_buckets_up_to, padded_span
from yomiage.runtime.light_flows import LightFlows

Array = npt.NDArray[np.float32]
ENGINES = {"ONNX Runtime fp32": ORT_FP32, "OpenVINO fp32": OPENVINO_FP32,
           "OpenVINO bf16": OPENVINO_BF16, "ONNX Runtime bf16 weights": ORT_BF16}  # fmt: skip
REFERENCE = "ONNX Runtime fp32"


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _snr_db(reference: Array, other: Array) -> float:
    noise = float(np.sum((reference - other) ** 2))
    return float(10 * np.log10(float(np.sum(reference**2)) / max(noise, 1e-30)))


def _median_ms(call: Any, repeats: int = 5) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def _flow_call(graph: Any, z_p: Array, speaker: dict[str, Any]) -> Array:
    """One span through ``graph`` as a voice runs it (padded where the engine keeps shapes)."""
    if not graph.few_shapes:
        return graph.run({"z_p": z_p, **speaker})[0]
    padded, mask = padded_span(z_p)
    return graph.run({"z_p": padded, FRAME_MASK_INPUT: mask, **speaker})[0][:, :, : z_p.shape[2]]


def _memory(path: Path, placement: Placement, threads: int) -> dict[str, float]:
    """In this (fresh) process: MB added by loading the flow, one span, every length."""
    sessions = Sessions(threads, openvino=placement.engine == "openvino")
    before = _rss_mb()
    graph = sessions.open(path, placement, frame_mask=True)
    loaded = _rss_mb()
    speaker = probe_speaker(graph, np.random.default_rng(0))
    z_p = np.zeros((1, 192, 141), np.float32)
    _flow_call(graph, z_p, speaker)
    release_free_memory()
    one = _rss_mb()
    lengths = flow_buckets_up_to(FLOW_SPAN_FRAMES) if graph.few_shapes else (FLOW_SPAN_FRAMES,)
    for frames in lengths:
        _flow_call(graph, np.zeros((1, 192, frames), np.float32), speaker)
    release_free_memory()
    return {"loaded": loaded - before, "one": one - before, "every": _rss_mb() - before}


def _flow_graph(bundle: Path, placement: Placement, made: Path) -> Path:
    """The flow graph ``placement`` runs: the bundle's, or its light one made under ``made``."""
    if placement != ORT_BF16:
        return bundle / "flow.onnx"
    files = json.loads((bundle / "voice.json").read_text())["files"]
    return LightFlows(made).flow(bundle / "flow.onnx", flow_key(files) or "bench").graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frames", default="40,141,300,495")
    parser.add_argument("--made", type=Path, help=argparse.SUPPRESS)  # where the light flow is
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    made = args.made or Path(tempfile.mkdtemp(prefix="flow-engines-"))
    if args.memory_of:
        placement = ENGINES[args.memory_of]
        path = _flow_graph(args.bundle, placement, made)
        print(json.dumps(_memory(path, placement, args.threads)))
        return
    sessions = Sessions(args.threads)
    graphs = {name: sessions.open(_flow_graph(args.bundle, p, made), p, frame_mask=True)
              for name, p in ENGINES.items()}  # fmt: skip
    decoder = sessions.open(args.bundle / "decoder.onnx", ORT_FP32)
    reference = graphs[REFERENCE]
    rng = np.random.default_rng(0)
    speaker = probe_speaker(reference, rng)
    others = [name for name in ENGINES if name != REFERENCE]
    print(f"machine: {platform.processor() or platform.machine()}, {args.threads} threads\n")
    print("| frames | " + " | ".join(f"{n} ms" for n in ENGINES) + " | "
          + " | ".join(f"SNR {n}: flow / audio dB" for n in others) + " |")  # fmt: skip
    print("| --- |" + " --- |" * (len(ENGINES) + len(others)))
    for frames in (int(f) for f in args.frames.split(",")):
        z_p = rng.standard_normal((1, 192, frames)).astype(np.float32)
        expected = _flow_call(reference, z_p, speaker)
        audio = decoder.run({"z": expected, **speaker})[0]
        row, snrs = [], []
        for name, graph in graphs.items():
            row.append(f"{_median_ms(lambda g=graph, z=z_p: _flow_call(g, z, speaker)):.0f}")
            if name != REFERENCE:
                out = _flow_call(graph, z_p, speaker)
                heard = decoder.run({"z": out, **speaker})[0]
                snrs.append(f"{_snr_db(expected, out):.1f} / {_snr_db(audio, heard):.1f}")
        print(f"| {frames} | {' | '.join(row + snrs)} |")
    print("\nMB the flow adds, each engine in a fresh process: loaded / after a 141-frame "
          "span / after every length it may run at")  # fmt: skip
    for name in ENGINES:
        out = subprocess.run([sys.executable, __file__, str(args.bundle), "--threads",
                              str(args.threads), "--memory-of", name, "--made", str(made)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        mb = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"- {name}: +{mb['loaded']:.0f} / +{mb['one']:.0f} / +{mb['every']:.0f}")


if __name__ == "__main__":
    main()
