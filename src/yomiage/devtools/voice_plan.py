"""The tensor plan of a synthetic voice: every generator key, its shape and its init.

:func:`plan_entries` lists the tensors of an SBV2 JP-Extra generator file in the
upstream module order, each with the distribution it is drawn from; nothing is
drawn here (:mod:`yomiage.devtools.voice_writer` does that). The gains are
chosen so that activations keep unit scale through every layer and both
duration predictors give about :data:`TARGET_FRAMES_PER_TOKEN` frames per token.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, Literal, cast

from yomiage.devtools.sizes import BERT_DIM, STYLE_DIM, Size
from yomiage.devtools.voice_config import voice_config
from yomiage.devtools.voice_spec import (
    Counter,
    Dims,
    Entry,
    Normal,
    Rows,
    conv,
    he_normal,
    layer_norm,
    linear,
    wn_conv,
)

__all__ = ["ITERATION", "TARGET_FRAMES_PER_TOKEN", "plan_entries", "plan_voice"]

#: Default median duration, in frames, that both duration predictors give a token
#: before ``ceil`` (spec §5.1 step 4). After ``ceil`` nearly every token gets 3
#: frames (35 ms at 44.1 kHz / hop 512), about 70 ms per phone with its blank.
#: Japanese speech has about 3.5 tokens per mora (about 3.8 counting pauses and
#: pads), so this is about 0.12-0.13 s per mora, near the natural rate of about
#: 0.1 s per mora that synthetic voices are meant to speak at (the next step
#: down, 2 frames, would be about 0.09 s). Halfway between two integers, so
#: ``ceil`` is insensitive to small numeric differences.
TARGET_FRAMES_PER_TOKEN = 2.5

#: The step in the weights file name ``<name>_e1_s100`` and the ``iteration`` tensor.
ITERATION = 100

# Fixed by the architecture, never read from config.json (spec §1.3).
_N_SYMBOLS = 112
_N_TONES = 12
_N_LANGUAGES = 3
_REL_WINDOW = 4
_FLOW_LAYERS = 6
_FLOW_KERNEL = 5
_N_FLOWS = 4
_DP_FILTER = 256
_DP_KERNEL = 3
_SDP_KERNEL = 3
_SDP_DDS_LAYERS = 3
_SDP_FLOWS = 4
_SPLINE_BINS = 10
_POSTERIOR_KERNEL = 5
_POSTERIOR_LAYERS = 16
_MIN_DERIVATIVE = 1e-3

# Gains of the random init. Each is the standard deviation of a weight times
# sqrt(fan_in) unless said otherwise; 1.0 keeps a unit-variance input at unit
# variance through a linear layer. Bias and layer-norm spreads are in voice_spec.
_COND_GAIN = 0.5  # speaker conditioning: a nudge, not the whole signal
_PRIOR_GAIN = 0.5  # enc_p.proj: m_p and logs_p of about 0.5 standard deviation
_FLOW_POST_GAIN = 0.3  # mean of each coupling layer (upstream starts it at zero)
_DP_PROJ_NORM = 0.05  # bounds the token-to-token spread and the offset of log-durations
_SDP_NOISE_LOG_STD = 0.3  # spread of SDP log-durations at noise_scale_w = 0.8
_SDP_SPLINE_GAIN = 0.02  # how far the SDP splines move from identity
_LEAKY_POWER = 0.5 * (1.0 + 0.1**2)  # E[leaky_relu(x, 0.1)^2] for x ~ N(0, 1)
_RESIDUAL_GAIN = 0.5  # second conv of each decoder residual unit
_DEC_PRE_GAIN = 1.5
_DEC_POST_GAIN = 0.35  # before calibration (see voice_writer._calibrate_decoder)
_DC_FREE_MIN_CHANNELS = 8  # below this, zero-sum weights would cancel the signal too


def _attention_encoder(key: str, d: Dims, layers: int, ffn_kernel: int) -> Iterator[Entry]:
    """The relative-position transformer of ``enc_p`` and the flows (spec §5.4)."""
    c, head = d.hidden, d.hidden // d.heads
    yield from linear(f"{key}.spk_emb_linear", c, d.gin, _COND_GAIN)
    for i in range(layers):
        a = f"{key}.attn_layers.{i}"
        yield Entry(f"{a}.emb_rel_k", (1, 2 * _REL_WINDOW + 1, head), Normal(head**-0.5))
        yield Entry(f"{a}.emb_rel_v", (1, 2 * _REL_WINDOW + 1, head), Normal(head**-0.5))
        for proj in ("q", "k", "v", "o"):
            yield from conv(f"{a}.conv_{proj}", c, c, 1)
    for i in range(layers):
        yield from layer_norm(f"{key}.norm_layers_1.{i}", c)
    for i in range(layers):
        # ReLU sits between the two FFN convs: He gain sqrt(2) on the first.
        yield from conv(f"{key}.ffn_layers.{i}.conv_1", d.filters, c, ffn_kernel, math.sqrt(2))
        yield from conv(f"{key}.ffn_layers.{i}.conv_2", c, d.filters, ffn_kernel)
    for i in range(layers):
        yield from layer_norm(f"{key}.norm_layers_2.{i}", c)


def _text_encoder(d: Dims) -> Iterator[Entry]:
    h = d.hidden
    # Each input term ends up at about N(0, 1) after the sqrt(H) scaling (spec §5.3).
    yield Entry("enc_p.emb.weight", (_N_SYMBOLS, h), Normal(h**-0.5))
    yield Entry("enc_p.tone_emb.weight", (_N_TONES, h), Normal(h**-0.5))
    yield Entry("enc_p.language_emb.weight", (_N_LANGUAGES, h), Normal(h**-0.5))
    yield from conv("enc_p.bert_proj", h, d.bert_dim, 1, h**-0.5)
    yield from linear("enc_p.style_proj", h, STYLE_DIM, h**-0.5)
    yield from _attention_encoder("enc_p.encoder", d, d.layers, d.kernel)
    yield from conv("enc_p.proj", 2 * d.inter, h, 1, _PRIOR_GAIN)


def _decoder(d: Dims) -> Iterator[Entry]:
    """The HiFi-GAN generator, with gains that keep every stage near unit variance.

    A ConvTranspose1d of kernel k and stride r sums ``k / r`` taps per output
    sample; the leaky ReLU before every conv keeps ``_LEAKY_POWER`` of the
    power. The residual branches are damped so that the sum of three residual
    units does not blow up over five stages. Convs wide enough are made blind to
    DC (``voice_writer._remove_dc``), and ``conv_post`` is rescaled after drawing
    by ``voice_writer._calibrate_decoder``.
    """
    c0 = d.upsample_initial
    yield from conv("dec.conv_pre", c0, d.inter, 7, _DEC_PRE_GAIN)
    n_kernels = len(d.resblock_kernels)
    for i, (rate, k) in enumerate(zip(d.upsample_rates, d.upsample_kernels, strict=True)):
        c_in, c_out = c0 // 2**i, c0 // 2 ** (i + 1)
        std = 1.0 / math.sqrt(_LEAKY_POWER * c_in * k / rate)
        dc_free = c_in >= _DC_FREE_MIN_CHANNELS
        direction = Normal(1.0, zero_dc="transposed" if dc_free else None, stride=rate)
        yield from wn_conv(f"dec.ups.{i}", (c_in, c_out, k), c_out, std, direction)
    for i in range(len(d.upsample_rates)):
        c = c0 // 2 ** (i + 1)
        kernels = zip(d.resblock_kernels, d.resblock_dilations, strict=True)
        for j, (k, dilations) in enumerate(kernels):
            block = f"dec.resblocks.{i * n_kernels + j}"
            unit = 1.0 / math.sqrt(_LEAKY_POWER * c * k)
            zero_dc: Literal["conv"] | None = "conv" if c >= _DC_FREE_MIN_CHANNELS else None
            shape, dc_free = (c, c, k), Normal(1.0, zero_dc=zero_dc)
            damped = _RESIDUAL_GAIN * unit
            if d.resblock == "1":
                for n in range(len(dilations)):
                    yield from wn_conv(f"{block}.convs1.{n}", shape, c, unit, dc_free)
                for n in range(len(dilations)):
                    yield from wn_conv(f"{block}.convs2.{n}", shape, c, damped, dc_free)
            else:
                for n in range(len(dilations)):
                    yield from wn_conv(f"{block}.convs.{n}", shape, c, damped, dc_free)
    c_last = c0 // 2 ** len(d.upsample_rates)
    post = Normal(1.0, zero_dc="conv", norm=_DEC_POST_GAIN)
    yield Entry("dec.conv_post.weight", (1, c_last, 7), post)
    yield from conv("dec.cond", c0, d.gin, 1, _COND_GAIN)


def _posterior_encoder(d: Dims) -> Iterator[Entry]:
    """``enc_q``: training only, but base checkpoints carry it and loaders must cope."""
    h = d.hidden
    yield from conv("enc_q.pre", h, d.spec_channels, 1)
    for i in range(_POSTERIOR_LAYERS):
        std = 1.0 / math.sqrt(h * _POSTERIOR_KERNEL)
        yield from wn_conv(f"enc_q.enc.in_layers.{i}", (2 * h, h, _POSTERIOR_KERNEL), 2 * h, std)
    for i in range(_POSTERIOR_LAYERS):
        out = 2 * h if i < _POSTERIOR_LAYERS - 1 else h
        yield from wn_conv(f"enc_q.enc.res_skip_layers.{i}", (out, h, 1), out, h**-0.5)
    cond = 2 * h * _POSTERIOR_LAYERS
    yield from wn_conv("enc_q.enc.cond_layer", (cond, d.gin, 1), cond, d.gin**-0.5)
    yield from conv("enc_q.proj", 2 * d.inter, h, 1)


def _flow(d: Dims) -> Iterator[Entry]:
    half = d.inter // 2
    for f in range(0, 2 * _N_FLOWS, 2):
        yield from conv(f"flow.flows.{f}.pre", d.hidden, half, 1)
        yield from _attention_encoder(f"flow.flows.{f}.enc", d, _FLOW_LAYERS, _FLOW_KERNEL)
        yield from conv(f"flow.flows.{f}.post", half, d.hidden, 1, _FLOW_POST_GAIN)


def _dds_conv(key: str, c: int) -> Iterator[Entry]:
    for i in range(_SDP_DDS_LAYERS):
        yield from conv(f"{key}.convs_sep.{i}", c, 1, _SDP_KERNEL)
    for i in range(_SDP_DDS_LAYERS):
        yield from conv(f"{key}.convs_1x1.{i}", c, c, 1)
    for i in range(_SDP_DDS_LAYERS):
        yield from layer_norm(f"{key}.norms_1.{i}", c)
    for i in range(_SDP_DDS_LAYERS):
        yield from layer_norm(f"{key}.norms_2.{i}", c)


def _identity_derivative() -> float:
    """Unnormalised spline derivative that makes the derivative exactly 1 (spec §5.6)."""
    return math.log(math.expm1(1.0 - _MIN_DERIVATIVE))


def _conv_flow(key: str, c: int) -> Iterator[Entry]:
    """A rational-quadratic spline ConvFlow that stays close to the identity.

    With all-zero widths and heights and the identity derivative, the spline maps
    every input to itself; the projection weights add a slight token-dependent
    bend, and ``_SDP_SPLINE_GAIN`` keeps it slight: larger bends shift the SDP's
    mean log-duration away from the target by a random amount.
    Widths and heights are divided by sqrt(c) at run time, derivatives are not,
    hence the different row scales.
    """
    yield from conv(f"{key}.pre", c, 1, 1)
    yield from _dds_conv(f"{key}.convs", c)
    n_wh, n_d = 2 * _SPLINE_BINS, _SPLINE_BINS - 1
    weight = Rows(
        (
            (n_wh, Normal(_SDP_SPLINE_GAIN)),
            (n_d, Normal(_SDP_SPLINE_GAIN / math.sqrt(c))),
        )
    )
    bias = Rows(((n_wh, Normal(0.0)), (n_d, Normal(0.0, _identity_derivative()))))
    yield Entry(f"{key}.proj.weight", (n_wh + n_d, c, 1), weight)
    yield Entry(f"{key}.proj.bias", (n_wh + n_d,), bias)


def _stochastic_duration_predictor(d: Dims, frames: float) -> Iterator[Entry]:
    """The SDP, tuned so that with zero noise its log-duration is near the DP's.

    In reverse mode the last step is the ElementwiseAffine ``flows.0``:
    ``z = (z - m) * exp(-logs)`` with log-duration in channel 0 (spec §5.6). The
    splines before it keep ``z`` near its input (zero at ``noise_scale_w = 0``),
    so ``m[0] = -log(frames) * exp(logs[0])`` lands on the target, and
    ``exp(-logs[0])`` scales the noise so that ``noise_scale_w = 0.8`` spreads
    log-durations by about ``_SDP_NOISE_LOG_STD``.
    """
    c = d.hidden  # the filter width is overridden by in_channels upstream (spec §5.6)
    logs0 = math.log(0.8 / _SDP_NOISE_LOG_STD)
    m0 = -math.log(frames) * math.exp(logs0)
    affine_m = Rows(((1, Normal(0.0, m0)), (1, Normal(0.0))))
    affine_logs = Rows(((1, Normal(0.0, logs0)), (1, Normal(0.0))))
    yield Entry("sdp.flows.0.m", (2, 1), affine_m)
    yield Entry("sdp.flows.0.logs", (2, 1), affine_logs)
    for f in range(1, 2 * _SDP_FLOWS, 2):
        yield from _conv_flow(f"sdp.flows.{f}", c)
    # The posterior branch is used only in training; plain random values will do.
    yield from conv("sdp.post_pre", c, 1, 1)
    yield from conv("sdp.post_proj", c, c, 1)
    yield from _dds_conv("sdp.post_convs", c)
    yield Entry("sdp.post_flows.0.m", (2, 1), Normal(0.1))
    yield Entry("sdp.post_flows.0.logs", (2, 1), Normal(0.1))
    for f in range(1, 2 * _SDP_FLOWS, 2):
        yield from _conv_flow(f"sdp.post_flows.{f}", c)
    yield from conv("sdp.pre", c, d.hidden, 1)
    yield from conv("sdp.proj", c, c, 1)
    yield from _dds_conv("sdp.convs", c)
    yield from conv("sdp.cond", c, d.gin, 1, _COND_GAIN)


def _duration_predictor(d: Dims, frames: float) -> Iterator[Entry]:
    """The DP: ``logw = proj(x) + bias`` with a small ``proj`` so ``logw ≈ bias``.

    ``x`` is layer-normalised, so ``proj`` adds at most about ``_DP_PROJ_NORM``.
    In a random network most of ``x`` is shared by all tokens of a speaker, so
    that term is mainly a per-voice, per-speaker offset (measured: standard
    deviation 0.03-0.05 in log-duration over seeds) and only a little spread
    between tokens (0.01-0.02); a larger weight would buy spread at the price
    of a less predictable speaking rate.
    """
    yield from conv("dp.conv_1", _DP_FILTER, d.hidden, _DP_KERNEL, math.sqrt(2))
    yield from layer_norm("dp.norm_1", _DP_FILTER)
    yield from conv("dp.conv_2", _DP_FILTER, _DP_FILTER, _DP_KERNEL, math.sqrt(2))
    yield from layer_norm("dp.norm_2", _DP_FILTER)
    yield Entry("dp.proj.weight", (1, _DP_FILTER, 1), he_normal(_DP_FILTER, _DP_PROJ_NORM))
    yield Entry("dp.proj.bias", (1,), Normal(0.0, math.log(frames)))
    yield from conv("dp.cond", d.hidden, d.gin, 1, _COND_GAIN)


def plan_entries(
    config: Mapping[str, Any], bert_dim: int, frames: float = TARGET_FRAMES_PER_TOKEN
) -> list[Entry]:
    """Every tensor of the generator file, in the upstream module order."""
    d = Dims.from_config(config, bert_dim)
    entries = [
        *_text_encoder(d),
        *_decoder(d),
        *_posterior_encoder(d),
        *_flow(d),
        *_stochastic_duration_predictor(d, frames),
        *_duration_predictor(d, frames),
        # Speaker embeddings like nn.Embedding's default: N(0, 1).
        Entry("emb_g.weight", (d.speakers, d.gin), Normal(1.0)),
        Entry("iteration", (1,), Counter(ITERATION)),
    ]
    return entries


def plan_voice(
    size: Size, *, n_speakers: int = 1
) -> dict[str, tuple[tuple[int, ...], Literal["float32", "int64"]]]:
    """Every key ``make_voice`` writes, with its shape and dtype, without writing.

    For ``size="full"`` and one speaker this is exactly the manifest of the
    upstream default JP-Extra generator (spec ``jp_extra_full_state_dict_shapes.json``,
    1268 entries); for ``"tiny"`` with two speakers it is the key set of the tiny
    reference fixture.
    """
    config = voice_config(size, n_speakers=n_speakers)
    return {
        e.key: (e.shape, cast(Literal["float32", "int64"], e.dtype))
        for e in plan_entries(config, BERT_DIM[size])
    }
