"""An int8 decoder, opt-in: static QDQ quantization of the HiFi-GAN convolutions.

Int8 convolutions made the decoder alone much faster than float32 on the CPU
(with VNNI) it was measured on. The decoder input ``z`` has long tails, so
quantizing ``conv_pre`` costs the most accuracy; leaving it, the first upsampling
stage's residual blocks and ``conv_post`` in float32 kept most of the speed for
the least error (measured with ``benchmarks/decoder_int8_study.py``:
benchmarks/history/issues-03-12.md, "Decoder int8 variants"). Transposed
convolutions stay float32 (ONNX Runtime has no fused int8 kernel for them:
quantizing them only added error). The flow and the duration
predictors are never quantized. Activations are calibrated (min/max) on the
decoder inputs of real sentences, cut into the runtime's padded windows.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from yomiage.model import TorchVoice
from yomiage.runtime.chunking import windows
from yomiage.runtime.engines.telemetry import engines_without_telemetry
from yomiage.text.symbols import to_model_inputs

CALIBRATION_TEXTS = (
    "こんにちは、今日はいい天気ですね。",
    "駅前の小さな喫茶店で、古い友人と偶然再会しました。",
    "えっ！？本当に……そうなの？",
    "明日の会議では、この問題について詳しく話し合う予定です。",
    "気象庁によりますと、台風十号は明日の朝にも九州南部に上陸するおそれがあります。",
)
HELD_OUT_TEXT = "山の頂上にたどり着いたとき、眼下に広がる雲海の美しさに言葉を失いました。"
WINDOW_FRAMES = 128
SPEAKER = 0  # the voice's first speaker: calibration needs the range of z, not every voice
MIN_SNR_DB = 20.0


@dataclass(frozen=True)
class DecoderInputs:
    z: npt.NDArray[np.float32]  # [1, I, F]
    g: npt.NDArray[np.float32]  # [1, G, 1]
    sid: npt.NDArray[np.int64]  # [1]

    def speaker(self, inputs: frozenset[str]) -> dict[str, npt.NDArray[Any]]:
        """The speaker as the decoder with ``inputs`` takes it: ``sid`` (speaker tables)
        or ``g``."""
        feeds: dict[str, npt.NDArray[Any]] = {"g": self.g, "sid": self.sid}
        return {name: value for name, value in feeds.items() if name in inputs}


@dataclass(frozen=True)
class Int8Error:
    """The int8 decoder against float32 on a sentence it was not calibrated on."""

    snr_db: float
    max_abs: float


def decoder_inputs(
    voice: TorchVoice,
    texts: Sequence[str],
    features: Any = None,
    *,
    seed: int = 0,
) -> list[DecoderInputs]:
    """Flow outputs for ``texts`` (API defaults for the noise).

    ``features(bert_texts) -> list[[n_tok, C] tensor]`` gives BERT features; without
    it they are zeros (the prior then carries less of the text, which widens
    nothing the calibration needs: z's range is set by the prior's scale and noise).
    """
    from yomiage.text import Frontend, UserDictionary

    frontend = Frontend(UserDictionary(None))
    generator = torch.Generator().manual_seed(seed)
    model, config = voice.model, voice.config
    style = torch.from_numpy(voice.styles.vector(voice.styles.names[0]))[None]
    out = []
    try:
        sentences = [frontend.g2p(t) for t in texts]
        hidden = features([p.bert_text for p in sentences]) if features else None
        with torch.inference_mode():
            for i, p in enumerate(sentences):
                inputs = to_model_inputs(p.phones, p.tones, p.word2ph, add_blank=config.add_blank)
                if hidden is not None:
                    from yomiage.bert.torch_bert import expand_to_phones_torch

                    bert = expand_to_phones_torch(hidden[i], inputs.word2ph)[None]
                else:
                    bert = torch.zeros(1, voice.bert_dim, inputs.length)
                encoded = model.encode(
                    torch.from_numpy(inputs.phone_ids)[None],
                    torch.from_numpy(inputs.tone_ids)[None],
                    torch.from_numpy(inputs.language_ids)[None],
                    bert,
                    style,
                    torch.tensor([SPEAKER], dtype=torch.long),
                    sdp_ratio=0.2,
                    noise_scale_w=0.8,
                    length_scale=1.0,
                    generator=generator,
                )
                decoded = model.decode(encoded, noise_scale=0.6, generator=generator)
                sid = np.array([SPEAKER], np.int64)
                out.append(DecoderInputs(decoded.z.numpy(), encoded.g.numpy(), sid))
    finally:
        frontend.close()
    return out


def _windows(
    sample: DecoderInputs, context: int, inputs: frozenset[str]
) -> Iterator[dict[str, npt.NDArray[Any]]]:
    for w in windows(sample.z.shape[2], WINDOW_FRAMES, context, WINDOW_FRAMES):
        z = np.ascontiguousarray(sample.z[:, :, w.pad_start : w.pad_stop])
        yield {"z": z, **sample.speaker(inputs)}


def quantize_decoder(
    raw_decoder: Path,
    target: Path,
    calibration: Sequence[DecoderInputs],
    *,
    receptive_field: int,
    fp32_resblocks: int,
) -> Path:
    """Write the int8 decoder (one file, QDQ) from the un-optimized float32 graph."""
    import onnx

    with engines_without_telemetry():  # ONNX Runtime decides at its start
        from onnxruntime.quantization import (
            CalibrationDataReader,
            CalibrationMethod,
            QuantFormat,
            QuantType,
            quant_pre_process,
            quantize_static,
        )

        from yomiage.runtime.engines.onnx_session import load_warnings_off

    graph = onnx.load(str(raw_decoder), load_external_data=False).graph
    inputs = frozenset(i.name for i in graph.input)

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self._feeds = (f for s in calibration for f in _windows(s, receptive_field, inputs))

        def get_next(self) -> dict[str, npt.NDArray[Any]] | None:
            return next(self._feeds, None)

    keep = ["/dec/conv_pre/", "/dec/conv_post/"]
    keep += [f"/dec/resblocks.{i}/" for i in range(fp32_resblocks)]
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp, load_warnings_off():
        pre = Path(tmp) / "decoder_pre.onnx"
        quant_pre_process(str(raw_decoder), str(pre))
        exclude = [n.name for n in onnx.load(str(pre)).graph.node
                   if any(k in n.name for k in keep)]  # fmt: skip
        quantize_static(
            str(pre),
            str(target),
            Reader(),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["Conv"],
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            nodes_to_exclude=exclude,
        )
    return target


def int8_error(
    fp32_decoder: Path,
    int8_decoder: Path,
    sample: DecoderInputs,
    *,
    receptive_field: int,
    hop_length: int,
) -> Int8Error:
    """SNR and largest difference of the int8 decoder's windowed audio against float32's."""
    with engines_without_telemetry():  # ONNX Runtime decides at its start
        import onnxruntime as ort

        from yomiage.runtime.engines.onnx_session import input_names, quiet_options

    def run(path: Path) -> npt.NDArray[np.float32]:
        session = ort.InferenceSession(
            str(path), quiet_options(), providers=["CPUExecutionProvider"]
        )
        pieces = []
        speaker = sample.speaker(input_names(session))
        for w in windows(sample.z.shape[2], WINDOW_FRAMES, receptive_field, WINDOW_FRAMES):
            feeds = {"z": np.ascontiguousarray(sample.z[:, :, w.pad_start : w.pad_stop])}
            audio = session.run(None, {**feeds, **speaker})[0]
            pieces.append(audio[0, 0, w.crop(hop_length)])
        return np.concatenate(pieces)

    ref, got = run(fp32_decoder), run(int8_decoder)
    err = ref - got
    noise = float((err.astype(np.float64) ** 2).sum())
    snr = (
        math.inf
        if noise == 0
        else 10 * math.log10(float((ref.astype(np.float64) ** 2).sum()) / noise)
    )
    return Int8Error(snr_db=snr, max_abs=float(np.abs(err).max()))
