"""The synthesizer cut into the three ONNX graphs the CPU runtime runs.

* ``encoder``: ids, BERT, style, speaker and the SDP noise → prior statistics,
  speaker embedding and per-token durations (so pauses and timings are known
  before any audio exists);
* ``flow``: prior sample → decoder input (its attention sees every frame, so
  it runs on the whole sentence; it is cheap);
* ``decoder``: latent frames → audio, run in padded windows
  (:mod:`yomiage.runtime.chunking`).

Noise is an input, drawn by the runtime with numpy: seeds then mean the same
thing on every backend run, and no RandomNormal node hides in the graph.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from yomiage.model import JPExtraSynthesizer
from yomiage.runtime.engines.telemetry import engines_without_telemetry

OPSET = 17


class EncoderGraph(nn.Module):
    def __init__(self, model: JPExtraSynthesizer) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        phone_ids: Tensor,
        tone_ids: Tensor,
        language_ids: Tensor,
        bert: Tensor,
        style: Tensor,
        sid: Tensor,
        sdp_noise: Tensor,
        sdp_ratio: Tensor,
        length_scale: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        m = self.model
        g = m.emb_g(sid).unsqueeze(-1)
        mask = torch.ones_like(bert[:, :1, :])  # the duration predictors take it as a tensor
        h, m_p, logs_p = m.enc_p(phone_ids, tone_ids, language_ids, bert, style, None, g)
        logw = m.sdp(h, mask, g, sdp_noise) * sdp_ratio + m.dp(h, mask, g) * (1 - sdp_ratio)
        durations = torch.ceil(torch.exp(logw) * length_scale)
        return m_p, logs_p, g, durations


class FlowGraph(nn.Module):
    def __init__(self, model: JPExtraSynthesizer) -> None:
        super().__init__()
        self.flow = model.flow

    def forward(self, z_p: Tensor, g: Tensor) -> Tensor:
        return self.flow.reverse(z_p, None, g)  # one sentence: no mask to multiply by


class DecoderGraph(nn.Module):
    def __init__(self, model: JPExtraSynthesizer) -> None:
        super().__init__()
        self.dec = model.dec

    def forward(self, z: Tensor, g: Tensor) -> Tensor:
        return self.dec(z, g)


ENCODER_INPUTS = (
    "phone_ids",
    "tone_ids",
    "language_ids",
    "bert",
    "style",
    "sid",
    "sdp_noise",
    "sdp_ratio",
    "length_scale",
)
ENCODER_OUTPUTS = ("m_p", "logs_p", "g", "durations")


def _export(module: nn.Module, args: tuple[Tensor, ...], path: Path, inputs: tuple[str, ...],
            outputs: tuple[str, ...], dynamic: dict[str, dict[int, str]]) -> None:  # fmt: skip
    with engines_without_telemetry():  # torch.onnx may import ONNX Runtime itself
        torch.onnx.export(
            module,
            args,
            str(path),
            input_names=list(inputs),
            output_names=list(outputs),
            dynamic_axes=dynamic,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def export_graphs(model: JPExtraSynthesizer, out_dir: Path) -> dict[str, Path]:
    """Write ``encoder.onnx``, ``flow.onnx`` and ``decoder.onnx`` for ``model``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    hp = model.config.model
    t, f = 11, 23
    with torch.inference_mode():
        # Sample inputs; every time axis is dynamic.
        encoder_args = (
            torch.zeros(1, t, dtype=torch.long),
            torch.full((1, t), 6, dtype=torch.long),
            torch.ones(1, t, dtype=torch.long),
            torch.zeros(1, model.bert_dim, t),
            torch.zeros(1, 256),
            torch.zeros(1, dtype=torch.long),
            torch.zeros(1, 2, t),
            torch.tensor([0.2]),
            torch.tensor([1.0]),
        )
        g = torch.zeros(1, hp.gin_channels, 1)
        z = torch.zeros(1, hp.inter_channels, f)
    paths = {name: out_dir / f"{name}.onnx" for name in ("encoder", "flow", "decoder")}
    tokens = {"phone_ids": {1: "T"}, "tone_ids": {1: "T"}, "language_ids": {1: "T"},
              "bert": {2: "T"}, "sdp_noise": {2: "T"}, "m_p": {2: "T"}, "logs_p": {2: "T"},
              "durations": {2: "T"}}  # fmt: skip
    _export(EncoderGraph(model), encoder_args, paths["encoder"], ENCODER_INPUTS,
            ENCODER_OUTPUTS, tokens)  # fmt: skip
    _export(FlowGraph(model), (z, g), paths["flow"], ("z_p", "g"), ("z",),
            {"z_p": {2: "F"}, "z": {2: "F"}})  # fmt: skip
    _export(DecoderGraph(model), (z, g), paths["decoder"], ("z", "g"), ("audio",),
            {"z": {2: "F"}, "audio": {2: "S"}})  # fmt: skip
    return paths
