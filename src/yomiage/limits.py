"""What one request may cost, whatever its text and options.

Options are bounded (:data:`yomiage.options.RANGES`) and text is cut into
sentences, but a voice's duration predictor still decides how long each
sentence lasts. These limits are checked on the predicted durations, before
any audio of the sentence is made, so a request can never run away with the
machine's time or memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from yomiage.errors import LimitError

# A 200-character sentence read four times slower lasts about 100 s.
DEFAULT_MAX_SENTENCE_SECONDS = 180.0
# What a server lets one request make unless told otherwise (``serve --max-audio-seconds``).
DEFAULT_MAX_REQUEST_SECONDS = 900.0


@dataclass(frozen=True)
class Limits:
    """``max_sentence_seconds``: audio one sentence may last; ``max_request_seconds``:
    audio one call may make in all (``None``: as long as the text; servers set one)."""

    max_sentence_seconds: float = DEFAULT_MAX_SENTENCE_SECONDS
    max_request_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_sentence_seconds", "max_request_seconds"):
            value = getattr(self, name)
            if value is None and name == "max_request_seconds":
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")

    def check_sentence(self, seconds: float, index: int) -> None:
        if seconds > self.max_sentence_seconds:
            raise LimitError(
                "max_sentence_seconds",
                f"sentence {index + 1} would last {seconds:.0f} s of audio; "
                f"a sentence may last at most {self.max_sentence_seconds:g} s",
            )

    def check_request(self, seconds: float) -> None:
        if self.max_request_seconds is not None and seconds > self.max_request_seconds:
            raise LimitError(
                "max_request_seconds",
                f"the text would make more than {self.max_request_seconds:g} s of audio, "
                "the most one request may make; send it in parts",
            )
