"""``yomiage convert`` says that a long step still runs (the BERT export was silent
for a minute)."""

from __future__ import annotations

import threading
import time

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
