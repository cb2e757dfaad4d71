"""What a planned voice tensor is: its key, shape and how to fill it.

:mod:`yomiage.devtools.voice_plan` describes every tensor of a voice with these
types before anything is drawn, and :mod:`yomiage.devtools.voice_writer` turns
the descriptions into arrays. This module also holds :class:`Dims`, the widths
read from a voice config, and the entries of the layers every part is built of.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Counter",
    "Dims",
    "Entry",
    "Fill",
    "Normal",
    "Rows",
    "WeightNormGain",
    "conv",
    "he_normal",
    "layer_norm",
    "linear",
    "wn_conv",
]

# Gains of the random init; see yomiage.devtools.voice_plan for the others.
_BIAS_STD = 0.02
_LN_GAMMA_STD = 0.05  # gamma ~ 1 + N(0, .), beta ~ N(0, _BIAS_STD)


@dataclass(frozen=True)
class Normal:
    """Independent N(mean, std²) entries; ``std = 0`` gives a constant.

    ``zero_dc`` makes a conv weight blind to a constant input (see
    ``voice_writer._remove_dc``); ``stride`` is the ConvTranspose1d stride it needs.
    ``norm`` then rescales the whole draw to exactly that Frobenius norm,
    removing the luck of a small draw.
    """

    std: float
    mean: float = 0.0
    zero_dc: Literal["conv", "transposed"] | None = None
    stride: int = 1
    norm: float | None = None


@dataclass(frozen=True)
class Rows:
    """Consecutive blocks along axis 0, each ``count`` rows drawn from its own normal."""

    blocks: tuple[tuple[int, Normal], ...]


@dataclass(frozen=True)
class WeightNormGain:
    """A legacy ``weight_g``: ``gain`` times the norm of ``direction`` per axis-0 index.

    ``weight_v`` itself is drawn from N(0, 1), so ``weight_g ≠ ||weight_v||``:
    a loader that ignores ``weight_g`` produces garbage instead of passing by luck,
    and the folded weight ``g * v / ||v||`` is ``gain * v`` with entries of
    standard deviation ``gain``.
    """

    direction: str
    gain: float


@dataclass(frozen=True)
class Counter:
    """The int64 ``iteration`` tensor SBV2 stores next to the weights."""

    value: int


Fill = Normal | Rows | WeightNormGain | Counter


@dataclass(frozen=True)
class Entry:
    key: str
    shape: tuple[int, ...]
    fill: Fill

    @property
    def dtype(self) -> str:
        return "int64" if isinstance(self.fill, Counter) else "float32"


@dataclass(frozen=True)
class Dims:
    """The widths that decide every shape, read from a voice config."""

    hidden: int
    inter: int
    filters: int
    heads: int
    layers: int
    kernel: int
    gin: int
    speakers: int
    spec_channels: int
    bert_dim: int
    resblock: str
    resblock_kernels: tuple[int, ...]
    resblock_dilations: tuple[tuple[int, ...], ...]
    upsample_rates: tuple[int, ...]
    upsample_kernels: tuple[int, ...]
    upsample_initial: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any], bert_dim: int) -> Dims:
        model, data = config["model"], config["data"]
        return cls(
            hidden=int(model["hidden_channels"]),
            inter=int(model["inter_channels"]),
            filters=int(model["filter_channels"]),
            heads=int(model["n_heads"]),
            layers=int(model["n_layers"]),
            kernel=int(model["kernel_size"]),
            gin=int(model["gin_channels"]),
            speakers=int(data["n_speakers"]),
            spec_channels=int(data["filter_length"]) // 2 + 1,
            bert_dim=bert_dim,
            resblock=str(model["resblock"]),
            resblock_kernels=tuple(int(k) for k in model["resblock_kernel_sizes"]),
            resblock_dilations=tuple(
                tuple(int(d) for d in ds) for ds in model["resblock_dilation_sizes"]
            ),
            upsample_rates=tuple(int(r) for r in model["upsample_rates"]),
            upsample_kernels=tuple(int(k) for k in model["upsample_kernel_sizes"]),
            upsample_initial=int(model["upsample_initial_channel"]),
        )


def he_normal(fan_in: int, gain: float = 1.0) -> Normal:
    return Normal(gain / math.sqrt(fan_in))


def conv(key: str, c_out: int, c_in: int, k: int, gain: float = 1.0) -> Iterator[Entry]:
    """A plain Conv1d with bias; ``key`` is the module path."""
    yield Entry(f"{key}.weight", (c_out, c_in, k), he_normal(c_in * k, gain))
    yield Entry(f"{key}.bias", (c_out,), Normal(_BIAS_STD))


def linear(key: str, out: int, in_: int, gain: float = 1.0) -> Iterator[Entry]:
    yield Entry(f"{key}.weight", (out, in_), he_normal(in_, gain))
    yield Entry(f"{key}.bias", (out,), Normal(_BIAS_STD))


def layer_norm(key: str, channels: int) -> Iterator[Entry]:
    yield Entry(f"{key}.gamma", (channels,), Normal(_LN_GAMMA_STD, 1.0))
    yield Entry(f"{key}.beta", (channels,), Normal(_BIAS_STD))


def wn_conv(
    key: str,
    shape: tuple[int, int, int],
    bias: int,
    std: float,
    direction: Normal = Normal(1.0),
) -> Iterator[Entry]:
    """A weight-normalised (transposed) conv in SBV2's legacy naming.

    ``shape`` is the stored weight shape (``[out, in, k]`` for Conv1d, ``[in, out, k]``
    for ConvTranspose1d); the norm runs over every axis but 0 (spec §1.5).
    """
    yield Entry(f"{key}.bias", (bias,), Normal(_BIAS_STD))
    yield Entry(f"{key}.weight_g", (shape[0], 1, 1), WeightNormGain(f"{key}.weight_v", std))
    yield Entry(f"{key}.weight_v", shape, direction)
