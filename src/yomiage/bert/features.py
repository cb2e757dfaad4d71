"""Token-level BERT features -> phone-level features (numpy only).

The synthesizer wants one BERT vector per phone token, so each token's row
is repeated as many times as the frontend says that token covers
(``word2ph`` after blank insertion, spec §3.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["expand_to_phones", "join_token_rows"]

_Scalar = TypeVar("_Scalar", bound=np.generic)


def expand_to_phones(
    hidden: npt.NDArray[_Scalar], word2ph: Sequence[int] | npt.NDArray[np.integer]
) -> npt.NDArray[_Scalar]:
    """Repeat row ``i`` of ``hidden`` ``word2ph[i]`` times and transpose.

    ``hidden`` is ``[n_tok, C]`` (one row per BERT token, ``[CLS]`` and
    ``[SEP]`` included) and ``word2ph`` has ``n_tok`` non-negative counts.
    Returns a new C-contiguous ``[C, sum(word2ph)]`` array of the same dtype.
    Raises ``ValueError`` if the shapes disagree or a count is negative.
    """
    if hidden.ndim != 2:
        raise ValueError(f"hidden must be [n_tok, C], got shape {hidden.shape}")
    counts = np.asarray(word2ph)
    if counts.ndim != 1 or (counts.size and not np.issubdtype(counts.dtype, np.integer)):
        raise ValueError("word2ph must be a flat sequence of integers")
    if counts.shape[0] != hidden.shape[0]:
        raise ValueError(
            f"word2ph has {counts.shape[0]} entries but there are {hidden.shape[0]} BERT tokens;"
            " the text given to BERT must be the frontend's bert_text"
        )
    if counts.size and int(counts.min()) < 0:
        raise ValueError("word2ph counts must be non-negative")
    return np.ascontiguousarray(np.repeat(hidden, counts.astype(np.intp), axis=0).T)


def join_token_rows(features: Sequence[Any]) -> list[Any]:
    """The row blocks that make consecutive sentences' ``[n_tok, C]`` BERT features
    one text's, matching
    :func:`yomiage.synthesis.pauses.joined_reading`: the first sentence's ``[CLS]``, each
    sentence's own tokens, the last one's ``[SEP]``. (Concatenate them.)"""
    if not features:
        raise ValueError("nothing to join")
    return [features[0][:1], *(f[1:-1] for f in features), features[-1][-1:]]
