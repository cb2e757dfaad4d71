"""GET /supported_devices's cuda answer, found without importing PyTorch (runtime.gpu)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from yomiage.runtime.engines import gpu


def test_cuda_needs_pytorch_and_an_nvidia_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = gpu.cuda_may_run.__wrapped__
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert probe() is False  # no PyTorch: --use_gpu could not work
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(Path, "exists", lambda self: False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert probe() is False  # PyTorch but no driver
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    assert probe() is True
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(Path, "exists", lambda self: str(self) == "/dev/nvidiactl")
    assert probe() is True
