"""What a user asks of the plan: one frozen value, checked once where it is made
(``TTS(...)``, a backend, the flags through :class:`~yomiage.EngineSpec`), carried to
the planner, and echoed back by every plan (:attr:`Plan.request
<yomiage.runtime.plan.value.Plan.request>`), so that logs and ``yomiage bench`` read
what was asked from the plan itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from yomiage.runtime.chunking import Windowing
from yomiage.runtime.engines.placement import PRECISIONS

# ``auto``: the fastest plan measured within the budget; or one precision, honoured.
DECODER_PRECISIONS: tuple[str, ...] = ("auto", *PRECISIONS)
# The default budget: peak resident memory of one process with one voice and its BERT.
DEFAULT_MEMORY_BUDGET_MB = 1000
# Less than that cannot hold the libraries and a voice at all.
MIN_MEMORY_BUDGET_MB = 100
# Set in the measuring processes (and by a user: "0") so that no plan is measured there;
# "1" measures at load, as ``measure_plan=True``.
MEASURE_ENV = "YOMIAGE_PLAN_MEASURE"
# When a plan is measured on this machine (:meth:`PlanRequest.measuring`).
Measuring = Literal["now", "later", "off"]


@dataclass(frozen=True)
class PlanRequest:
    """What each voice's plan is asked for.

    ``decoder_precision``: ``auto`` (the fastest plan measured on this machine within
    the budget), ``fp32``, ``bf16`` (OpenVINO; honoured even where the CPU emulates
    it, with a warning) or ``int8`` (the int8 decoder of bundles converted with
    ``--decoder int8``). ``memory_budget_mb``: the peak resident memory one voice with
    its BERT may hold. ``measure_plan``: True measures the plan on this machine as the
    voice loads, where nothing is kept yet (minutes, once); None (the default) never
    makes a load wait: what is kept, else the plan shipped for this CPU family, else a
    fixed one, and this machine measured when asked (``yomiage bench``, a server's idle
    time, :meth:`~yomiage.runtime.plan.planner.Planner.measure`); False, a fixed plan
    from the CPU's features (``YOMIAGE_PLAN_MEASURE`` sets None's: 0 or 1).
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

    def measuring(self) -> Measuring:
        """When this machine's plan is measured: ``now`` (at load, where nothing is kept),
        ``later`` (when asked; a load takes what is kept or shipped) or ``off``; as
        asked, else as ``YOMIAGE_PLAN_MEASURE`` says (read now: a measuring process
        sets it for itself)."""
        asked = self.measure_plan
        if asked is None:
            word = os.environ.get(MEASURE_ENV, "").strip().lower()
            asked = {"0": False, "false": False, "no": False, "1": True, "true": True,
                     "yes": True}.get(word)  # fmt: skip
        return "later" if asked is None else "now" if asked else "off"
