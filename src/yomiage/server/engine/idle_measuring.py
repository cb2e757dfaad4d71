"""Measuring this machine's voice plans in a server's idle time, never in a request's.

A voice loads at once by the plan shipped for its CPU family (or a fixed one) and no
request waits for measuring (:mod:`yomiage.runtime.plan.priors`); the minutes this
machine's own measurements take are spent here instead, in the worker process, once
no call has run for :data:`IDLE_BEFORE_MEASURING_S`. A call that comes in stops the
measuring process in hand at once (what was measured stays kept), and measuring goes
on when the server is idle again; a measurement disturbed by other work on the
machine is not kept and is tried again after :data:`DISTURBED_BACKOFF_S`. What is
measured is taken at the server's next start (the log says so).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from yomiage.runtime.plan.steps import MeasureDisturbed, MeasureError, MeasureInterrupted

log = logging.getLogger(__name__)

# Quiet this long (no call in flight, none ended meanwhile) before measuring begins: a
# burst of requests has gaps of seconds, a server left alone has minutes.
IDLE_BEFORE_MEASURING_S = 30.0
# After a measurement other work disturbed: the machine is busy with something else.
DISTURBED_BACKOFF_S = 600.0

# Measures what is left to measure, ending at the event; the voices measured.
MeasurePlans = Callable[[threading.Event], list[str]]


class IdleMeasuring:
    """Runs ``measure`` once the worker has been idle for ``idle_s``, stopping it for
    each call (:meth:`call`), until everything is measured or :meth:`close`."""

    def __init__(
        self,
        measure: MeasurePlans,
        *,
        idle_s: float = IDLE_BEFORE_MEASURING_S,
        backoff_s: float = DISTURBED_BACKOFF_S,
    ) -> None:
        self._measure = measure
        self.idle_s = idle_s
        self.backoff_s = backoff_s
        self._changed = threading.Condition()
        self._busy = 0
        self._quiet_since = time.monotonic()
        self._closed = False
        self._stop = threading.Event()  # set: the measuring process in hand ends
        self._thread = threading.Thread(target=self._run, name="yomiage-idle-measuring",
                                        daemon=True)  # fmt: skip

    def start(self) -> IdleMeasuring:
        self._thread.start()
        return self

    def begin(self) -> None:
        """Work began (a call, an open stream): measuring stops now."""
        with self._changed:
            self._busy += 1
            self._stop.set()

    def end(self) -> None:
        """That work ended: the quiet time counts from now."""
        with self._changed:
            self._busy = max(0, self._busy - 1)
            self._quiet_since = time.monotonic()
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._stop.set()
            self._changed.notify_all()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _wait_for_quiet(self, at_least_s: float) -> bool:
        """Wait until nothing has run for ``at_least_s``; False once closed."""
        with self._changed:
            while not self._closed:
                quiet = time.monotonic() - self._quiet_since
                if self._busy == 0 and quiet >= at_least_s:
                    self._stop.clear()
                    return True
                self._changed.wait(at_least_s - quiet if self._busy == 0 else None)
            return False

    def _run(self) -> None:
        wait = self.idle_s
        while self._wait_for_quiet(wait):
            wait = self.idle_s
            try:
                measured = self._measure(self._stop)
            except MeasureInterrupted:
                log.info("measuring this machine's plan paused for a request; it goes on "
                         "when the server is idle")  # fmt: skip
                continue
            except MeasureDisturbed as exc:
                log.info("measuring this machine's plan set aside (%s); tried again in "
                         "%.0f s", exc, self.backoff_s)  # fmt: skip
                with self._changed:
                    self._quiet_since = time.monotonic()
                wait = self.backoff_s
                continue
            except MeasureError as exc:
                log.warning("could not measure this machine's plan (%s); the voices keep "
                            "the plan they have", exc)  # fmt: skip
                return
            except Exception:
                log.exception("measuring this machine's plan failed")
                return
            if measured:
                log.warning(
                    "this machine's plan for %s is measured and kept in the cache: "
                    "it is taken from the server's next start",
                    ", ".join(measured),
                )
            return
