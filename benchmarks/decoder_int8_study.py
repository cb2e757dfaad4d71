"""Lower-precision decoder graphs against FP32: speed on this CPU and the error they add.

Run: .venv/bin/python benchmarks/decoder_int8_study.py [--work /tmp/decprec] [--repeats 3]
         [--variants fp32,q8-conv-u8,...] [--no-tiny]

Needs the full-size synthetic voice and its bundle (see benchmarks/backends.py):
benchmarks/.cache/voice-full-0 and benchmarks/.cache/bundle-full-0; the tiny fixture
voice (/work/shared/fixtures/sbv2_tiny, or $YOMIAGE_FIXTURES/sbv2_tiny) is optional.

What it does, all files under --work:

1. Re-exports the un-optimized decoder graph from the torch voice (the bundle keeps
   only the ORT-optimized one, whose FusedConv nodes the quantizer cannot touch).
2. Makes realistic decoder inputs: Japanese sentences through the frontend, the q8
   BERT, the encoder and the flow of the bundle (as ``BundleVoice.decode_windows``
   does). Several sentences are calibration data, one held-out sentence is the test.
3. Builds each variant (decoder only): ONNX Runtime static int8 quantization in QDQ
   format, calibrated on the runtime's padded windows, with per-channel int8 weights
   and uint8 or int8 activations, Conv only or Conv+ConvTranspose, MinMax or
   Percentile calibration, some with the most error-prone convolutions left in FP32
   (``conv_pre``, whose input z has long tails; the first upsampling stage's
   resblocks; ``conv_post``); and an FP16-weight graph. The bf16 and fp16 Conv
   kernels of the CPU provider are probed on a one-node graph first.
4. Times every variant in a fresh process (2 intra-op threads, 1 inter-op,
   ORT_ENABLE_ALL, arena off: the runtime's session options) on the held-out
   sentence, decoded in windows of 128 frames with the voice's receptive field as
   context on each side, and whole. Rounds are interleaved (ABCABC...); each process
   does one warm-up and two timed passes per mode and keeps the faster; the table
   shows the median over rounds, and the best round (on a shared machine, the least
   disturbed one). "x RT" is seconds of audio per second of decoding.
5. Error against the FP32 bundle graph on the same input, same windowing: largest
   absolute sample difference and SNR = 10 log10(sum ref^2 / sum (ref - x)^2), for
   the full-size voice and (if present) the tiny fixture voice. Both voices have
   random weights scaled to realistic activations; a trained voice can differ.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from onnxruntime.quantization import CalibrationDataReader

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
FIXTURES = Path(os.environ.get("YOMIAGE_FIXTURES", "/work/shared/fixtures"))
TINY = FIXTURES / "sbv2_tiny"
WINDOW = 128
THREADS = 2
Array = npt.NDArray[np.float32]

CALIBRATION_TEXTS = (
    "こんにちは、いい天気ですね。",
    "明日の会議では、この問題について詳しく話し合う予定です。",
    "警察は、現場の防犯カメラの映像を詳しく調べています。",
    "えっ！？本当に……そうなの？",
    "駅前の小さな喫茶店で、古い友人と偶然再会しました。",
)
HELD_OUT_TEXT = "山の頂上にたどり着いたとき、眼下に広がる雲海の美しさに、私たちは言葉を失いました。"


@dataclass(frozen=True)
class Variant:
    """How one decoder graph is made from the FP32 one."""

    kind: str  # "bundle" (the shipped FP32 graph), "fp16" or "qdq"
    op_types: tuple[str, ...] = ("Conv",)
    activation: str = "QUInt8"
    calibration: str = "MinMax"
    keep_fp32: tuple[str, ...] = ()  # node-name fragments left in FP32
    extra: tuple[tuple[str, object], ...] = ()  # quantize_static extra_options
    optimize: str = ""  # "extended"/"basic": then saved by yomiage.export.optimize.optimize_graph
    note: str = ""


PRE = ("/dec/conv_pre/",)  # 192 -> 512 channels at the frame rate: its input z has long tails
STAGE0 = ("/dec/resblocks.0/", "/dec/resblocks.1/", "/dec/resblocks.2/")
POST = ("/dec/conv_post/",)
PCT = (("CalibPercentile", 99.999),)
CONV_T = ("Conv", "ConvTranspose")
VARIANTS: dict[str, Variant] = {
    "fp32": Variant("bundle", note="shipped graph (ORT_ENABLE_EXTENDED)"),
    "fp16": Variant("fp16", note="fp16 weights; the x86 CPU EP casts back to an fp32 Conv"),
    "q8-conv-u8": Variant("qdq"),
    "q8-conv-s8": Variant("qdq", activation="QInt8"),
    "q8-convT-u8": Variant("qdq", op_types=CONV_T),
    "q8-convT-s8": Variant("qdq", op_types=CONV_T, activation="QInt8"),
    "q8-conv-u8-pct": Variant("qdq", calibration="Percentile", extra=PCT, note="6 windows"),
    "q8-conv-u8-pre32": Variant("qdq", keep_fp32=PRE, note="conv_pre FP32"),
    "q8-conv-u8-pct-pre32": Variant(
        "qdq", calibration="Percentile", extra=PCT, keep_fp32=PRE, note="conv_pre FP32"
    ),
    "q8-conv-u8-mixed": Variant(
        "qdq", keep_fp32=PRE + STAGE0 + POST, note="conv_pre, stage-0 resblocks, conv_post FP32"
    ),
    "q8-conv-u8-mixed-opt": Variant(
        "qdq", keep_fp32=PRE + STAGE0 + POST, optimize="extended", note="mixed, optimize_graph"
    ),
    "q8-conv-u8-mixed-basic": Variant(
        "qdq", keep_fp32=PRE + STAGE0 + POST, optimize="basic", note="mixed, basic=True"
    ),
}


# ---------------------------------------------------------------------------- inputs


@dataclass
class Voice:
    """One voice's graphs and decoder inputs under the work folder."""

    name: str
    folder: Path
    bundle: Path
    receptive_field: int
    calibration: list[tuple[Array, Array]] = field(default_factory=list)

    @property
    def raw(self) -> Path:
        return self.folder / "decoder_raw.onnx"

    def eval_input(self) -> tuple[Array, Array]:
        return np.load(self.folder / "eval_z.npy"), np.load(self.folder / "eval_g.npy")


def _export_raw_decoder(voice_dir: Path, target: Path) -> None:
    import torch

    from yomiage.export.graphs import DecoderGraph, _export
    from yomiage.model import load_voice

    model = load_voice(voice_dir).model
    hp = model.config.model
    z = torch.zeros(1, hp.inter_channels, 23)
    g = torch.zeros(1, hp.gin_channels, 1)
    with torch.inference_mode():
        _export(DecoderGraph(model), (z, g), target, ("z", "g"), ("audio",),
                {"z": {2: "F"}, "audio": {2: "S"}})  # fmt: skip


def _latents(bundle: Path, voice_folder: Path) -> None:
    """Save z/g of the calibration sentences and of the held-out one, as the runtime makes them."""
    from yomiage.options import SynthesisOptions
    from yomiage.runtime.onnx_backend import OnnxBackend
    from yomiage.runtime.voice import encode
    from yomiage.text import Frontend, UserDictionary

    precision = "q8" if (bundle / "bert" / "bert_q8.onnx").exists() else "fp32"
    backend = OnnxBackend(bundle / "bert", precision=precision, threads=THREADS)
    voice: Any = backend.load_voice(bundle)  # its type is the backend's business
    flow = voice.flow
    frontend = Frontend(UserDictionary(None))
    options = SynthesisOptions(seed=0)

    def latent(text: str, seed: int) -> tuple[Array, Array]:
        rng = backend.new_rng(seed)
        [encoded] = encode(backend, voice, [frontend.g2p(text)], options, rng)
        m_p, logs_p, g = encoded.state
        d = encoded.durations
        mean = np.repeat(m_p, d, axis=2)
        scale = np.exp(np.repeat(logs_p, d, axis=2))
        eps = rng.standard_normal(mean.shape, dtype=np.float32)
        z_p = (mean + eps * scale * np.float32(options.noise)).astype(np.float32)
        return flow.run(None, {"z_p": z_p, "g": g})[0], g

    for i, text in enumerate(CALIBRATION_TEXTS):
        z, g = latent(text, i)
        np.save(voice_folder / f"calib_{i}_z.npy", z)
        np.save(voice_folder / f"calib_{i}_g.npy", g)
    z, g = latent(HELD_OUT_TEXT, 100)
    np.save(voice_folder / "eval_z.npy", z)
    np.save(voice_folder / "eval_g.npy", g)


def prepare(work: Path, with_tiny: bool) -> list[Voice]:
    """Raw decoder graphs and latents for the full voice (and the tiny one), made once."""
    voices = []
    sources = [("full", CACHE / "voice-full-0", CACHE / "bundle-full-0")]
    if with_tiny and TINY.is_dir():
        sources.append(("tiny", TINY / "model", work / "tiny" / "bundle"))
    for name, voice_dir, bundle in sources:
        folder = work / name
        folder.mkdir(parents=True, exist_ok=True)
        if not (bundle / "voice.json").exists():
            if name != "tiny":
                raise SystemExit(f"{bundle} missing; see the docstring for how to make it")
            from yomiage.export.convert import convert_bert, convert_voice

            convert_voice(voice_dir, bundle)
            convert_bert(TINY / "bert" / "model", bundle / "bert",
                         tokenizer_dir=TINY / "bert" / "tokenizer")  # fmt: skip
        if not (folder / "decoder_raw.onnx").exists():
            _export_raw_decoder(voice_dir, folder / "decoder_raw.onnx")
        if not (folder / "eval_z.npy").exists():
            _latents(bundle, folder)
        manifest = json.loads((bundle / "voice.json").read_text("utf-8"))
        voice = Voice(name, folder, bundle, int(manifest["receptive_field_frames"]))
        for i in range(len(CALIBRATION_TEXTS)):
            voice.calibration.append(
                (np.load(folder / f"calib_{i}_z.npy"), np.load(folder / f"calib_{i}_g.npy"))
            )
        voices.append(voice)
    return voices


def padded_windows(z: Array, context: int) -> Iterator[tuple[Array, slice]]:
    """The runtime's decoder windows: padded latents and the crop (in samples) to keep."""
    from yomiage.runtime.chunking import windows

    for w in windows(z.shape[2], WINDOW, context):
        yield np.ascontiguousarray(z[:, :, w.pad_start : w.pad_stop]), w.crop(512)


# ---------------------------------------------------------------------------- variants


def probe_low_precision_conv() -> dict[str, str]:
    """Whether the CPU provider runs a Conv in fp16 / bf16 (one-node graphs, opset 22)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    result = {}
    for name, dtype in (("fp16", TensorProto.FLOAT16), ("bf16", TensorProto.BFLOAT16)):
        weight = helper.make_tensor("w", dtype, [4, 4, 3], bytes(96), raw=True)
        node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1])
        graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info("x", dtype,
                                  [1, 4, 8])], [helper.make_tensor_value_info("y", dtype, None)],
                                  [weight])  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own types
            result[name] = "no kernel: " + str(exc).splitlines()[0]
            continue
        # A session is made for fp16 too; look at which kernels ORT placed.
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"decprec_probe_{name}.onnx"
        options.optimized_model_filepath = str(path)
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        ops = [n.op_type for n in onnx.load(str(path)).graph.node]
        path.unlink()
        del session
        result[name] = f"session made; nodes after placement: {ops}"
    return result


class WindowReader(CalibrationDataReader):  # type: ignore[misc]
    """Calibration feeds: every padded runtime window of the calibration sentences."""

    def __init__(self, voice: Voice, limit: int | None = None) -> None:
        super().__init__()
        feeds = [
            {"z": zw, "g": g}
            for z, g in voice.calibration
            for zw, _ in padded_windows(z, voice.receptive_field)
        ]
        if limit:  # histograms stack the feeds' tensors: only full-size windows, and few
            full = WINDOW + 2 * voice.receptive_field
            feeds = [f for f in feeds if f["z"].shape[2] == full][:limit]
        self.feeds = feeds
        self._it = iter(self.feeds)

    def get_next(self) -> dict[str, Array] | None:
        return next(self._it, None)

    def rewind(self) -> None:
        self._it = iter(self.feeds)


def build(voice: Voice, name: str, variant: Variant) -> Path:
    """The variant's decoder graph for ``voice`` (made on first use)."""
    if variant.kind == "bundle":
        return voice.bundle / "decoder.onnx"
    target = voice.folder / f"decoder_{name}.onnx"
    if target.exists():
        return target
    import onnx

    if variant.kind == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        model = convert_float_to_float16(onnx.load(str(voice.raw)), keep_io_types=True)
        onnx.save(model, str(target))
        return target
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quant_pre_process,
        quantize_static,
    )

    pre = voice.folder / "decoder_pre.onnx"
    if not pre.exists():
        quant_pre_process(str(voice.raw), str(pre))
    source = target.with_name(target.stem + ".qdq.onnx") if variant.optimize else target
    exclude = [n.name for n in onnx.load(str(pre)).graph.node
               if any(part in n.name for part in variant.keep_fp32)]  # fmt: skip
    # Histogram calibration keeps every intermediate tensor of every feed in memory.
    reader = WindowReader(voice, limit=6 if variant.calibration != "MinMax" else None)
    quantize_static(
        str(pre),
        str(source),
        reader,
        quant_format=QuantFormat.QDQ,
        op_types_to_quantize=list(variant.op_types),
        per_channel=True,
        activation_type=QuantType[variant.activation],
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod[variant.calibration],
        nodes_to_exclude=exclude,
        extra_options=dict(variant.extra),
    )
    if variant.optimize:
        from yomiage.export.optimize import optimize_graph

        if variant.optimize == "basic":  # optimize_graph(..., basic=True) is newer than the rest
            optimize_graph(source, target, basic=True)  # type: ignore[call-arg,unused-ignore]
        else:
            optimize_graph(source, target)
        source.unlink()
    return target


def file_size_mb(graph: Path) -> float:
    data = graph.with_name(graph.name + ".data")
    return (graph.stat().st_size + (data.stat().st_size if data.exists() else 0)) / 1e6


# ---------------------------------------------------------------------------- running


def _session(graph: Path) -> object:
    import onnxruntime as ort

    from yomiage.runtime.onnx_backend import session_options

    return ort.InferenceSession(str(graph), session_options(THREADS),
                                providers=["CPUExecutionProvider"])  # fmt: skip


def decode(session: object, z: Array, g: Array, context: int | None) -> Array:
    """Audio of ``z``: in the runtime's windows (``context`` frames each side) or whole."""
    run: Callable[..., list[Array]] = session.run  # type: ignore[attr-defined]
    if context is None:
        audio: Array = run(None, {"z": z, "g": g})[0][0, 0]
        return audio
    return np.concatenate(
        [run(None, {"z": zw, "g": g})[0][0, 0, crop] for zw, crop in padded_windows(z, context)]
    )


def child(graph: Path, folder: Path, context: int, save: Path | None) -> dict[str, float]:
    """One fresh-process measurement of one graph on the held-out latents."""
    t0 = time.perf_counter()
    session = _session(graph)
    load = time.perf_counter() - t0
    z, g = np.load(folder / "eval_z.npy"), np.load(folder / "eval_g.npy")
    result: dict[str, float] = {"load": load, "frames": float(z.shape[2])}
    for mode, ctx in (("windowed", context), ("whole", None)):
        audio = decode(session, z, g, ctx)  # warm-up
        best = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            audio = decode(session, z, g, ctx)
            best = min(best, time.perf_counter() - start)
        result[mode] = best
        if save is not None:
            np.save(save.with_name(f"{save.stem}_{mode}.npy"), audio)
    result["rss"] = peak_rss_mb()
    return result


def peak_rss_mb() -> float:
    """This process's peak RSS. ``ru_maxrss`` would carry the parent's peak over fork + exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def error(reference: Array, x: Array) -> tuple[float, float]:
    """Largest absolute difference and SNR in dB of ``x`` against ``reference``."""
    ref, x = reference.astype(np.float64), x.astype(np.float64)
    noise = float(np.sum((ref - x) ** 2))
    snr = float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref**2)) / noise)
    return float(np.abs(ref - x).max()), snr


def tiny_errors(voice: Voice, graphs: dict[str, Path]) -> dict[str, tuple[float, float]]:
    """Windowed-decode error of each graph against FP32 on the tiny voice (in process)."""
    z, g = voice.eval_input()
    outputs = {n: decode(_session(p), z, g, voice.receptive_field) for n, p in graphs.items()}
    return {n: error(outputs["fp32"], a) for n, a in outputs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/decprec"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--no-tiny", action="store_true")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        graph, folder, context, save = args.child
        out = child(Path(graph), Path(folder), int(context), Path(save) if save != "-" else None)
        print(json.dumps(out))
        return

    names = args.variants.split(",")
    if names[0] != "fp32":
        names = ["fp32", *[n for n in names if n != "fp32"]]
    args.work.mkdir(parents=True, exist_ok=True)
    print("CPU provider Conv kernels:")
    for precision, outcome in probe_low_precision_conv().items():
        print(f"  {precision}: {outcome}")
    voices = prepare(args.work, with_tiny=not args.no_tiny)
    full = voices[0]
    graphs: dict[str, dict[str, Path]] = {v.name: {} for v in voices}
    failures: dict[str, str] = {}
    for name in names:
        for voice in voices:
            start = time.perf_counter()
            try:
                graphs[voice.name][name] = build(voice, name, VARIANTS[name])
            except Exception as exc:
                failures[f"{name} ({voice.name})"] = f"build: {type(exc).__name__}: {exc}"
                traceback.print_exc()
                continue
            print(f"built {name} for {voice.name} in {time.perf_counter() - start:.1f} s",
                  flush=True)  # fmt: skip
    runnable = [n for n in names if n in graphs["full"]]

    runs: dict[str, list[dict[str, float]]] = {n: [] for n in runnable}
    for round_ in range(args.repeats):
        for name in runnable:
            save = full.folder / f"out_{name}" if round_ == 0 else None
            cmd = [sys.executable, __file__, "--child", str(graphs["full"][name]),
                   str(full.folder), str(full.receptive_field), str(save or "-")]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                failures[name] = "run: " + (proc.stderr.strip().splitlines() or ["?"])[-1]
                continue
            runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(f"round {round_ + 1} {name}: {runs[name][-1]}", flush=True)

    tiny = next((v for v in voices if v.name == "tiny"), None)
    tiny_err = tiny_errors(tiny, graphs["tiny"]) if tiny and "fp32" in graphs["tiny"] else {}
    measured = [n for n in runnable if runs[n]]
    med = {n: {k: statistics.median(r[k] for r in runs[n]) for k in runs[n][0]} for n in measured}
    best = {n: min(r["windowed"] for r in runs[n]) for n in measured}  # least disturbed round
    frames = med["fp32"]["frames"]
    audio_s = frames * 512 / 44100
    ref = {m: np.load(full.folder / f"out_fp32_{m}.npy") for m in ("windowed", "whole")}

    print()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, {THREADS} threads; "
        f"held-out sentence {int(frames)} frames ({audio_s:.2f} s of audio); windows of "
        f"{WINDOW} + {full.receptive_field} context frames each side; median of "
        f"{args.repeats} interleaved fresh processes"
    )
    print()
    print(
        "| variant | windowed s | vs FP32 | x RT | whole s | vs FP32 | x RT | max abs err "
        "| SNR dB | SNR dB whole | SNR dB tiny | size MB | peak RSS MB | load s "
        "| best windowed s | vs FP32 best | note |"
    )
    print("| --- " * 17 + "|")
    for name in measured:
        m = med[name]
        win = np.load(full.folder / f"out_{name}_windowed.npy")
        whole = np.load(full.folder / f"out_{name}_whole.npy")
        max_err, snr = error(ref["windowed"], win)
        _, snr_whole = error(ref["whole"], whole)
        t = tiny_err.get(name)
        print(
            f"| {name} | {m['windowed']:.2f} | {med['fp32']['windowed'] / m['windowed']:.2f}x "
            f"| {audio_s / m['windowed']:.2f} | {m['whole']:.2f} "
            f"| {med['fp32']['whole'] / m['whole']:.2f}x | {audio_s / m['whole']:.2f} "
            f"| {max_err:.3g} | {snr:.1f} | {snr_whole:.1f} | {f'{t[1]:.1f}' if t else '-'} "
            f"| {file_size_mb(graphs['full'][name]):.1f} | {m['rss']:.0f} | {m['load']:.2f} "
            f"| {best[name]:.2f} | {best['fp32'] / best[name]:.2f}x | {VARIANTS[name].note} |"
        )
    print()
    print("Spread (windowed s per round):")
    for name in measured:
        print(f"  {name}: " + ", ".join(f"{r['windowed']:.2f}" for r in runs[name]))
    if failures:
        print()
        print("Failures:")
        for name, reason in failures.items():
            print(f"  {name}: {reason}")


if __name__ == "__main__":
    main()
