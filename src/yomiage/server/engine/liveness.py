"""How long the supervised worker may take to answer, before it counts as hung.

A worker that crashes is noticed at once (its pipe closes); one that hangs
(stopped, deadlocked in native code, swapping without end) is not: requests
waited for it forever and ``/ready`` stayed 200. So every call to the worker
has a deadline scaled to its work, and the parent pings the worker between
calls:

* a call unanswered past ``call_timeout + per_unit × its size`` (characters of
  text, phonemes of an editor's reading, seconds of audio to encode) means the
  worker is killed and restarted, and the requests on it fail with 503
  ``worker_timeout``;
* a ping unanswered for ``heartbeat_timeout`` turns ``/ready`` 503 (a load
  balancer stops sending work); unanswered for ``silent_timeout`` (default:
  ``call_timeout``), the worker is restarted as above, even with no request
  waiting.

The defaults are generous: a real voice on a slow CPU makes a character's
audio in well under a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from yomiage.server.config import WORKER_CALL_TIMEOUT
from yomiage.speaker import WARMUP_TEXT


@dataclass(frozen=True)
class Liveness:
    """The worker's deadlines (see the module docstring); seconds."""

    call_timeout: float = WORKER_CALL_TIMEOUT
    per_unit: float = 1.0
    heartbeat_interval: float = 1.0
    heartbeat_timeout: float = 5.0
    silent_timeout: float | None = None  # None: call_timeout

    def __post_init__(self) -> None:
        if self.call_timeout <= 0 or self.per_unit < 0:
            raise ValueError("need call_timeout > 0 and per_unit >= 0")
        if self.heartbeat_interval <= 0 or self.heartbeat_timeout <= 0:
            raise ValueError("need heartbeat_interval > 0 and heartbeat_timeout > 0")
        if self.silent_timeout is not None and self.silent_timeout <= 0:
            raise ValueError("need silent_timeout > 0")

    @property
    def ping_deadline(self) -> float:
        """Seconds a ping may go unanswered before the worker is restarted."""
        return self.call_timeout if self.silent_timeout is None else self.silent_timeout

    def deadline(self, size: float) -> float:
        """Seconds a call of ``size`` units may take."""
        return self.call_timeout + self.per_unit * size


def work_size(op: str, args: Sequence[Any]) -> float:
    """The units of work of one worker call (0 for calls that do almost none)."""
    if op == "read":
        return len(args[1])  # (voice, text, options)
    if op == "generate":
        return sum(len(p.phones) for p in args[1])  # (voice, reading, options)
    if op == "encode":  # (audio, fmt, out): seconds of audio
        return float(args[0].seconds)
    if op == "warm":
        return len(WARMUP_TEXT)
    if op == "update_words":
        return (len(args[0]) + len(args[1])) / 1000  # (add, remove, keep): a compile
    return 0.0
