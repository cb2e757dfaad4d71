"""The text encoder (``enc_p``): phones, tones, BERT and style to prior statistics."""

from __future__ import annotations

import math

from torch import Tensor, nn

from yomiage.model.attention import AttentionEncoder, masked
from yomiage.sbv2.config import N_LANGUAGES, N_SYMBOLS, N_TONES, STYLE_DIM, ModelHyperparameters


class TextEncoder(nn.Module):
    def __init__(self, hp: ModelHyperparameters, bert_dim: int) -> None:
        super().__init__()
        h = hp.hidden_channels
        self.hidden_channels = h
        self.inter_channels = hp.inter_channels
        self.emb = nn.Embedding(N_SYMBOLS, h)
        self.tone_emb = nn.Embedding(N_TONES, h)
        self.language_emb = nn.Embedding(N_LANGUAGES, h)
        self.bert_proj = nn.Conv1d(bert_dim, h, 1)
        self.style_proj = nn.Linear(STYLE_DIM, h)
        self.encoder = AttentionEncoder(
            h, hp.filter_channels, hp.n_heads, hp.n_layers, hp.kernel_size, hp.gin_channels
        )
        self.proj = nn.Conv1d(h, 2 * hp.inter_channels, 1)

    def forward(
        self,
        phones: Tensor,
        tones: Tensor,
        languages: Tensor,
        bert: Tensor,
        style: Tensor,
        mask: Tensor | None,
        g: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``h [B,H,T]``, ``m_p`` and ``logs_p`` ``[B,I,T]``; ``mask`` is ``[B,1,T]``, or
        None for one unpadded sentence."""
        x = (
            self.emb(phones)
            + self.tone_emb(tones)
            + self.language_emb(languages)
            + self.bert_proj(bert).transpose(1, 2)
            + self.style_proj(style).unsqueeze(1)
        ) * math.sqrt(self.hidden_channels)
        h = self.encoder(masked(x.transpose(1, 2), mask), mask, g)
        stats = masked(self.proj(h), mask)
        return h, stats[:, : self.inter_channels], stats[:, self.inter_channels :]
