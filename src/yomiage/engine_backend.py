"""The synthesis backend a :class:`~yomiage.TTS` runs its voices on: ONNX Runtime on CPU
(converted bundles; its graphs' derived files in the cache), or PyTorch (SBV2 folders,
CPU or CUDA; imported only here, so the CPU path never loads torch)."""

from __future__ import annotations

from pathlib import Path

from yomiage.errors import ModelLoadError, install_hint
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.voice import SynthesisBackend


def make_backend(
    backend: str,
    bert_dir: Path,
    tokenizer_dir: Path | None,
    *,
    cache_root: Path,
    device: str,
    threads: int | None,
    bert_precision: str,
    plan_request: PlanRequest,
) -> SynthesisBackend:
    """The backend ``backend`` ("onnx" or "torch") over the BERT in ``bert_dir``, keeping
    what it derives (plans, compiled graphs, made graphs) under ``cache_root``.
    ModelLoadError naming the install command where torch is asked for and missing."""
    if backend == "onnx":
        from yomiage.runtime.derived import BERTS_DIR, COMPILED_DIR, FLOWS_DIR, LAYOUTS_DIR
        from yomiage.runtime.onnx_backend import OnnxBackend

        return OnnxBackend(
            bert_dir,
            precision=bert_precision,
            threads=threads,
            tokenizer_dir=tokenizer_dir,
            plan_request=plan_request,
            verified_dir=cache_root / "verified",
            compiled_dir=cache_root / COMPILED_DIR,
            plans_dir=cache_root / "plans",
            layouts_dir=cache_root / LAYOUTS_DIR,
            flows_dir=cache_root / FLOWS_DIR,
            berts_dir=cache_root / BERTS_DIR,
        )
    try:
        from yomiage.runtime.torch_backend import TorchBackend
    except ImportError as exc:
        raise ModelLoadError(
            f"the PyTorch backend needs torch: {install_hint('torch')} ({exc})"
        ) from exc
    return TorchBackend(bert_dir, device=device, threads=threads)
