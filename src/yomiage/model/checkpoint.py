"""Reading SBV2 generator weights: weight-norm folding, training keys, checks.

Every problem is a :class:`ModelLoadError` that names the file and the key,
so a truncated download or a checkpoint of another architecture is reported
as such instead of as a KeyError deep inside PyTorch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from yomiage.errors import ModelLoadError
from yomiage.sbv2.safetensors import iter_tensors

_TRAINING_ONLY_PREFIXES = ("enc_q.", "sdp.post_", "sdp.flows.1.", "net_d.", "net_dur_disc.")
_TRAINING_ONLY_KEYS = frozenset({"iteration"})
_WEIGHT_NORM_PAIRS = (
    (".weight_g", ".weight_v"),
    (".parametrizations.weight.original0", ".parametrizations.weight.original1"),
)


def read_safetensors(path: Path) -> dict[str, Tensor]:
    """All tensors of ``path`` on the CPU, floats as float32, read one at a time."""
    return {name: torch.from_numpy(array) for name, array in iter_tensors(path)}


def fold_weight_norm(g: Tensor, v: Tensor) -> Tensor:
    """``g * v / ||v||`` with the norm over every axis but 0 (spec §1.5)."""
    norm = torch.linalg.vector_norm(v, dim=tuple(range(1, v.dim())), keepdim=True)
    return g * v / norm


def inference_state_dict(tensors: Mapping[str, Tensor], path: Path) -> dict[str, Tensor]:
    """Drop training-only tensors and fold both weight-norm spellings into ``.weight``."""
    out: dict[str, Tensor] = {}
    for key, value in tensors.items():
        if key in _TRAINING_ONLY_KEYS or key.startswith(_TRAINING_ONLY_PREFIXES):
            continue
        for g_suffix, v_suffix in _WEIGHT_NORM_PAIRS:
            if key.endswith(v_suffix):
                break
            if key.endswith(g_suffix):
                module = key[: -len(g_suffix)]
                v_key = module + v_suffix
                if v_key not in tensors:
                    raise ModelLoadError(f"{path}: {key} has no matching {v_key}")
                g, v = value, tensors[v_key]
                if g.dim() != v.dim() or g.shape[0] != v.shape[0]:
                    raise ModelLoadError(
                        f"{path}: weight-norm tensors {key} {tuple(g.shape)} and "
                        f"{v_key} {tuple(v.shape)} do not fit together"
                    )
                out[module + ".weight"] = fold_weight_norm(g, v)
                break
        else:
            out[key] = value
    return out


def check_against(model: torch.nn.Module, state: Mapping[str, Tensor], path: Path) -> None:
    """Every parameter the model needs must be present with its exact shape."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    wrong = [
        f"{k} {tuple(state[k].shape)} (expected {tuple(v.shape)})"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ModelLoadError(
            f"{path}: missing {len(missing)} tensors needed for inference: {shown}"
        )
    if wrong:
        shown = "; ".join(wrong[:5]) + (f" and {len(wrong) - 5} more" if len(wrong) > 5 else "")
        raise ModelLoadError(f"{path}: tensors with the wrong shape for this config: {shown}")
