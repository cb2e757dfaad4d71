"""Could a 1-D convolution do less arithmetic as ONNX operators? Winograd F(m, k) against Conv.

Run: .venv/bin/python benchmarks/winograd_conv.py [--length 8192] [--channels 256 128 64]
     [--threads 2]

The decoder's residual blocks are convolutions of kernels 3, 7 and 11 that already run at
the CPU's matrix-multiply rate (RESULTS.md, issue 32), so at equal output only less
arithmetic could make them faster. Winograd's minimal filtering computes m outputs of a
k-tap filter from m + k - 1 products instead of m * k: 1.5-3x fewer multiplications for
these kernels. This writes one convolution both ways as an ONNX graph, with the same
seeded weights and input, and times each on ONNX Runtime (fastest of 7 calls after one):

* ``Conv``, as the exported decoder has it;
* the Winograd form in standard operators: tiles of m + k - 1 samples gathered by
  reshapes and slices, the input transform and the output transform as small matrix
  products, and one batched MatMul of the transformed weights per tile point.

Each row prints both times, the ratio and the largest error relative to the largest
output (float32 Winograd loses accuracy as m + k grows). Interpolation points 0, ±1, ±2,
±1/2, ±3, ±1/3, ... and infinity (Toom-Cook).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np

POINTS = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1 / 3, -1 / 3, 4.0, -4.0]


def toom_cook(m: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T [m, n], G [n, k], B^T [n, n]) with y = A^T ((G w) * (B^T d)) the correlation
    of a tile d of n = m + k - 1 samples with the k taps w."""
    n = m + k - 1
    finite = POINTS[: n - 1]

    def vandermonde(width: int) -> np.ndarray:
        rows = [[p**e for e in range(width)] for p in finite]
        rows.append([0.0] * (width - 1) + [1.0])  # the point at infinity: the top term
        return np.array(rows)

    interpolate = np.linalg.inv(vandermonde(n))
    return vandermonde(m).T, vandermonde(k), interpolate.T


def conv_graph(weight: np.ndarray, length: int) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    channels, _, k = weight.shape
    shape = [1, channels, length]
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[(k - 1) // 2] * 2)
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(weight, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def winograd_graph(weight: np.ndarray, length: int, m: int) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    channels, _, k = weight.shape
    n = m + k - 1
    at, g, bt = toom_cook(m, k)
    tiles = -(-length // m)
    shifts = -(-n // m)  # whole tiles a tile of n samples spans
    nodes: list[Any] = []
    consts: list[Any] = []

    def const(name: str, value: Any, dtype: Any = np.int64) -> str:
        consts.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(kind: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [output], **attrs))
        return output

    pad = (k - 1) // 2
    right = (tiles + shifts) * m - length - pad
    x = op("Pad", ["x", const("pads", [0, 0, pad, 0, 0, right])], "padded")
    x = op("Reshape", [x, const("by_tile", [channels, tiles + shifts, m])], "by_tile_x")
    one = const("axis1", [1])
    parts = [
        op("Slice", [x, const(f"from{s}", [s]), const(f"to{s}", [s + tiles]), one], f"shift{s}")
        for s in range(shifts)
    ]
    x = op("Concat", parts, "spans", axis=2)  # [C, tiles, shifts * m]
    x = op("Slice", [x, const("zero", [0]), const("n", [n]), const("axis2", [2])], "tile_x")
    x = op("Transpose", [x], "points_first", perm=[2, 1, 0])  # [n, tiles, C]
    x = op("Reshape", [x, const("flat", [n, tiles * channels])], "flat_x")
    x = op("MatMul", [const("bt", bt, np.float32), x], "transformed")
    x = op("Reshape", [x, const("per_point", [n, tiles, channels])], "per_point_x")
    w = np.einsum("pk,oik->pio", g, weight.astype(np.float64))  # [n, C_in, C_out]
    x = op("MatMul", [x, const("w_points", w, np.float32)], "products")  # [n, tiles, C]
    x = op("Reshape", [x, const("flat_out", [n, tiles * channels])], "flat_products")
    x = op("MatMul", [const("at", at, np.float32), x], "outputs")  # [m, tiles * C]
    x = op("Reshape", [x, const("out_tiles", [m, tiles, channels])], "out_tiles_x")
    x = op("Transpose", [x], "channels_first", perm=[2, 1, 0])  # [C, tiles, m]
    x = op("Reshape", [x, const("joined", [1, channels, tiles * m])], "joined_x")
    op("Slice", [x, const("start", [0]), const("end", [length]), const("time", [2])], "y")
    shape = [1, channels, length]
    graph = helper.make_graph(
        nodes,
        "winograd",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        consts,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def fastest(model: Any, x: np.ndarray, threads: int) -> tuple[float, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    out = s.run(None, {"x": x})[0]
    times = []
    for _ in range(7):
        start = time.perf_counter()
        s.run(None, {"x": x})
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--length", type=int, default=8192, help="samples per call")
    parser.add_argument("--channels", type=int, nargs="+", default=[256, 128, 64])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import onnxruntime as ort

    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} logical "
        f"CPUs, ONNX Runtime {ort.__version__}, {args.threads} threads, {args.length} samples"
    )
    print("| channels | kernel | Conv ms | F(2,k) ms (x Conv) | F(4,k) ms (x Conv) | error 2 / 4 |")
    print("| --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for channels in args.channels:
        for k in (3, 7, 11):
            weight = (rng.standard_normal((channels, channels, k)) * 0.05).astype(np.float32)
            x = rng.standard_normal((1, channels, args.length)).astype(np.float32)
            direct, reference = fastest(conv_graph(weight, args.length), x, args.threads)
            cells, errors = [], []
            for m in (2, 4):
                took, out = fastest(winograd_graph(weight, args.length, m), x, args.threads)
                cells.append(f"{took * 1e3:.1f} ({direct / took:.2f}x)")
                errors.append(f"{np.abs(out - reference).max() / np.abs(reference).max():.0e}")
            print(
                f"| {channels} | {k} | {direct * 1e3:.1f} | {cells[0]} | {cells[1]} | "
                f"{' / '.join(errors)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
