"""The flow on ONNX Runtime float32 against OpenVINO float32 and bfloat16 (issue 24, item 2).

Run: .venv/bin/python benchmarks/flow_engines.py BUNDLE [--threads 2] [--frames 150,300,500]

BUNDLE is a full-size bundle (``yomiage convert``). For each length: median of 5 calls
on each engine after one warm-up, and the SNR of OpenVINO's output against ONNX
Runtime float32 (the exact path) on the same random latent. Then, in the same
process, what OpenVINO bfloat16 keeps in memory as it meets new sentence lengths
(RSS after compiling, after the longest length, and after each new one), since the
flow sees each sentence's own length.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.runtime.onnx_session import load_session, session_options

Array = npt.NDArray[np.float32]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frames", default="150,300,500")
    args = parser.parse_args()
    import openvino as ov

    path = args.bundle / "flow.onnx"
    session = load_session(path, session_options(args.threads))
    widths = {i.name: i.shape[1] for i in session.get_inputs()}
    core = ov.Core()
    rng = np.random.default_rng(0)

    def speaker() -> dict[str, np.ndarray]:
        """The speaker as this flow takes it: sid (speaker tables) or a random g."""
        if "g" not in widths:
            return {"sid": np.zeros(1, np.int64)}
        return {"g": rng.standard_normal((1, widths["g"], 1)).astype(np.float32)}

    def compile_flow(precision: str) -> Any:
        config = {"INFERENCE_NUM_THREADS": args.threads, "INFERENCE_PRECISION_HINT": precision,
                  "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}  # fmt: skip
        return core.compile_model(str(path), "CPU", config)

    before = _rss_mb()
    model = compile_flow("bf16")
    request = model.create_infer_request()
    compiled_mb = _rss_mb()
    lengths = [700, *range(100, 701, 37)]
    seen = []
    for frames in lengths:
        request.infer({"z_p": rng.standard_normal((1, 192, frames)).astype(np.float32),
                       **speaker()})  # fmt: skip
        seen.append(_rss_mb())
    print(f"OpenVINO bf16 flow memory: compiled +{compiled_mb - before:.0f} MB; after a "
          f"{lengths[0]}-frame sentence +{seen[0] - compiled_mb:.0f} MB more; after "
          f"{len(lengths) - 1} more new lengths +{seen[-1] - seen[0]:.0f} MB more "
          f"({(seen[-1] - seen[0]) / (len(lengths) - 1):.1f} MB a length)")  # fmt: skip

    del model, request
    compiled = {"f32": compile_flow("f32"), "bf16": compile_flow("bf16")}
    print(f"machine: {platform.processor() or platform.machine()}, {args.threads} threads\n")
    columns = ("frames", "ONNX Runtime f32", "OpenVINO f32", "OpenVINO bf16",
               "SNR OpenVINO f32", "SNR bf16")  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("| --- | --- | --- | --- | --- | --- |")
    for frames in (int(f) for f in args.frames.split(",")):
        feeds = {
            "z_p": rng.standard_normal((1, 192, frames)).astype(np.float32),
            **speaker(),
        }
        reference = session.run(None, feeds)[0]
        row = [f"{_median_ms(lambda f=feeds: session.run(None, f)):.0f} ms"]
        snrs = []
        for model in compiled.values():
            request = model.create_infer_request()
            out = np.array(request.infer(feeds)[model.outputs[0]])
            row.append(f"{_median_ms(lambda r=request, f=feeds: r.infer(f)):.0f} ms")
            snrs.append(f"{_snr_db(reference, out):.1f} dB")
        print(f"| {frames} | {' | '.join(row + snrs)} |")


if __name__ == "__main__":
    main()
