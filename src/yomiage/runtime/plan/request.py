"""What a user asks of the plan: one frozen value, checked once where it is made
(``TTS(...)``, a backend, the flags through :class:`~yomiage.EngineSpec`), carried to
the planner, and echoed back by every plan (:attr:`Plan.request
<yomiage.runtime.plan.value.Plan.request>`), so that logs and ``yomiage bench`` read
what was asked from the plan itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from yomiage.runtime.chunking import Windowing
from yomiage.runtime.engines.placement import PRECISIONS

# ``auto``: the fastest plan measured within the budget; or one precision, honoured.
DECODER_PRECISIONS: tuple[str, ...] = ("auto", *PRECISIONS)
# The default budget: peak resident memory of one process with one voice and its BERT.
DEFAULT_MEMORY_BUDGET_MB = 1000
# Less than that cannot hold the libraries and a voice at all.
MIN_MEMORY_BUDGET_MB = 100
# Set in the measuring processes (and by a user: "0") so that no plan is measured there.
MEASURE_ENV = "YOMIAGE_PLAN_MEASURE"


@dataclass(frozen=True)
class PlanRequest:
    """What each voice's plan is asked for.

    ``decoder_precision``: ``auto`` (the fastest plan measured on this machine within
    the budget), ``fp32``, ``bf16`` (OpenVINO; honoured even where the CPU emulates
    it, with a warning) or ``int8`` (the int8 decoder of bundles converted with
    ``--decoder int8``). ``memory_budget_mb``: the peak resident memory one voice with
    its BERT may hold. ``measure_plan``: measure the plan on this machine (None:
    unless ``YOMIAGE_PLAN_MEASURE=0``); off, a fixed plan from the CPU's features.
    ``windowing``: decoder windows and flow spans that replace the plan's (a
    benchmark's fixed windows; None: the plan's own).

    ValueError, naming the field, for anything else.
    """

    decoder_precision: str = "auto"
    memory_budget_mb: int = DEFAULT_MEMORY_BUDGET_MB
    measure_plan: bool | None = None
    windowing: Windowing | None = None

    def __post_init__(self) -> None:
        if self.decoder_precision not in DECODER_PRECISIONS:
            raise ValueError(
                f"decoder_precision must be one of {', '.join(DECODER_PRECISIONS)}, "
                f"not {self.decoder_precision!r}"
            )
        budget = self.memory_budget_mb
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_MEMORY_BUDGET_MB:
            raise ValueError(
                f"memory_budget_mb must be an integer of at least {MIN_MEMORY_BUDGET_MB}, "
                f"not {budget!r}"
            )
        if self.measure_plan not in (None, True, False):
            raise ValueError(f"measure_plan must be True, False or None, not {self.measure_plan!r}")
        if self.windowing is not None and not isinstance(self.windowing, Windowing):
            raise ValueError(f"windowing must be a Windowing, not {self.windowing!r}")

    def measuring(self) -> bool:
        """Whether the plan is measured: as asked, else unless the environment says
        ``YOMIAGE_PLAN_MEASURE=0`` (read now: a measuring process sets it for itself)."""
        if self.measure_plan is not None:
            return self.measure_plan
        return os.environ.get(MEASURE_ENV, "1").strip() not in ("0", "false", "no")
