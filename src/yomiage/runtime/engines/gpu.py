"""Whether a CUDA device could run the voices here, asked without importing PyTorch.

VOICEVOX's editor offers its GPU switch only when ``GET /supported_devices`` says
``cuda``, then restarts the engine with ``--use_gpu``, which checks for real
(:func:`yomiage.cli.serve.gpu_device`). Importing PyTorch in a CPU server to
answer would cost hundreds of MB, so this looks for what it would need instead:
PyTorch installed and an NVIDIA driver present.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
from pathlib import Path


@functools.cache
def cuda_may_run() -> bool:
    """PyTorch is installed and an NVIDIA driver is (its device node, or nvidia-smi)."""
    if importlib.util.find_spec("torch") is None:
        return False
    return Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None
