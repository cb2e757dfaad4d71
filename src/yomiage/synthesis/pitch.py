"""Pitch and intonation changes through the WORLD vocoder (spec §7.1).

The model has no pitch control of its own, so the finished audio of a sentence
is analysed and re-synthesized: every voiced frame's F0 becomes
``pitch_scale * mean + intonation_scale * (f0 - mean)``. Needs ``pyworld``
(the ``[pitch]`` extra); the output length may differ by a few milliseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.errors import MissingExtraError


def require_world() -> Any:
    """The ``pyworld`` module, or MissingExtraError naming the extra to install."""
    try:
        import pyworld
    except ImportError:
        raise MissingExtraError("pitch_scale and intonation_scale", "pitch", "pyworld") from None
    return pyworld


def adjust_pitch(
    audio: npt.NDArray[np.float32],
    sample_rate: int,
    *,
    pitch_scale: float,
    intonation_scale: float,
) -> npt.NDArray[np.float32]:
    """``audio`` re-synthesized with scaled F0; unchanged when it has no voiced frame."""
    world = require_world()
    x = audio.astype(np.float64)
    f0, t = world.harvest(x, sample_rate)
    voiced = f0 > 0
    if not voiced.any():
        return audio
    spectrum = world.cheaptrick(x, f0, t, sample_rate)
    aperiodicity = world.d4c(x, f0, t, sample_rate)
    mean = float(f0[voiced].mean())
    f0 = np.where(voiced, pitch_scale * mean + intonation_scale * (f0 - mean), 0.0)
    y = world.synthesize(f0, spectrum, aperiodicity, sample_rate)
    return np.asarray(y, dtype=np.float32)
