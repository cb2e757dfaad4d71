"""The ``config.json`` of an SBV2 JP-Extra voice, parsed into typed dataclasses.

Only the keys inference needs are read; unknown keys are ignored, missing
optional keys take the JP-Extra defaults (spec §1.2), and anything that would
make the weights unusable is a :class:`ModelLoadError` naming the file and key.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yomiage.errors import ModelLoadError

# Fixed by the architecture, never read from the config (spec §1.3).
STYLE_DIM = 256
N_SYMBOLS = 112
N_TONES = 12
N_LANGUAGES = 3


@dataclass(frozen=True)
class ModelHyperparameters:
    inter_channels: int = 192
    hidden_channels: int = 192
    filter_channels: int = 768
    n_heads: int = 2
    n_layers: int = 6
    kernel_size: int = 3
    resblock: str = "1"
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    upsample_rates: tuple[int, ...] = (8, 8, 2, 2, 2)
    upsample_initial_channel: int = 512
    upsample_kernel_sizes: tuple[int, ...] = (16, 16, 8, 2, 2)
    gin_channels: int = 512


@dataclass(frozen=True)
class VoiceConfig:
    """What a JP-Extra voice needs to be built and run."""

    name: str
    version: str
    sampling_rate: int = 44100
    hop_length: int = 512
    add_blank: bool = True
    n_speakers: int = 1
    spk2id: Mapping[str, int] = field(default_factory=lambda: {"speaker": 0})
    style2id: Mapping[str, int] = field(default_factory=lambda: {"Neutral": 0})
    model: ModelHyperparameters = field(default_factory=ModelHyperparameters)


def _section(data: Mapping[str, Any], key: str, path: Path) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ModelLoadError(f"{path}: '{key}' must be an object")
    return value


def _typed(section: Mapping[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = section.get(key, default)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ModelLoadError(f"{where}.{key} must be an integer, got {value!r}")
    if kind is bool and not isinstance(value, bool):
        raise ModelLoadError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _int_tuple(
    section: Mapping[str, Any], key: str, default: tuple[int, ...], where: str
) -> tuple[int, ...]:
    value = section.get(key, default)
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value
    ):
        raise ModelLoadError(f"{where}.{key} must be a list of positive integers, got {value!r}")
    return tuple(value)


def _name_map(
    section: Mapping[str, Any], key: str, default: dict[str, int], where: str
) -> dict[str, int]:
    value = section.get(key, default)
    if not isinstance(value, Mapping) or not value:
        raise ModelLoadError(f"{where}.{key} must be a non-empty object of name -> id")
    out: dict[str, int] = {}
    for name, idx in value.items():
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            raise ModelLoadError(f"{where}.{key}[{name!r}] must be a non-negative integer id")
        out[str(name)] = idx
    return out


def parse_config(data: Any, path: Path) -> VoiceConfig:
    """Validate a decoded ``config.json``; ``path`` is only used in messages."""
    if not isinstance(data, Mapping):
        raise ModelLoadError(f"{path}: a voice config must be a JSON object")
    version = data.get("version")
    if not isinstance(version, str):
        raise ModelLoadError(f"{path}: required key 'version' is missing (e.g. '2.7.0-JP-Extra')")
    if not version.endswith("JP-Extra"):
        raise ModelLoadError(
            f"{path}: version {version!r} is not a JP-Extra model; "
            "yomiage runs SBV2 JP-Extra voices"
        )
    d = _section(data, "data", path)
    m = _section(data, "model", path)
    where_d, where_m = f"{path}: data", f"{path}: model"
    dilations = m.get("resblock_dilation_sizes", [[1, 3, 5]] * 3)
    if not isinstance(dilations, list) or not all(isinstance(x, list) for x in dilations):
        raise ModelLoadError(f"{where_m}.resblock_dilation_sizes must be a list of lists")
    hyper = ModelHyperparameters(
        inter_channels=_typed(m, "inter_channels", int, 192, where_m),
        hidden_channels=_typed(m, "hidden_channels", int, 192, where_m),
        filter_channels=_typed(m, "filter_channels", int, 768, where_m),
        n_heads=_typed(m, "n_heads", int, 2, where_m),
        n_layers=_typed(m, "n_layers", int, 6, where_m),
        kernel_size=_typed(m, "kernel_size", int, 3, where_m),
        resblock=str(m.get("resblock", "1")),
        resblock_kernel_sizes=_int_tuple(m, "resblock_kernel_sizes", (3, 7, 11), where_m),
        resblock_dilation_sizes=tuple(
            _int_tuple({"d": x}, "d", (1,), f"{where_m}.resblock_dilation_sizes") for x in dilations
        ),
        upsample_rates=_int_tuple(m, "upsample_rates", (8, 8, 2, 2, 2), where_m),
        upsample_initial_channel=_typed(m, "upsample_initial_channel", int, 512, where_m),
        upsample_kernel_sizes=_int_tuple(m, "upsample_kernel_sizes", (16, 16, 8, 2, 2), where_m),
        gin_channels=_typed(m, "gin_channels", int, 512, where_m),
    )
    spk2id = _name_map(d, "spk2id", {"speaker": 0}, where_d)
    config = VoiceConfig(
        name=str(data.get("model_name") or path.parent.name),
        version=version,
        sampling_rate=_typed(d, "sampling_rate", int, 44100, where_d),
        hop_length=_typed(d, "hop_length", int, 512, where_d),
        add_blank=_typed(d, "add_blank", bool, True, where_d),
        n_speakers=_typed(d, "n_speakers", int, len(spk2id), where_d),
        spk2id=spk2id,
        style2id=_name_map(d, "style2id", {"Neutral": 0}, where_d),
        model=hyper,
    )
    _check_consistency(config, path)
    return config


def _check_consistency(config: VoiceConfig, path: Path) -> None:
    m = config.model
    if not 8000 <= config.sampling_rate <= 192000:
        raise ModelLoadError(
            f"{path}: data.sampling_rate {config.sampling_rate} is not a sample rate (8000-192000)"
        )
    sizes = ("inter_channels", "hidden_channels", "filter_channels", "n_heads", "n_layers",
             "kernel_size", "upsample_initial_channel", "gin_channels")  # fmt: skip
    for name in sizes:
        if getattr(m, name) < 1:
            raise ModelLoadError(f"{path}: model.{name} must be a positive integer")
    if math.prod(m.upsample_rates) != config.hop_length:
        raise ModelLoadError(
            f"{path}: data.hop_length {config.hop_length} must equal the product of "
            f"model.upsample_rates {list(m.upsample_rates)}"
        )
    if len(m.upsample_rates) != len(m.upsample_kernel_sizes):
        raise ModelLoadError(f"{path}: upsample_rates and upsample_kernel_sizes differ in length")
    if len(m.resblock_kernel_sizes) != len(m.resblock_dilation_sizes):
        raise ModelLoadError(f"{path}: resblock kernel and dilation lists differ in length")
    if m.resblock not in ("1", "2"):
        raise ModelLoadError(f'{path}: model.resblock must be "1" or "2", got {m.resblock!r}')
    if m.n_layers < 3:
        raise ModelLoadError(f"{path}: model.n_layers must be at least 3 (speaker conditioning)")
    if m.hidden_channels % m.n_heads or m.inter_channels % 2:
        raise ModelLoadError(
            f"{path}: hidden_channels must divide by n_heads, inter_channels be even"
        )
    if config.n_speakers < 1 or max(config.spk2id.values()) >= config.n_speakers:
        raise ModelLoadError(
            f"{path}: data.spk2id has ids beyond data.n_speakers {config.n_speakers}"
        )


def load_config(path: Path | str) -> VoiceConfig:
    path = Path(path)
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{path} not found: a voice folder needs a config.json") from exc
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not a readable JSON file: {exc}") from exc
    return parse_config(data, path)
