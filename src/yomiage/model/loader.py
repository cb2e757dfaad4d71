"""Load an SBV2 JP-Extra voice folder into our PyTorch model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from yomiage.errors import ModelLoadError
from yomiage.model.checkpoint import check_against, inference_state_dict, read_safetensors
from yomiage.model.synthesizer import JPExtraSynthesizer
from yomiage.sbv2.config import VoiceConfig, load_config
from yomiage.sbv2.styles import StyleTable, load_styles

BERT_PROJ_KEY = "enc_p.bert_proj.weight"
SPEAKER_KEY = "emb_g.weight"


@dataclass(frozen=True)
class TorchVoice:
    """A loaded voice: its config, style table and the synthesizer in eval mode."""

    path: Path
    config: VoiceConfig
    styles: StyleTable
    model: JPExtraSynthesizer

    @property
    def bert_dim(self) -> int:
        return self.model.bert_dim


def find_weights(folder: Path) -> Path:
    """The voice's ``*.safetensors``; with several, the newest (as SBV2 picks)."""
    candidates = sorted(folder.glob("*.safetensors"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise ModelLoadError(f"{folder}: no *.safetensors weights in this voice folder")
    return candidates[-1]


def voice_files(path: Path | str) -> tuple[Path, Path]:
    """The SBV2 folder and checkpoint that ``path`` means: a folder and its newest
    ``*.safetensors``, or one ``.safetensors`` file (to choose among several) and its folder."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() == ".safetensors":
        return path.parent, path
    if not path.is_dir():
        raise ModelLoadError(
            f"{path} is not a directory (an SBV2 voice is a folder, or one of its "
            ".safetensors files)"
        )
    return path, find_weights(path)


def load_voice(folder: Path | str, device: str | torch.device = "cpu") -> TorchVoice:
    """Read ``config.json``, the weights and ``style_vectors.npy`` of an SBV2 voice
    (``folder`` may name one ``.safetensors`` checkpoint of it)."""
    folder, weights = voice_files(folder)
    config = load_config(folder / "config.json")
    styles = load_styles(folder / "style_vectors.npy", config.style2id)
    state = inference_state_dict(read_safetensors(weights), weights)
    for key in (BERT_PROJ_KEY, SPEAKER_KEY):
        if key not in state:
            raise ModelLoadError(f"{weights}: required tensor {key} is missing")
    bert_dim = int(state[BERT_PROJ_KEY].shape[1])
    n_speakers = int(state[SPEAKER_KEY].shape[0])
    if n_speakers != config.n_speakers:
        # Real configs sometimes disagree; the weights are what the model was trained with.
        config = VoiceConfig(**{**config.__dict__, "n_speakers": n_speakers})
    if max(config.spk2id.values()) >= n_speakers:
        raise ModelLoadError(
            f"{folder}: spk2id names speaker ids beyond the {n_speakers} in {weights.name}"
        )
    with torch.device("meta"):
        model = JPExtraSynthesizer(config, bert_dim)
    check_against(model, state, weights)
    model = model.to_empty(device="cpu")
    model.load_state_dict(state, strict=True)
    model.eval().requires_grad_(False)
    return TorchVoice(folder, config, styles, model.to(device))
