"""The seeds of a request's randomness: one per request (drawn where none was given, and
recorded in its result), and from it one per sentence and one for the whole-text pause
prediction, each independent of the others: a request with a seed sounds the same
however its sentences are scheduled."""

from __future__ import annotations

import numpy as np

PAUSE_STREAM = 2**32 - 1  # sub-seed of the whole-text pause prediction


def sentence_seed(seed: int, index: int) -> int:
    """An independent 63-bit seed for sentence ``index`` of a request seeded ``seed``."""
    state = np.random.SeedSequence([seed, index]).generate_state(2, np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def draw_seed() -> int:
    """A fresh seed for a request that gave none (recorded in its result)."""
    return int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
