"""The JP-Extra synthesizer, split the way the runtime uses it (spec §5.1).

``encode`` runs the text encoder and both duration predictors, so durations
(pauses, timings) are known before any audio is made; ``decode`` expands the
prior to frames, samples it, runs the flow and the generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from yomiage.model.duration import DurationPredictor, StochasticDurationPredictor
from yomiage.model.flow import TransformerCouplingFlow
from yomiage.model.generator import Generator
from yomiage.model.text_encoder import TextEncoder
from yomiage.sbv2.config import VoiceConfig


@dataclass(frozen=True)
class Encoded:
    """Token-level results of :meth:`JPExtraSynthesizer.encode` (batch of 1)."""

    h: Tensor  # [1, H, T] text-encoder output
    m_p: Tensor  # [1, I, T]
    logs_p: Tensor  # [1, I, T]
    g: Tensor  # [1, G, 1] speaker embedding
    logw_dp: Tensor  # [1, 1, T]
    logw_sdp: Tensor  # [1, 1, T]
    w: Tensor  # [1, 1, T] exp(logw) * length_scale, before ceil
    durations: Tensor  # [1, 1, T] frames per token (ceil of w), float


@dataclass(frozen=True)
class Decoded:
    z_p: Tensor  # [1, I, F] prior sample
    z: Tensor  # [1, I, F] flow output (decoder input)
    audio: Tensor  # [1, 1, F * hop]


def alignment_path(durations: Tensor) -> Tensor:
    """Hard alignment ``[B, 1, F, T]``: frame f belongs to the token whose interval holds it."""
    ends = torch.cumsum(durations, dim=-1)  # [B, 1, T]
    frames = int(max(1, int(ends[..., -1].max().item())))
    f = torch.arange(frames, device=durations.device, dtype=durations.dtype)
    before_end = f[None, None, :, None] < ends[:, :, None, :]
    before_start = f[None, None, :, None] < (ends - durations)[:, :, None, :]
    return (before_end & ~before_start).to(durations.dtype)


class JPExtraSynthesizer(nn.Module):
    def __init__(self, config: VoiceConfig, bert_dim: int) -> None:
        super().__init__()
        hp = config.model
        self.config = config
        self.bert_dim = bert_dim
        self.enc_p = TextEncoder(hp, bert_dim)
        self.dec = Generator(hp)
        self.flow = TransformerCouplingFlow(
            hp.inter_channels, hp.hidden_channels, hp.filter_channels, hp.n_heads, hp.gin_channels
        )
        self.sdp = StochasticDurationPredictor(hp.hidden_channels, hp.gin_channels)
        self.dp = DurationPredictor(hp.hidden_channels, hp.gin_channels)
        self.emb_g = nn.Embedding(config.n_speakers, hp.gin_channels)

    def encode(
        self,
        phones: Tensor,
        tones: Tensor,
        languages: Tensor,
        bert: Tensor,
        style: Tensor,
        sid: Tensor,
        *,
        sdp_ratio: float,
        noise_scale_w: float,
        length_scale: float,
        generator: torch.Generator | None = None,
    ) -> Encoded:
        """Batch-of-one inputs: ids ``[1, T]``, ``bert [1, C, T]``, ``style [1, 256]``."""
        g = self.emb_g(sid).unsqueeze(-1)
        mask = torch.ones(1, 1, phones.shape[1], dtype=bert.dtype, device=bert.device)
        h, m_p, logs_p = self.enc_p(phones, tones, languages, bert, style, mask, g)
        # The SDP noise is drawn even when sdp_ratio is 0 (same random stream as SBV2).
        noise = torch.randn(
            1, 2, phones.shape[1], generator=generator, device=bert.device, dtype=bert.dtype
        )
        logw_sdp = self.sdp(h, mask, g, noise * noise_scale_w)
        logw_dp = self.dp(h, mask, g)
        logw = logw_sdp * sdp_ratio + logw_dp * (1 - sdp_ratio)
        w = torch.exp(logw) * mask * length_scale
        return Encoded(h, m_p, logs_p, g, logw_dp, logw_sdp, w, torch.ceil(w))

    def decode(
        self,
        encoded: Encoded,
        *,
        noise_scale: float,
        generator: torch.Generator | None = None,
    ) -> Decoded:
        z_p = self.prior_sample(encoded, noise_scale=noise_scale, generator=generator)
        z = self.flow_reverse(z_p, encoded.g)
        audio = self.dec(z, encoded.g)
        return Decoded(z_p, z, audio)

    def prior_sample(
        self, encoded: Encoded, *, noise_scale: float, generator: torch.Generator | None = None
    ) -> Tensor:
        """``z_p`` ``[1, I, F]``: the token priors spread over their frames, plus noise."""
        path = alignment_path(encoded.durations)[:, 0]  # [1, F, T]
        m = torch.matmul(path, encoded.m_p.transpose(1, 2)).transpose(1, 2)
        logs = torch.matmul(path, encoded.logs_p.transpose(1, 2)).transpose(1, 2)
        noise = torch.randn(m.shape, generator=generator, device=m.device, dtype=m.dtype)
        return m + noise * torch.exp(logs) * noise_scale

    def flow_reverse(self, z_p: Tensor, g: Tensor) -> Tensor:
        """The decoder's input for ``z_p`` (every frame valid, so the mask is all ones)."""
        y_mask = torch.ones(1, 1, z_p.shape[2], dtype=z_p.dtype, device=z_p.device)
        return self.flow.reverse(z_p, y_mask, g) * y_mask
