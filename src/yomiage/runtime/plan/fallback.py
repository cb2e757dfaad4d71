"""The plan without measurements (:func:`fallback_plan`): what a voice runs by where
nothing was measured on this machine and nothing was shipped for its CPU family, or
where measuring is off."""

from __future__ import annotations

from yomiage.runtime.engines.placement import OPENVINO_BF16, ORT_FP32
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.plan.value import DecoderChoice, Plan

# The smallest budget under which a plan that measured nothing takes OpenVINO's
# bfloat16 decoder (256-frame windows) under ``auto``, where bfloat16 is native. Its
# peak with the full-size voice, as the planner measured it, was over the default budget
# on every CPU measured and under this one, ONNX Runtime float32's within the default
# (measured: benchmarks/history/issue-32.md, ninth pass). So below this, even where
# bfloat16 is native, the fallback is float32: the budget holds where nothing was
# measured too.
FALLBACK_BF16_BUDGET_MB = 1900


def fallback_plan(
    request: PlanRequest, *, openvino: bool, native_bf16: bool, threads: int, why: str
) -> Plan:
    """The plan without measurements: ONNX Runtime float32, 256-frame windows, the
    lightest plan on every CPU measured; bfloat16 on OpenVINO where it was asked, or
    under ``auto`` where the CPU has it natively and the budget is at least
    :data:`FALLBACK_BF16_BUDGET_MB`, as its memory is not predicted here."""
    precision = request.decoder_precision
    native = native_bf16 and precision == "auto"  # float32 asked for: as without bf16
    roomy = request.memory_budget_mb >= FALLBACK_BF16_BUDGET_MB
    if precision == "bf16" or (openvino and native and roomy):
        choice = DecoderChoice.at(OPENVINO_BF16)
    else:
        choice = DecoderChoice.at(ORT_FP32)
    return Plan(choice, request, f"fallback: {why}", threads)
