"""The plan a voice runs by: each graph's engine and precision, the decoder's window
lengths, the threads; one frozen value (:class:`Plan`), chosen in one place
(:class:`Planner`).

Which plan is fastest is a property of the CPU, not of a flag it reports: the
decoder's time per frame on OpenVINO in bfloat16 depends on the window's length
in one way where the CPU has AVX-512 BF16 and in another where it has AMX, and the
memory it keeps per length differs as much; a CPU with AVX2 alone has no
bfloat16 at all (``docs/performance.md`` says what each CPU family gets,
``benchmarks/RESULTS.md`` has a table per family). So a
plan is chosen from measurements taken on the machine, once per CPU model,
voice architecture, thread count and engine versions, and kept in the cache; a
new memory budget re-chooses from them without measuring again.

The order of the decision (:mod:`~yomiage.runtime.plan.planner`):

1. ``int8``: the int8 decoder on ONNX Runtime, an explicit choice with nothing to
   measure.
2. A small decoder (under 1 M parameters, the committed tiny voice): ONNX Runtime
   float32, bfloat16 if asked; OpenVINO's fixed costs are most of the work there.
3. Measuring off (``YOMIAGE_PLAN_MEASURE=0``, ``TTS(measure_plan=False)``) or no
   cache to keep it in: :func:`~yomiage.runtime.plan.fallback.fallback_plan`, a fixed
   answer from the CPU's features and the budget.
4. Otherwise the fastest option whose predicted peak memory fits the budget (the
   lightest of those it cannot tell apart from the fastest), never slower than plain
   ONNX Runtime float32 on any reference sentence under ``auto``
   (:func:`~yomiage.runtime.plan.choose.choose_plan`).

The encoder stays on ONNX Runtime in float32 in every plan; the decoder, most of
the work, is where the plans differ; the flow may follow a bfloat16 decoder onto
OpenVINO where that is faster and the peak measured with both fits.

The rooms of this wing:

- :mod:`~yomiage.runtime.plan.request`: what the user asks (precision, budget);
- :mod:`~yomiage.runtime.plan.value`: the plan itself (:class:`Plan`,
  :class:`DecoderChoice`, :class:`PlanOption`);
- :mod:`~yomiage.runtime.plan.measurements`: what is measured, as values;
- :mod:`~yomiage.runtime.plan.schedules`: the decoder schedules worth measuring;
- :mod:`~yomiage.runtime.plan.choose`: the rule from measurements to a plan;
- :mod:`~yomiage.runtime.plan.planner`: the order of the decision, for one backend;
- :mod:`~yomiage.runtime.plan.measure`: the parent of the measuring processes
  (:mod:`yomiage.plan_child` is what they run), with
  :mod:`~yomiage.runtime.plan.steps` (each step kept as it ends),
  :mod:`~yomiage.runtime.plan.checks` (figures that make no sense are measured
  again) and :mod:`~yomiage.runtime.plan.lock` (one process measures a key at a
  time);
- :mod:`~yomiage.runtime.plan.store`: the measurements kept in the cache.

The way in is :class:`Planner`: a backend gives it the request and asks it for each
voice's plan. Nothing here imports a room above the runtime.
"""

from yomiage.runtime.plan.choose import REFERENCE_SENTENCE_FRAMES, SPEED_WORTH_MEMORY
from yomiage.runtime.plan.job import BertGraph
from yomiage.runtime.plan.planner import Planner
from yomiage.runtime.plan.request import DEFAULT_MEMORY_BUDGET_MB
from yomiage.runtime.plan.value import DecoderChoice, Plan, PlanOption

__all__ = [
    "DEFAULT_MEMORY_BUDGET_MB",
    "REFERENCE_SENTENCE_FRAMES",
    "SPEED_WORTH_MEMORY",
    "BertGraph",
    "DecoderChoice",
    "Plan",
    "PlanOption",
    "Planner",
]
