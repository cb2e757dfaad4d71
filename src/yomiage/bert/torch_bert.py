"""DeBERTa-v2 BERT features with PyTorch + transformers (the ``[torch]`` extra).

Only code that really runs the PyTorch BERT imports this module; it imports
torch and transformers at the top, which costs seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import DebertaV2Config, DebertaV2Model

from yomiage.bert.tokenizer import CharTokenizer
from yomiage.errors import ModelLoadError
from yomiage.sbv2.safetensors import iter_tensors

__all__ = ["TorchBert", "expand_to_phones_torch"]

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_MODEL_TYPE = "deberta-v2"
# Features are the output of the third-from-last layer (spec §3.3).
_HIDDEN_STATE_INDEX = -3


class TorchBert:
    """SBV2's BERT (DeBERTa-v2 encoder) in float32, in eval mode, on one device.

    ``model_dir`` holds ``config.json`` and ``model.safetensors`` or
    ``pytorch_model.bin`` (a ``DebertaV2ForMaskedLM`` checkpoint: only the
    encoder is loaded, the MLM head is ignored). Nothing is downloaded.
    ``tokenizer`` is a :class:`CharTokenizer` or a folder for
    :meth:`CharTokenizer.from_dir`; by default ``model_dir`` itself.

    :meth:`features` may be called from several threads at once: the model is
    read-only and each call has its own tensors. torch's intra-op thread count
    (``torch.set_num_threads``) decides how many cores one call uses.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        tokenizer: CharTokenizer | str | os.PathLike[str] | None = None,
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        path = Path(model_dir)
        if isinstance(tokenizer, CharTokenizer):
            self.tokenizer = tokenizer
        else:
            self.tokenizer = CharTokenizer.from_dir(path if tokenizer is None else tokenizer)
        self.device = torch.device(device)
        n_layers = _layer_count(path)
        if n_layers + 1 < -_HIDDEN_STATE_INDEX:
            raise ModelLoadError(f"{path}: BERT has {n_layers} layers, need at least 2")
        # hidden_states[-3] is the output of layer L-2: the last two layers are
        # never built (8% of BERT's time and 100 MB on the real model).
        self._model = _load_encoder(path, self.device, n_layers + 1 + _HIDDEN_STATE_INDEX)
        self._runner: Any = self._model

    @property
    def hidden_size(self) -> int:
        """Width of one feature row (1024 for the real model, 64 for the test fixture)."""
        return int(self._model.config.hidden_size)

    @property
    def model(self) -> DebertaV2Model:
        """The underlying transformers encoder (eval mode, float32)."""
        return self._model

    def features(self, texts: Sequence[str]) -> list[torch.Tensor]:
        """``hidden_states[-3]`` rows of each text, from one padded batch.

        Returns one float32 ``[n_tok_i, hidden_size]`` tensor per text, where
        ``n_tok_i = len(tokenizer.encode(texts[i]))`` (``[CLS]`` and ``[SEP]``
        included). The tensors stay on :attr:`device` and are views of one batch
        tensor. They are inference tensors: use them under ``torch.inference_mode()``
        or ``torch.no_grad()`` and do not modify them in place. Batching changes
        the values only by float rounding (spec §3.4).
        """
        if not texts:
            return []
        ids, mask = self.tokenizer.encode_batch(texts)
        lengths = mask.sum(axis=1).tolist()
        with torch.inference_mode():
            input_ids = torch.from_numpy(ids).to(self.device)
            attention_mask = torch.from_numpy(mask).to(self.device)
            out = self._runner(input_ids=input_ids, attention_mask=attention_mask)
            hidden: torch.Tensor = out.last_hidden_state
            return [hidden[row, :n] for row, n in enumerate(lengths)]

    def compile(self, **options: Any) -> None:
        """Wrap the encoder in ``torch.compile`` (meant for CUDA).

        Shapes are dynamic (texts differ in length), so one compilation serves
        all lengths. Compilation happens on the first :meth:`features` call;
        make that call from one thread before sharing the object. ``options``
        go to ``torch.compile`` (e.g. ``mode="reduce-overhead"``).
        """
        options.setdefault("dynamic", True)
        self._runner = torch.compile(self._model, **options)

    def __repr__(self) -> str:
        return f"TorchBert(hidden_size={self.hidden_size}, device={self.device})"


def expand_to_phones_torch(hidden: torch.Tensor, word2ph: Sequence[int]) -> torch.Tensor:
    """Torch twin of :func:`yomiage.bert.expand_to_phones`: ``[n_tok, C]`` -> ``[C, T]``.

    Stays on ``hidden``'s device. Raises ``ValueError`` if ``len(word2ph)``
    differs from ``n_tok``.
    """
    if hidden.dim() != 2:
        raise ValueError(f"hidden must be [n_tok, C], got shape {tuple(hidden.shape)}")
    if len(word2ph) != hidden.shape[0]:
        raise ValueError(
            f"word2ph has {len(word2ph)} entries but there are {hidden.shape[0]} BERT tokens;"
            " the text given to BERT must be the frontend's bert_text"
        )
    if any(n < 0 for n in word2ph):
        raise ValueError("word2ph counts must be non-negative")
    counts = torch.tensor(list(word2ph), dtype=torch.long, device=hidden.device)
    total = int(sum(word2ph))
    return hidden.repeat_interleave(counts, dim=0, output_size=total).T.contiguous()


def _layer_count(path: Path) -> int:
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        return int(config["num_hidden_layers"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"cannot read BERT config {path / 'config.json'}: {exc}") from exc


def _load_encoder(path: Path, device: torch.device, layers: int | None) -> DebertaV2Model:
    """The float32 eval-mode encoder of ``path`` on ``device``, with only its first
    ``layers`` layers (all when ``None``); ModelLoadError names the file.

    The model is built empty and filled one tensor at a time, so loading a
    float16 checkpoint never holds more than the float32 weights plus one tensor.
    """
    if not path.is_dir():
        raise ModelLoadError(f"BERT model folder not found: {path}")
    config_path = path / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"cannot read BERT config {config_path}: {exc}") from exc
    if not isinstance(config, dict) or config.get("model_type") != _MODEL_TYPE:
        found = config.get("model_type") if isinstance(config, dict) else None
        raise ModelLoadError(f"{config_path}: model_type is {found!r}, expected {_MODEL_TYPE!r}")
    weights = next((path / n for n in _WEIGHT_FILES if (path / n).is_file()), None)
    if weights is None:
        raise ModelLoadError(f"BERT model folder {path} has none of {', '.join(_WEIGHT_FILES)}")
    try:
        hf_config = DebertaV2Config.from_dict(config)
    except Exception as exc:  # transformers validates in many ways
        raise ModelLoadError(f"{config_path}: not a usable DeBERTa-v2 config: {exc}") from exc
    total = int(hf_config.num_hidden_layers)
    kept = total if layers is None else min(layers, total)
    hf_config.num_hidden_layers = kept
    with torch.device("meta"):
        model = DebertaV2Model(hf_config)
    state = dict(_checkpoint_tensors(weights, kept, total))
    expected = model.state_dict()
    missing = sorted(k for k in expected if k not in state)
    wrong = sorted(k for k in expected if k in state and state[k].shape != expected[k].shape)
    if missing or wrong:
        bad = missing + wrong
        shown = ", ".join(bad[:5])
        raise ModelLoadError(
            f"{weights} does not match the DeBERTa-v2 encoder: {len(bad)} missing or"
            f" mismatched tensors ({shown}{', ...' if len(bad) > 5 else ''})"
        )
    # assign=True adopts the loaded tensors instead of copying them into new ones.
    model.load_state_dict({k: state[k] for k in expected}, strict=True, assign=True)
    del state
    # Non-persistent buffers are not in the checkpoint and are still on "meta".
    for module in model.modules():
        for name, buffer in list(module.named_buffers(recurse=False)):
            if buffer is None or not buffer.is_meta:
                continue
            if name != "position_ids":
                raise ModelLoadError(f"{path}: cannot initialise BERT buffer {name}")
            value = torch.arange(buffer.shape[-1]).expand(buffer.shape).clone()
            module.register_buffer(name, value, persistent=False)
    # transformers wraps .to()/.eval() with loose types; call nn.Module's directly.
    torch.nn.Module.to(model, device)
    torch.nn.Module.eval(model)
    model.requires_grad_(False)
    return model


def _checkpoint_tensors(weights: Path, kept: int, total: int) -> Iterator[tuple[str, torch.Tensor]]:
    """Encoder tensors of a DebertaV2Model or DebertaV2ForMaskedLM checkpoint, float32."""
    unused = tuple(f"encoder.layer.{i}." for i in range(kept, total))
    if weights.suffix == ".safetensors":
        items: Iterator[tuple[str, Any]] = (
            (k, torch.from_numpy(v)) for k, v in iter_tensors(weights)
        )
    else:
        try:
            loaded = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # pickle and zip errors of many kinds
            raise ModelLoadError(f"cannot load BERT weights {weights}: {exc}") from exc
        items = iter(loaded.items())
    for key, tensor in items:
        key = key.removeprefix("deberta.")
        if key.startswith(("cls.", "lm_predictions.")) or key.startswith(unused):
            continue
        yield key, (tensor.float() if tensor.is_floating_point() else tensor)
