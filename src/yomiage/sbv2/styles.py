"""Style vectors of a voice (``style_vectors.npy``) and how a style is weighted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from yomiage.errors import ModelLoadError
from yomiage.sbv2.config import STYLE_DIM


@dataclass(frozen=True)
class StyleTable:
    """Rows of ``style_vectors.npy`` by name; row 0 is the mean (Neutral) vector."""

    vectors: npt.NDArray[np.float32]
    style2id: Mapping[str, int]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.style2id)

    def vector(self, style: str, weight: float = 1.0) -> npt.NDArray[np.float32]:
        """``mean + (style - mean) * weight`` (spec §1.4), float32 ``[256]``."""
        if style not in self.style2id:
            raise ValueError(f"unknown style {style!r}; this voice has: {', '.join(self.names)}")
        mean = self.vectors[0]
        row = self.vectors[self.style2id[style]]
        vector: npt.NDArray[np.float32] = (mean + (row - mean) * np.float32(weight)).astype(
            np.float32
        )
        return vector


def load_styles(path: Path | str, style2id: Mapping[str, int]) -> StyleTable:
    path = Path(path)
    try:
        vectors = np.load(path, allow_pickle=False)
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{path} not found: a voice folder needs style_vectors.npy") from exc
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not a readable .npy file: {exc}") from exc
    if vectors.ndim != 2 or vectors.shape[1] != STYLE_DIM or vectors.shape[0] < 1:
        raise ModelLoadError(
            f"{path}: expected shape [num_styles, {STYLE_DIM}], got {vectors.shape}"
        )
    if max(style2id.values()) >= vectors.shape[0]:
        raise ModelLoadError(
            f"{path}: config style2id refers to row {max(style2id.values())} "
            f"but the file has {vectors.shape[0]} rows"
        )
    return StyleTable(np.ascontiguousarray(vectors, dtype=np.float32), dict(style2id))
