"""Where one graph's time goes, by operator, and how near its convolutions run to the CPU's peak.

Run: .venv/bin/python benchmarks/graph_ops.py GRAPH.onnx [--frames 146 495] [--threads 2]

GRAPH is a float-input graph of a bundle (``flow.onnx``, ``decoder.onnx``): every dynamic
axis is set to the frame count, seeded normal inputs. For each length: ONNX Runtime's own
profile of 8 calls after 3 warm-ups, the kernel time per call by operator type, and the
convolutions' arithmetic rate (2 x weights x output length per call, from the profile's
shapes), in all and by output channels and kernel. The same run times a float32 2048 x 2048
matrix product on the same threads, by ONNX Runtime (MatMul) and by numpy: the rates a
convolution written as a matrix product can reach on this CPU.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_ab

CALLS = 8


def matmul_rates(threads: int) -> tuple[float, float]:
    """GFLOP/s of a float32 2048² matrix product (fastest of 5) with ``threads`` threads:
    ONNX Runtime's MatMul, numpy's."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    from threadpoolctl import threadpool_limits

    size = 2048
    a = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        "matmul",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [size, size])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [size, size])],
        [numpy_helper.from_array(a, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    session.run(None, {"a": a})
    on_ort = min(_timed(lambda: session.run(None, {"a": a})) for _ in range(5))
    with threadpool_limits(threads):
        a @ a
        on_numpy = min(_timed(lambda: a @ a) for _ in range(5))
    flops = 2 * size**3 / 1e9
    return flops / on_ort, flops / on_numpy


def _timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def profile(path: str, frames: int, threads: int) -> list[dict[str, Any]]:
    """ONNX Runtime's profile events of the kernels of ``CALLS`` calls after 3 warm-ups."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    options.enable_profiling = True
    options.profile_file_prefix = f"/tmp/graph_ops_{os.getpid()}"
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = graph_ab.feeds(session, frames, 0)
    for _ in range(3):
        session.run(None, feeds)
    session.end_profiling()  # drops the warm-ups
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    session.run(None, feeds)  # the first call of a session is not profiled below
    for _ in range(CALLS):
        session.run(None, feeds)
    written = Path(session.end_profiling())
    events = json.loads(written.read_text())
    written.unlink()
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    return kernels[len(kernels) // (CALLS + 1) :]  # the timed calls only


def conv_flops(event: dict[str, Any]) -> float:
    """2 x weights x output length of one Conv call (bias included: off by < 1%)."""
    args = event["args"]
    weights = int(args.get("parameter_size", 0)) / 4
    shapes = args.get("output_type_shape", [{}])
    dims = next(iter(shapes[0].values()), [0]) if shapes else [0]
    return 2 * weights * (dims[-1] if dims else 0)


def conv_shape(event: dict[str, Any]) -> tuple[int, int, int]:
    """(input channels, output channels, kernel) of a Conv call, from its profile shapes."""
    args = event["args"]

    def channels(key: str) -> int:
        shapes = args.get(key) or [{}]
        dims = next(iter(shapes[0].values()), [])
        return int(dims[1]) if len(dims) > 1 else 0

    into, out = channels("input_type_shape"), channels("output_type_shape")
    weights = int(args.get("parameter_size", 0)) / 4
    return into, out, round(weights / (into * out)) if into and out else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("graph")
    parser.add_argument("--frames", type=int, nargs="+", default=[146, 495])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import onnxruntime as ort

    peak, numpy_rate = matmul_rates(args.threads)
    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} logical "
        f"CPUs, ONNX Runtime {ort.__version__}, {args.threads} threads; float32 2048² matrix "
        f"product: ONNX Runtime {peak:.0f} GFLOP/s, numpy {numpy_rate:.0f} GFLOP/s"
    )
    for frames in args.frames:
        kernels = profile(args.graph, frames, args.threads)
        by_op: collections.Counter[str] = collections.Counter()
        Shape = tuple[int, int, int]
        by_shape: dict[Shape, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
        for e in kernels:
            by_op[e["args"]["op_name"]] += e["dur"]
            if e["args"]["op_name"] in ("Conv", "FusedConv"):
                shape = conv_shape(e)
                by_shape[shape][0] += conv_flops(e)
                by_shape[shape][1] += e["dur"] / 1e6
        total = sum(by_op.values())
        print(f"\n{Path(args.graph).name}, {frames} frames: {total / CALLS / 1e3:.1f} ms a call")
        print("| operator | ms a call | share |")
        print("| --- | --- | --- |")
        for name, micros in by_op.most_common(8):
            print(f"| {name} | {micros / CALLS / 1e3:.1f} | {100 * micros / total:.0f}% |")
        if by_shape:
            flops = sum(f for f, _ in by_shape.values())
            seconds = sum(t for _, t in by_shape.values())
            print(f"convolutions: {flops / seconds / 1e9:.0f} GFLOP/s, of which")
            print("| channels in → out | kernel | ms a call | GFLOP/s |")
            print("| --- | --- | --- | --- |")
            for (into, out, kernel), (f, t) in sorted(by_shape.items(), key=lambda i: i[0][1]):
                if t / CALLS >= 1e-3:  # the 1-ms-and-up convolutions
                    rate = f / t / 1e9
                    print(f"| {into} → {out} | {kernel} | {t / CALLS * 1e3:.1f} | {rate:.0f} |")


if __name__ == "__main__":
    main()
