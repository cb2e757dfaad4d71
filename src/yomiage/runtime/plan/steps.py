"""The steps of a plan's measuring, each kept as it ends, so a stop loses only the step
in hand and a failure that may pass is measured again.

Measuring a full-size voice's plan is 8 or so processes
(:mod:`yomiage.runtime.plan.measure`), 307 s on an idle 2-core machine and 989 s on
a busy one. Its results used to be kept only once all of them had ended, so a
start stopped at the last step (the server's load limit, a SIGTERM) began again
from the first; and a step that failed once (its process killed) was kept out of
the plan for good. Now each step is named by what it measures
(:func:`step_name`) and its outcome kept in the plan file as it ends:

- ``{"result": {...}}``: the process's figures, checked for sense
  (:func:`~yomiage.runtime.plan.checks.step_problem`);
- ``{"failed": n, "why": ...}``: it failed ``n`` starts in a row for a cause that
  may pass (the process was killed, ran out of time, or gave figures that make no
  sense): measured again at the next start, up to :data:`MAX_ATTEMPTS` times;
- ``{"lasting": why}``: it failed for a cause that holds (the engine refused the
  graph), or :data:`MAX_ATTEMPTS` times: that option is left out until the file is
  removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from yomiage.progress import report_progress
from yomiage.runtime.plan.checks import step_problem

log = logging.getLogger(__name__)

# Starts in a row a step may fail for a cause that may pass before it is left out for good
# (a step that crashes its process every time would otherwise cost every start its time).
MAX_ATTEMPTS = 3


class MeasureError(RuntimeError):
    """A measuring process failed or timed out (the plan then falls back, or leaves out
    the option it measured). ``lasting``: for a cause that holds (the process said so:
    the engine cannot run the graph here), not one that may pass (killed, timed out)."""

    def __init__(self, message: str, *, lasting: bool = False) -> None:
        super().__init__(message)
        self.lasting = lasting


class MeasureInterrupted(MeasureError):
    """The measuring was stopped from outside (a request reached a server measuring in
    its idle time): nothing is wrong with the step in hand, which is measured again at
    the next call and counted as no failure."""


class MeasureDisturbed(MeasureError):
    """Other work ran beside a measuring process
    (:mod:`yomiage.runtime.plan.disturbance`): its figures are not this machine's, so
    they are not kept, and the step counts as no failure."""


def step_name(what: str, *parts: object) -> str:
    """A step's name: what it measures and the figures that decide its result (engine,
    precision, layout, lengths, thread counts, window sizes), never a path, so that
    voices of one architecture share it as they share the plan file."""
    words = [what]
    for part in parts:
        if isinstance(part, Iterable) and not isinstance(part, str):
            words.append(",".join(str(p) for p in part) or "-")
        else:
            words.append(str(part))
    return " ".join(words)


class MeasuredSteps:
    """The outcomes of one plan's measuring steps: those kept from earlier starts, and
    each new one handed to ``keep`` (the whole table) as soon as it is known. Not
    thread-safe: one measuring at a time uses it (the planner's lock)."""

    def __init__(
        self,
        kept: Mapping[str, Any] | None = None,
        *,
        keep: Callable[[Mapping[str, Any]], None] | None = None,
        where: str = "the plan file",
    ) -> None:
        """``kept``: the table a plan file holds (unusable entries are dropped, those
        with figures that make no sense with a warning naming ``where``)."""
        self._records: dict[str, Any] = {}
        for name, record in (kept or {}).items():
            if not isinstance(record, dict):
                continue
            result = record.get("result")
            if result is not None:
                problem = step_problem(result) if isinstance(result, dict) else "not a table"
                if problem:
                    log.warning("ignoring the measuring step %r kept in %s (%s); measuring "
                                "it again", name, where, problem)  # fmt: skip
                    continue
            self._records[str(name)] = record
        self._keep = keep
        self._retry: list[str] = []

    @property
    def records(self) -> dict[str, Any]:
        """The whole table, as a plan file keeps it."""
        return dict(self._records)

    @property
    def retry(self) -> tuple[str, ...]:
        """The steps that failed this time for a cause that may pass (measured again at
        the next start)."""
        return tuple(self._retry)

    def result(self, name: str) -> dict[str, Any] | None:
        """The kept figures of step ``name`` (None: not measured, or it failed)."""
        result = self._records.get(name, {}).get("result")
        return result if isinstance(result, dict) else None

    def lasting(self, name: str) -> str | None:
        """Why step ``name`` is left out for good (None: it is not)."""
        why = self._records.get(name, {}).get("lasting")
        return str(why) if why is not None else None

    def attempts(self, name: str) -> int:
        """Starts in a row in which step ``name`` failed for a cause that may pass."""
        failed = self._records.get(name, {}).get("failed")
        return failed if isinstance(failed, int) and not isinstance(failed, bool) else 0

    def began(self, message: str) -> None:
        """A step begins: said to whoever waits on this load (:mod:`yomiage.progress`)."""
        report_progress(message)

    def finished(self, name: str, result: dict[str, Any]) -> dict[str, Any]:
        """Keep ``result`` as step ``name``'s; MeasureError (counted as a failure that may
        pass) where its figures make no sense."""
        problem = step_problem(result)
        if problem:
            error = MeasureError(f"the figures make no sense ({problem})")
            self.failed(name, error)
            raise error
        self._records[name] = {"result": result}
        self._kept()
        return result

    def failed(self, name: str, error: MeasureError) -> bool:
        """Keep step ``name``'s failure; whether it is now left out for good."""
        attempts = self.attempts(name) + 1
        if error.lasting or attempts >= MAX_ATTEMPTS:
            why = str(error) if error.lasting else f"{error} ({attempts} starts in a row)"
            self._records[name] = {"lasting": why}
            self._kept()
            return True
        self._records[name] = {"failed": attempts, "why": str(error)}
        self._retry.append(name)
        self._kept()
        return False

    def _kept(self) -> None:
        if self._keep is not None:
            self._keep(self.records)
