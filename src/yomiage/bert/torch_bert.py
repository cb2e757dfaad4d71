"""DeBERTa-v2 BERT features with PyTorch + transformers (the ``[torch]`` extra).

Only code that really runs the PyTorch BERT imports this module; it imports
torch and transformers at the top, which costs seconds.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import torch
from transformers import DebertaV2Model
from transformers.utils import logging as hf_logging

from yomiage.bert.tokenizer import CharTokenizer
from yomiage.errors import ModelLoadError

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
        self._model = _load_encoder(path, self.device)
        n_layers = int(self._model.config.num_hidden_layers)
        if n_layers + 1 < -_HIDDEN_STATE_INDEX:
            raise ModelLoadError(f"{path}: BERT has {n_layers} layers, need at least 2")
        # hidden_states[-3] is the output of layer L-2; the last two layers are
        # never used, so they are dropped (about 8% of BERT's time on 24 layers).
        kept = n_layers + 1 + _HIDDEN_STATE_INDEX
        self._model.encoder.layer = self._model.encoder.layer[:kept]
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


def _load_encoder(path: Path, device: torch.device) -> DebertaV2Model:
    """The float32 eval-mode encoder of ``path`` on ``device``; ModelLoadError names the file."""
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
        with _quiet_transformers():
            loaded: Any = DebertaV2Model.from_pretrained(
                str(path), local_files_only=True, output_loading_info=True
            )
        model, info = loaded
    except Exception as exc:  # safetensors, torch.load and transformers raise many types
        raise ModelLoadError(f"cannot load BERT weights {weights}: {exc}") from exc
    missing = sorted(info.get("missing_keys", ())) + sorted(info.get("mismatched_keys", ()))
    if missing:
        shown = ", ".join(str(k) for k in missing[:5])
        raise ModelLoadError(
            f"{weights} does not match the DeBERTa-v2 encoder: {len(missing)} missing or"
            f" mismatched tensors ({shown}{', ...' if len(missing) > 5 else ''})"
        )
    # Upstream weights are float16; SBV2 runs BERT in float32 (spec §3.1).
    model.to(device=device, dtype=torch.float32)
    model.eval()
    model.requires_grad_(False)
    if not isinstance(model, DebertaV2Model):
        raise ModelLoadError(f"{path}: transformers returned {type(model).__name__}")
    return model


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report (the ignored MLM head) and progress bar while loading.

    These are process-wide switches of transformers; they are restored on exit.
    """
    verbosity = hf_logging.get_verbosity()
    bar = hf_logging.is_progress_bar_enabled()
    # These two helpers carry no annotations in transformers.
    disable_bar = cast(Callable[[], None], hf_logging.disable_progress_bar)
    enable_bar = cast(Callable[[], None], hf_logging.enable_progress_bar)
    hf_logging.set_verbosity(logging.ERROR)
    disable_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            enable_bar()
