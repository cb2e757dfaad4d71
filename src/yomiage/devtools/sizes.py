"""The two sizes of synthetic folders, the widths they share, and the common argument checks.

Both writers take a :data:`Size`: ``"full"`` for the real architectures (what
benchmarks need), ``"tiny"`` for the widths of the tiny reference fixture (what
tests need). A voice and a BERT of the same size fit together.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

__all__ = ["BERT_DIM", "SIZES", "STYLE_DIM", "Size", "check_seed", "check_size"]

Size = Literal["tiny", "full"]
SIZES: tuple[Size, ...] = ("tiny", "full")

#: Width of the BERT features each voice size expects; it must equal the hidden
#: size of the :func:`~yomiage.devtools.bert_writer.make_bert` model of the same
#: size (spec §1.3: the tiny fixture pairs a 64-wide DeBERTa with
#: ``enc_p.bert_proj`` of in-width 64).
BERT_DIM: Mapping[Size, int] = MappingProxyType({"tiny": 64, "full": 1024})

#: Style vectors are 256 wide in every SBV2 voice (spec §1.3).
STYLE_DIM = 256


def check_size(size: str) -> None:
    """Refuse anything but ``"tiny"`` and ``"full"``."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, not {size!r}")


def check_seed(seed: int) -> None:
    """Refuse anything but a non-negative ``int`` (``bool`` included)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
