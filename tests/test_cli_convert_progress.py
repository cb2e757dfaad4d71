"""``yomiage convert`` says that a long step still runs (the BERT export was silent
for a minute)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from yomiage.cli.convert import Heartbeat


def test_a_long_convert_step_says_it_is_still_running() -> None:
    lines: list[str] = []
    seen = threading.Event()

    def write(line: str) -> None:
        lines.append(line)
        if "still" in line:
            seen.set()

    with Heartbeat(write, every=0.01) as progress:
        progress("exporting the BERT to ONNX (the longest step)")
        assert seen.wait(timeout=30)
    assert lines[0].endswith("] exporting the BERT to ONNX (the longest step)")
    assert "... still exporting the BERT to ONNX" in lines[1] and "s so far)" in lines[1]
    assert not progress._thread.is_alive()  # stopped with the block: no line after it


def test_no_heartbeat_before_the_first_step() -> None:
    lines: list[str] = []
    with Heartbeat(lines.append, every=0.001):
        time.sleep(0.05)
    assert lines == []


EXPORTER_REGISTRY = """
import importlib.util, sys
from yomiage.export.convert import quiet_exporters
from torch.onnx._internal.exporter import _registration

if importlib.util.find_spec("torchvision") is not None:
    sys.exit(3)  # nothing to warn about here
with quiet_exporters():
    _registration.ONNXRegistry.from_torchlib()  # what the BERT's export builds first
"""


def test_convert_shows_no_torch_exporter_warnings() -> None:
    """Issue 31, 18: ``yomiage convert`` (and a first-use SBV2 ``generate``) printed
    torch's ``W1126 ... torchvision is not installed. Skipping torchvision::nms`` lines,
    which torch's own logger writes past the root logger's level."""
    pytest.importorskip("torch", reason="the exporter is part of yomiage[torch]")
    pytest.importorskip("onnxscript", reason="the exporter is part of yomiage[torch]")
    proc = subprocess.run([sys.executable, "-c", EXPORTER_REGISTRY], capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    if proc.returncode == 3:
        pytest.skip("torchvision is installed: torch has no such warning to print")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""
