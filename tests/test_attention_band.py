"""The relative attention over the band of 9 keys is the dense formula of spec §5.4,
bit for bit, at every length, the shortest included (where most offsets fall outside)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from yomiage.model.attention import WINDOW, RelativeMultiHeadAttention  # noqa: E402


def dense(attn: RelativeMultiHeadAttention, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Spec §5.4 written out over every (query, key) pair: the relative terms of keys
    within ±WINDOW of the query, nothing elsewhere."""
    b, c, t = x.shape
    n, d = attn.n_heads, attn.head_dim
    q = attn.conv_q(x).view(b, n, d, t).transpose(2, 3) / d**0.5
    k = attn.conv_k(x).view(b, n, d, t).transpose(2, 3)
    v = attn.conv_v(x).view(b, n, d, t).transpose(2, 3)
    scores = q @ k.transpose(-2, -1)
    rel_k = q @ attn.emb_rel_k[0].transpose(0, 1)
    for i in range(t):
        for j in range(max(0, i - WINDOW), min(t, i + WINDOW + 1)):
            scores[..., i, j] = scores[..., i, j] + rel_k[..., i, j - i + WINDOW]
    p = torch.softmax(scores.masked_fill(mask == 0, -1e4), dim=-1)
    p_rel = torch.zeros(b, n, t, 2 * WINDOW + 1)
    for i in range(t):
        for j in range(max(0, i - WINDOW), min(t, i + WINDOW + 1)):
            p_rel[..., i, j - i + WINDOW] = p[..., i, j]
    out = p @ v + p_rel @ attn.emb_rel_v[0]
    return attn.conv_o(out.transpose(2, 3).reshape(b, c, t))


@pytest.mark.parametrize("length", [1, 2, 4, 5, 9, 10, 23])
def test_the_band_is_the_dense_formula_exactly(length: int) -> None:
    torch.manual_seed(length)
    attn = RelativeMultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 8, length)
    mask = torch.ones(1, 1, length, length)
    mask[..., -1:] = 0 if length > 2 else 1  # a padded last key, where there is room
    with torch.inference_mode():
        assert torch.equal(attn(x, mask), dense(attn, x, mask))


@pytest.mark.parametrize("length", [1, 7, 40])
def test_no_mask_is_a_mask_of_ones_exactly(length: int) -> None:
    """The exported graphs pass None (one unpadded sentence) where PyTorch passes ones."""
    from yomiage.model.attention import AttentionEncoder

    torch.manual_seed(length)
    encoder = AttentionEncoder(8, 16, 2, 3, 3, 4).eval()
    x, g = torch.randn(1, 8, length), torch.randn(1, 4, 1)
    with torch.inference_mode():
        ones = encoder(x, torch.ones(1, 1, length), g)
        assert torch.equal(encoder(x, None, g), ones)
