"""Writing a synthetic voice folder: drawing the planned tensors, calibrating, saving.

:func:`make_voice` draws every tensor of the :mod:`~yomiage.devtools.voice_plan`
from its own seeded stream, rescales the decoder's last conv after a small numpy
forward pass so the waveform is loud but not clipped, and writes
``config.json``, the safetensors weights and ``style_vectors.npy``. Needs only
``numpy`` and ``safetensors`` (imported when called).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.devtools.sizes import BERT_DIM, STYLE_DIM, Size, check_seed
from yomiage.devtools.voice_config import voice_config
from yomiage.devtools.voice_plan import ITERATION, TARGET_FRAMES_PER_TOKEN, plan_entries
from yomiage.devtools.voice_spec import Counter, Dims, Entry, Normal, Rows, WeightNormGain

__all__ = ["make_voice"]

_AUDIO_RMS = 0.25  # target RMS before tanh: loud, yet peaks stay clear of saturation
_CALIBRATION_FRAMES = 16


# --------------------------------------------------------------------------------------
# Drawing the planned tensors


def _rng(seed: int, key: str) -> np.random.Generator:
    """One independent stream per tensor, so no tensor depends on the plan's order."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def _normal(rng: np.random.Generator, shape: tuple[int, ...], n: Normal) -> npt.NDArray[Any]:
    values = rng.standard_normal(shape, dtype=np.float32)
    values *= np.float32(n.std)
    if n.zero_dc is not None:
        values = _remove_dc(values, transposed=n.zero_dc == "transposed", stride=n.stride)
    if n.norm is not None:
        values *= np.float32(n.norm / np.sqrt(np.square(values, dtype=np.float64).sum()))
    values += np.float32(n.mean)
    return values


def _remove_dc(values: npt.NDArray[Any], *, transposed: bool, stride: int) -> npt.NDArray[Any]:
    """Make every output channel of a decoder conv ignore a constant input.

    Every decoder conv follows a leaky ReLU, whose output has a positive mean of
    about 0.36 of its standard deviation in every channel. Random weights turn
    that common offset into a DC component that grows stage after stage until
    it swamps the signal (and, after ``conv_post``, leaves the waveform silent
    or stuck at one sign). Weights that sum to zero per output channel, over the
    input channels and the taps, map an equal offset on all inputs to zero
    while still passing the differences between channels, which carry the signal.

    A ConvTranspose1d (``[in, out, k]``) builds each output phase from the taps
    ``k ≡ phase (mod stride)``, so those groups are centred separately, which
    also keeps a constant input from turning into a pattern at the frame rate.
    """
    # Means in float64: the float32 result then cannot depend on summation order.
    wide = values.astype(np.float64)
    c_in, c_out, k = values.shape
    if not transposed:
        wide -= wide.mean(axis=(1, 2), keepdims=True)
    elif k % stride:
        wide -= wide.mean(axis=(0, 2), keepdims=True)
    else:
        grouped = wide.reshape(c_in, c_out, k // stride, stride)
        grouped -= grouped.mean(axis=(0, 2), keepdims=True)
    centred: npt.NDArray[Any] = wide.astype(np.float32)
    return centred


def _materialise(entries: Sequence[Entry], seed: int) -> dict[str, npt.NDArray[Any]]:
    tensors: dict[str, npt.NDArray[Any]] = {}
    # weight_v must exist before its weight_g; the plan lists g first like upstream.
    for entry in sorted(entries, key=lambda e: isinstance(e.fill, WeightNormGain)):
        fill, rng = entry.fill, _rng(seed, entry.key)
        if isinstance(fill, Counter):
            tensors[entry.key] = np.full(entry.shape, fill.value, dtype=np.int64)
        elif isinstance(fill, Normal):
            tensors[entry.key] = _normal(rng, entry.shape, fill)
        elif isinstance(fill, Rows):
            blocks = [_normal(rng, (n, *entry.shape[1:]), b) for n, b in fill.blocks]
            tensors[entry.key] = np.concatenate(blocks, axis=0)
        else:
            v = tensors[fill.direction].astype(np.float64)
            norm = np.sqrt((v.reshape(v.shape[0], -1) ** 2).sum(axis=1))
            g = (norm * fill.gain).astype(np.float32)
            tensors[entry.key] = g.reshape(entry.shape)
    return {e.key: tensors[e.key] for e in entries}


# --------------------------------------------------------------------------------------
# Decoder level calibration (a small numpy forward pass of the generator, spec §5.9)


def _fold_weight_norm(tensors: Mapping[str, npt.NDArray[Any]], key: str) -> npt.NDArray[Any]:
    if f"{key}.weight" in tensors:
        return tensors[f"{key}.weight"].astype(np.float64)
    v = tensors[f"{key}.weight_v"].astype(np.float64)
    g = tensors[f"{key}.weight_g"].astype(np.float64)
    norm = np.sqrt((v.reshape(v.shape[0], -1) ** 2).sum(axis=1))
    folded: npt.NDArray[Any] = v * (g.reshape(-1) / norm).reshape(-1, 1, 1)
    return folded


def _conv1d(
    x: npt.NDArray[Any], w: npt.NDArray[Any], b: npt.NDArray[Any] | None, dilation: int = 1
) -> npt.NDArray[Any]:
    """Same-length Conv1d of ``x`` ``[C_in, T]`` with ``w`` ``[C_out, C_in, K]``."""
    k = w.shape[2]
    pad = dilation * (k - 1) // 2
    xp = np.pad(x, ((0, 0), (pad, pad)))
    t = x.shape[1]
    taps = np.stack([xp[:, j * dilation : j * dilation + t] for j in range(k)])  # [K, C_in, T]
    out: npt.NDArray[Any] = np.tensordot(w.transpose(0, 2, 1), taps, axes=([1, 2], [0, 1]))
    return out if b is None else out + b.astype(np.float64)[:, None]


def _conv_transpose1d(
    x: npt.NDArray[Any], w: npt.NDArray[Any], b: npt.NDArray[Any], stride: int
) -> npt.NDArray[Any]:
    """ConvTranspose1d of ``x`` ``[C_in, T]`` with ``w`` ``[C_in, C_out, K]``, padding (K-r)/2."""
    c_out, k = w.shape[1], w.shape[2]
    t = x.shape[1]
    contrib = np.tensordot(w, x, axes=([0], [0]))  # [C_out, K, T]
    full = np.zeros((c_out, (t - 1) * stride + k))
    for j in range(k):
        full[:, j : j + (t - 1) * stride + 1 : stride] += contrib[:, j, :]
    pad = (k - stride) // 2
    return full[:, pad : pad + t * stride] + b.astype(np.float64)[:, None]


def _leaky(x: npt.NDArray[Any], slope: float) -> npt.NDArray[Any]:
    return np.where(x >= 0, x, slope * x)


def _decoder_rms(tensors: Mapping[str, npt.NDArray[Any]], d: Dims, seed: int) -> float:
    """RMS of the generator's output before ``tanh`` for a N(0, 1) latent, speaker 0."""
    z = _rng(seed, "calibration").standard_normal((d.inter, _CALIBRATION_FRAMES))
    g = tensors["emb_g.weight"][0].astype(np.float64)[:, None]
    x = _conv1d(z, tensors["dec.conv_pre.weight"], tensors["dec.conv_pre.bias"])
    x = x + _conv1d(g, tensors["dec.cond.weight"], tensors["dec.cond.bias"])
    n_kernels = len(d.resblock_kernels)
    for i, rate in enumerate(d.upsample_rates):
        x = _leaky(x, 0.1)
        x = _conv_transpose1d(
            x, _fold_weight_norm(tensors, f"dec.ups.{i}"), tensors[f"dec.ups.{i}.bias"], rate
        )
        total = np.zeros_like(x)
        for j, dilations in enumerate(d.resblock_dilations):
            block, y = f"dec.resblocks.{i * n_kernels + j}", x
            for n, dilation in enumerate(dilations):
                if d.resblock == "1":
                    pairs = [(f"{block}.convs1.{n}", dilation), (f"{block}.convs2.{n}", 1)]
                else:
                    pairs = [(f"{block}.convs.{n}", dilation)]
                t = y
                for key, dil in pairs:
                    t = _conv1d(
                        _leaky(t, 0.1), _fold_weight_norm(tensors, key), tensors[f"{key}.bias"], dil
                    )
                y = y + t
            total += y
        x = total / n_kernels
    out = _conv1d(_leaky(x, 0.01), tensors["dec.conv_post.weight"].astype(np.float64), None)
    return float(np.sqrt(np.mean(out**2)))


def _calibrate_decoder(tensors: dict[str, npt.NDArray[Any]], d: Dims, seed: int) -> None:
    """Scale ``dec.conv_post`` so the waveform is loud but not clipped by ``tanh``.

    The per-layer gains keep the decoder near unit variance on average, but a
    narrow decoder (the tiny one ends in one or two channels) varies a lot from
    seed to seed. One forward pass on a random latent measures the actual level.
    The factor is rounded to three significant digits so that last-bit BLAS
    differences between machines cannot change the written bytes.
    """
    rms = _decoder_rms(tensors, d, seed)
    if not math.isfinite(rms) or rms <= 0.0:
        return
    factor = float(f"{_AUDIO_RMS / rms:.3g}")
    tensors["dec.conv_post.weight"] = (tensors["dec.conv_post.weight"] * factor).astype(np.float32)


# --------------------------------------------------------------------------------------
# Style vectors and the folder


def _style_vectors(seed: int, num_styles: int) -> npt.NDArray[np.float32]:
    """Row 0 is the mean of the others, as SBV2 makes the Neutral row (spec §1.4).

    Real style vectors are averages of speaker embeddings: a large shared part
    and small per-style offsets, which is what the draw imitates.
    """
    rng = _rng(seed, "style_vectors.npy")
    base = rng.standard_normal(STYLE_DIM)
    if num_styles == 1:
        return base[None, :].astype(np.float32)
    rows = base + 0.3 * rng.standard_normal((num_styles - 1, STYLE_DIM))
    mean = rows.mean(axis=0, keepdims=True)
    return np.concatenate([mean, rows], axis=0).astype(np.float32)


def _import_safetensors_numpy() -> Any:
    try:
        import safetensors.numpy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "writing synthetic voices needs safetensors: pip install 'yomiage[torch]' "
            "(from a checkout: pip install '.[torch]')"
        ) from exc
    return safetensors.numpy


def _write_json(path: Path, value: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def make_voice(
    out_dir: Path,
    size: Size,
    seed: int,
    *,
    name: str = "synthetic",
    n_speakers: int = 1,
    styles: Sequence[str] = ("Neutral", "Happy", "Sad", "Angry"),
    frames_per_token: float = TARGET_FRAMES_PER_TOKEN,
) -> Path:
    """Write a seeded random SBV2 JP-Extra voice folder and return its path.

    The folder holds ``config.json``, ``<name>_e1_s100.safetensors`` (float32,
    every generator key including ``enc_q.*``, ``sdp.post_*``, ``sdp.flows.1.*``
    and ``iteration``, legacy weight-norm names) and ``style_vectors.npy``.
    ``"full"`` has the upstream default widths (about 293 MB), ``"tiny"`` the
    tiny fixture's (about 3.4 MB). A ``"tiny"`` voice expects 64-wide BERT
    features, i.e. the ``"tiny"`` :func:`~yomiage.devtools.bert_writer.make_bert`
    model; a ``"full"`` one expects 1024. ``frames_per_token`` is the median
    pre-``ceil`` duration both duration predictors give at ``length_scale`` 1 (see
    :data:`~yomiage.devtools.voice_plan.TARGET_FRAMES_PER_TOKEN`). Equal arguments
    give byte-identical files. Existing files of the same names are overwritten.
    """
    check_seed(seed)
    if not 0.5 <= frames_per_token <= 100.0:
        raise ValueError(f"frames_per_token must be in [0.5, 100], not {frames_per_token!r}")
    config = voice_config(size, name=name, n_speakers=n_speakers, styles=styles)
    safetensors_numpy = _import_safetensors_numpy()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / "config.json", config)
    tensors = _materialise(plan_entries(config, BERT_DIM[size], frames_per_token), seed)
    _calibrate_decoder(tensors, Dims.from_config(config, BERT_DIM[size]), seed)
    weights = out_dir / f"{name}_e1_s{ITERATION}.safetensors"
    safetensors_numpy.save_file(tensors, str(weights), metadata={"format": "pt"})
    np.save(out_dir / "style_vectors.npy", _style_vectors(seed, len(styles)))
    return out_dir
