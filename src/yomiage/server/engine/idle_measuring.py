"""Measuring this machine's voice plans in a server's idle time, never in a request's.

A voice loads at once by the plan shipped for its CPU family (or a fixed one) and no
request waits for measuring (:mod:`yomiage.runtime.plan.priors`); the minutes this
machine's own measurements take are spent here instead, in the worker process, once
no call has run for :data:`IDLE_BEFORE_MEASURING_S`. A call that comes in stops the
measuring process in hand at once (what was measured stays kept), and measuring goes
on when the server is idle again; a measurement disturbed by other work on the
machine is not kept and is tried again after :data:`DISTURBED_BACKOFF_S`.

What is measured is taken at once, where ``adopt`` is given: once the worker is quiet
again, each voice whose plan the measurements change is loaded anew by it
(:meth:`TTS.take_measured_plans <yomiage.TTS.take_measured_plans>`), while calls that
come in meanwhile wait (a second or two): a voice is never loaded twice at once, so the
memory budget holds through the swap. Without ``adopt``, it is taken at the next start.
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
# Takes the plans just measured for these voices (no call runs meanwhile).
AdoptPlans = Callable[[list[str]], None]


class IdleMeasuring:
    """Runs ``measure`` once the worker has been idle for ``idle_s``, stopping it for
    each call (:meth:`call`), until everything is measured or :meth:`close`."""

    def __init__(
        self,
        measure: MeasurePlans,
        *,
        adopt: AdoptPlans | None = None,
        idle_s: float = IDLE_BEFORE_MEASURING_S,
        backoff_s: float = DISTURBED_BACKOFF_S,
    ) -> None:
        self._measure = measure
        self._adopt = adopt
        self._adopting = False  # set: calls wait in begin() until the voices are swapped
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
        """Work began (a call, an open stream): measuring stops now. While voices are
        being swapped for their measured plans, it waits for that to end first."""
        with self._changed:
            while self._adopting:
                self._changed.wait()
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
            if not measured:
                return
            if self._adopt is None:
                log.warning("this machine's plan for %s is measured and kept in the cache: "
                            "it is taken from the server's next start",
                            ", ".join(measured))  # fmt: skip
                return
            log.warning("this machine's plan for %s is measured and kept in the cache: "
                        "taken once the server is idle", ", ".join(measured))  # fmt: skip
            self._adopt_when_quiet(self._adopt, measured)
            return

    def _adopt_when_quiet(self, adopt: AdoptPlans, measured: list[str]) -> None:
        """``adopt`` the voices' plans with no call running and none let in meanwhile."""
        while self._wait_for_quiet(self.idle_s):
            with self._changed:
                if self._busy:  # a call came in since the quiet was seen
                    continue
                self._adopting = True
            try:
                adopt(measured)
            except Exception:
                log.exception("taking this machine's measured plans failed; the voices keep "
                              "theirs until the next start")  # fmt: skip
            finally:
                with self._changed:
                    self._adopting = False
                    self._quiet_since = time.monotonic()
                    self._changed.notify_all()
            return
