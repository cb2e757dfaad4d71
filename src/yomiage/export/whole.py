"""The synthesizer as one ONNX graph, with the interface HayaKoe ships (spec §9).

yomiage's own bundles cut the synthesizer in three (:mod:`yomiage.export.graphs`)
so durations come before audio and the decoder runs in windows. Other
projects publish the whole utterance as one graph, noise drawn inside it
(``RandomNormalLike``): :func:`export_whole` writes that form, and
:func:`export_duration_predictor` the durations alone, so yomiage can make
such voices from its own models (its tests run the HayaKoe layout without
any file from elsewhere).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from yomiage.export.graphs import OPSET
from yomiage.model import JPExtraSynthesizer
from yomiage.runtime.engines.telemetry import engines_without_telemetry

INPUTS = ("x", "x_lengths", "sid", "tone", "language", "bert", "style_vec")
SCALARS = ("noise_scale", "length_scale", "noise_scale_w", "sdp_ratio")


def _durations(
    model: JPExtraSynthesizer,
    x: Tensor,
    x_lengths: Tensor,
    tone: Tensor,
    language: Tensor,
    bert: Tensor,
    style_vec: Tensor,
    sid: Tensor,
    length_scale: Tensor,
    noise_scale_w: Tensor,
    sdp_ratio: Tensor,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Encoder and both duration predictors: (m_p, logs_p, g, mask, ceil'd durations)."""
    g = model.emb_g(sid).unsqueeze(-1)
    positions = torch.arange(x.shape[1], device=x.device)
    mask = (positions[None, :] < x_lengths[:, None]).unsqueeze(1).to(bert.dtype)
    h, m_p, logs_p = model.enc_p(x, tone, language, bert, style_vec, mask, g)
    noise = torch.randn_like(torch.cat([mask, mask], dim=1)) * noise_scale_w
    logw = model.sdp(h, mask, g, noise) * sdp_ratio + model.dp(h, mask, g) * (1 - sdp_ratio)
    return m_p, logs_p, g, mask, torch.ceil(torch.exp(logw) * mask * length_scale)


class WholeSynthesizer(nn.Module):
    """Text inputs to audio and per-token durations, in one graph."""

    def __init__(self, model: JPExtraSynthesizer) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        x: Tensor,
        x_lengths: Tensor,
        sid: Tensor,
        tone: Tensor,
        language: Tensor,
        bert: Tensor,
        style_vec: Tensor,
        noise_scale: Tensor,
        length_scale: Tensor,
        noise_scale_w: Tensor,
        sdp_ratio: Tensor,
    ) -> tuple[Tensor, Tensor]:
        m = self.model
        m_p, logs_p, g, _, w = _durations(
            m, x, x_lengths, tone, language, bert, style_vec, sid, length_scale, noise_scale_w,
            sdp_ratio,
        )  # fmt: skip
        # The hard alignment, traceable: frame f belongs to token t when it lies
        # between the token's start and end (durations are whole frames).
        ends = torch.cumsum(w, dim=-1)  # [1, 1, T]
        total = torch.clamp(ends[0, 0, -1], min=1.0)
        # A tensor end (not a Python int) is what makes the traced Range dynamic.
        frames = torch.arange(total.to(torch.int64), device=w.device)  # type: ignore[call-overload]
        frames = frames.to(w.dtype)
        path = (frames[:, None] < ends[0]) & (frames[:, None] >= ends[0] - w[0])
        path = path.to(m_p.dtype)[None]  # [1, F, T]
        mean = torch.matmul(path, m_p.transpose(1, 2)).transpose(1, 2)
        logs = torch.matmul(path, logs_p.transpose(1, 2)).transpose(1, 2)
        z_p = mean + torch.randn_like(mean) * torch.exp(logs) * noise_scale
        z = m.flow.reverse(z_p, torch.ones_like(z_p[:, :1, :]), g)
        return m.dec(z, g), w[:, 0, :]


class DurationPredictorGraph(nn.Module):
    """Text inputs to per-token durations only."""

    def __init__(self, model: JPExtraSynthesizer) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        x: Tensor,
        x_lengths: Tensor,
        sid: Tensor,
        tone: Tensor,
        language: Tensor,
        bert: Tensor,
        style_vec: Tensor,
        length_scale: Tensor,
        noise_scale_w: Tensor,
        sdp_ratio: Tensor,
    ) -> Tensor:
        w = _durations(
            self.model, x, x_lengths, tone, language, bert, style_vec, sid, length_scale,
            noise_scale_w, sdp_ratio,
        )[4]  # fmt: skip
        return w[:, 0, :]


def _sample(model: JPExtraSynthesizer, t: int = 11) -> tuple[Tensor, ...]:
    return (
        torch.zeros(1, t, dtype=torch.long),
        torch.tensor([t], dtype=torch.long),
        torch.zeros(1, dtype=torch.long),
        torch.full((1, t), 6, dtype=torch.long),
        torch.ones(1, t, dtype=torch.long),
        torch.zeros(1, model.bert_dim, t),
        torch.zeros(1, 256),
    )


_AXES = {"x": {1: "phone_len"}, "tone": {1: "phone_len"}, "language": {1: "phone_len"},
         "bert": {2: "phone_len"}, "durations": {1: "phone_len"}}  # fmt: skip


def export_whole(model: JPExtraSynthesizer, path: Path) -> Path:
    """Write ``synthesizer.onnx`` (spec §9.1) for ``model``."""
    scalars = (torch.tensor([0.6]), torch.tensor([1.0]), torch.tensor([0.8]), torch.tensor([0.2]))
    with torch.inference_mode(), engines_without_telemetry():  # torch.onnx may import ORT
        torch.onnx.export(
            WholeSynthesizer(model).eval(),
            _sample(model) + scalars,
            str(path),
            input_names=[*INPUTS, *SCALARS],
            output_names=["audio", "durations"],
            dynamic_axes={**_AXES, "audio": {2: "audio_len"}},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    return path


def export_duration_predictor(model: JPExtraSynthesizer, path: Path) -> Path:
    """Write ``duration_predictor.onnx`` (spec §9.2) for ``model``."""
    scalars = (torch.tensor([1.0]), torch.tensor([0.8]), torch.tensor([0.2]))
    with torch.inference_mode(), engines_without_telemetry():  # torch.onnx may import ORT
        torch.onnx.export(
            DurationPredictorGraph(model).eval(),
            _sample(model) + scalars,
            str(path),
            input_names=[*INPUTS, "length_scale", "noise_scale_w", "sdp_ratio"],
            output_names=["durations"],
            dynamic_axes=_AXES,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    return path
