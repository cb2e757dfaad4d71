"""Pitch and intonation changes through the WORLD vocoder (spec §7.1).

The model has no pitch control of its own, so the finished audio of a sentence
is analysed and re-synthesized: every voiced frame's F0 becomes
``pitch_scale * mean + intonation_scale * (f0 - mean)``. Needs ``pyworld``, a
dependency of every install (the ``[pitch]`` extra, once needed, is kept as an
empty alias); the output length may differ by a few milliseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from yomiage.errors import MissingExtraError


def require_world() -> Any:
    """The ``pyworld`` module, or MissingExtraError saying how to install it (an install
    that lost it: ``yomiage[pitch]`` brings it back)."""
    try:
        import pyworld
    except ImportError:
        raise MissingExtraError("pitch_scale or intonation_scale", "pitch", "pyworld") from None
    return pyworld


def world_available() -> bool:
    """Whether pitch_scale and intonation_scale can work here: what an API that
    advertises them (VOICEVOX's engine manifest) must check rather than assume."""
    try:
        require_world()
    except MissingExtraError:
        return False
    return True


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
