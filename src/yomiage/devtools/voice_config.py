"""The ``config.json`` of a synthetic SBV2 JP-Extra voice.

Every section is written as SBV2 2.7 JP-Extra writes it, so loaders see the
real layout; ``"full"`` has the upstream default widths, ``"tiny"`` those of the
tiny reference fixture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from yomiage.devtools.sizes import Size, check_size

__all__ = ["voice_config"]


def _train_section() -> dict[str, Any]:
    """The ``train`` section of an SBV2 JP-Extra config; irrelevant for inference."""
    return {
        "log_interval": 200,
        "eval_interval": 1000,
        "seed": 42,
        "epochs": 1000,
        "learning_rate": 0.0001,
        "betas": [0.8, 0.99],
        "eps": 1e-09,
        "batch_size": 2,
        "bf16_run": False,
        "fp16_run": False,
        "lr_decay": 0.99996,
        "segment_size": 16384,
        "init_lr_ratio": 1,
        "warmup_epochs": 0,
        "c_mel": 45,
        "c_kl": 1.0,
        "c_commit": 100,
        "skip_optimizer": False,
        "freeze_ZH_bert": False,
        "freeze_JP_bert": False,
        "freeze_EN_bert": False,
        "freeze_emo": False,
        "freeze_style": False,
        "freeze_decoder": False,
    }


def _model_section(size: Size) -> dict[str, Any]:
    """The ``model`` section: upstream JP-Extra defaults, or the tiny fixture's widths."""
    widths: dict[str, Any]
    if size == "full":
        widths = {
            "inter_channels": 192,
            "hidden_channels": 192,
            "filter_channels": 768,
            "n_heads": 2,
            "n_layers": 6,
            "kernel_size": 3,
            "upsample_initial_channel": 512,
            "gin_channels": 512,
        }
    else:
        widths = {
            "inter_channels": 16,
            "hidden_channels": 24,
            "filter_channels": 40,
            "n_heads": 2,
            "n_layers": 3,
            "kernel_size": 3,
            "upsample_initial_channel": 32,
            "gin_channels": 32,
        }
    return {
        "use_spk_conditioned_encoder": True,
        "use_noise_scaled_mas": True,
        "use_mel_posterior_encoder": False,
        "use_duration_discriminator": False,
        "use_wavlm_discriminator": True,
        "inter_channels": widths["inter_channels"],
        "hidden_channels": widths["hidden_channels"],
        "filter_channels": widths["filter_channels"],
        "n_heads": widths["n_heads"],
        "n_layers": widths["n_layers"],
        "kernel_size": widths["kernel_size"],
        "p_dropout": 0.1,
        "resblock": "1",
        "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "upsample_rates": [8, 8, 2, 2, 2],
        "upsample_initial_channel": widths["upsample_initial_channel"],
        "upsample_kernel_sizes": [16, 16, 8, 2, 2],
        "n_layers_q": 3,
        "use_spectral_norm": False,
        "gin_channels": widths["gin_channels"],
        "slm": {
            "model": "./slm/wavlm-base-plus",
            "sr": 16000,
            "hidden": 768,
            "nlayers": 13,
            "initial_channel": 64,
        },
    }


def _speaker_names(name: str, n_speakers: int) -> list[str]:
    return [name] if n_speakers == 1 else [f"{name}_{i}" for i in range(n_speakers)]


def voice_config(
    size: Size,
    *,
    name: str = "synthetic",
    n_speakers: int = 1,
    styles: Sequence[str] = ("Neutral", "Happy", "Sad", "Angry"),
) -> dict[str, Any]:
    """The complete ``config.json`` of a synthetic voice, as SBV2 2.7 JP-Extra writes it.

    Speakers are named ``name`` (one speaker) or ``name_0 … name_{n-1}``. Style ids
    follow the order of ``styles``; the first one gets row 0 of
    ``style_vectors.npy``, the mean vector, so it should be ``"Neutral"``.
    """
    _check_voice_args(size, name, n_speakers, styles)
    return {
        "model_name": name,
        "train": _train_section(),
        "data": {
            "use_jp_extra": True,
            "training_files": f"Data/{name}/train.list",
            "validation_files": f"Data/{name}/val.list",
            "max_wav_value": 32768.0,
            "sampling_rate": 44100,
            "filter_length": 2048,
            "hop_length": 512,
            "win_length": 2048,
            "n_mel_channels": 128,
            "mel_fmin": 0.0,
            "mel_fmax": None,
            "add_blank": True,
            "n_speakers": n_speakers,
            "cleaned_text": True,
            "spk2id": {s: i for i, s in enumerate(_speaker_names(name, n_speakers))},
            "num_styles": len(styles),
            "style2id": {s: i for i, s in enumerate(styles)},
        },
        "model": _model_section(size),
        "version": "2.7.0-JP-Extra",
    }


def _check_voice_args(size: str, name: str, n_speakers: int, styles: Sequence[str]) -> None:
    check_size(size)
    if not name or "/" in name or "\\" in name:
        raise ValueError(f"name must be a non-empty file-name stem, not {name!r}")
    if isinstance(n_speakers, bool) or not isinstance(n_speakers, int) or n_speakers < 1:
        raise ValueError(f"n_speakers must be a positive integer, not {n_speakers!r}")
    if isinstance(styles, str) or not styles:
        raise ValueError("styles must be a non-empty sequence of style names")
    if len(set(styles)) != len(styles):
        raise ValueError(f"style names must be unique: {list(styles)}")
