"""The processes of a start end with their parent, and a start that is moving on is not
given up on (issue 49, item 11).

The prober's runs: ``yomiage serve`` gave up on its worker after 900 s while it was
at the last step of measuring the plan (989 s on a busy machine), and the measuring
process ran on under PID 1 (~960 MB) until killed; SIGTERM to ``serve`` while it
measured left the worker, the resource tracker and the measuring process running.
Here a measuring process of the tiny voice is stopped (SIGSTOP) once it is under
way, which holds its parent's load there as a long measuring would, and the parent
is then killed or stopped."""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import slow_start_service
from yomiage.server.engine.worker_calls import WorkerStartError
from yomiage.server.engine.worker_logging import LogLevels
from yomiage.server.engine.worker_spawn import spawn_worker

ROOT = Path(__file__).resolve().parents[1]
GUARD = 120.0  # how long a test waits for what must happen: a bound, not a timing
needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, ...], or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _children(pid: int, marker: str = "") -> dict[int, str]:
    """The children of ``pid`` whose command line holds ``marker``, each with its start
    time (so that a reused pid is not taken for it)."""
    out = {}
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is None or int(fields[1]) != pid:
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (entry / "cmdline").read_bytes():
                out[int(entry.name)] = fields[19]
    return out


def _alive(processes: dict[int, str]) -> list[int]:
    """Those of ``processes`` still there and not a zombie (a stopped one is alive)."""
    alive = []
    for pid, started in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == started and fields[0] not in "ZX":
            alive.append(pid)
    return alive


def _wait_for(condition: Callable[[], object], seconds: float = GUARD) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def _stop_a_measuring_process(parent: int) -> dict[int, str]:
    """SIGSTOP one measuring process of ``parent`` once it is past its start (it has
    loaded ONNX Runtime, so it has done what a measuring process does first)."""
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        for pid, started in _children(parent, "yomiage.plan_child.measure").items():
            with contextlib.suppress(OSError):
                if b"onnxruntime" in Path(f"/proc/{pid}/maps").read_bytes():
                    os.kill(pid, signal.SIGSTOP)
                    return {pid: started}
        time.sleep(0.05)
    raise AssertionError(f"no measuring process of {parent} got under way")


@contextlib.contextmanager
def _cleaned(*groups: dict[int, str]) -> Iterator[None]:
    """Kill whatever of ``groups`` (filled in by the test) is left, whatever happens."""
    try:
        yield
    finally:
        for group in groups:
            for pid in _alive(group):  # only the test's own processes, never a reused pid
                os.kill(pid, signal.SIGKILL)


def _python(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, str(ROOT)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip


_MEASURER = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.slow_start_service import measuring
measuring()
"""


@needs_proc
def test_a_measuring_process_dies_with_its_parent() -> None:
    parent = _python(_MEASURER)
    measuring: dict[int, str] = {}
    with _cleaned({parent.pid: _stat(parent.pid)[19]}, measuring):  # type: ignore[index]
        measuring.update(_stop_a_measuring_process(parent.pid))
        parent.kill()
        parent.wait()
        _wait_for(lambda: not _alive(measuring))
        assert _alive(measuring) == []


_SERVER = """
import multiprocessing, signal, sys, time
sys.path.insert(0, sys.argv[1])
from tests.slow_start_service import measuring
from yomiage.server.engine.worker_logging import LogLevels
from yomiage.server.engine.worker_spawn import spawn_worker

class Terminated(BaseException):
    pass

def terminate(signum, frame):
    raise Terminated

if __name__ == "__main__":
    if "--handle-sigterm" in sys.argv:  # as `yomiage serve` does while it starts
        signal.signal(signal.SIGTERM, terminate)
    try:
        spawn_worker(multiprocessing.get_context("spawn"), measuring, LogLevels(), 0, 600.0)
    except Terminated:
        print("terminated", flush=True)
        time.sleep(600)
"""


def _server(*flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _SERVER, str(ROOT), *flags],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip


def _worker_of(server: int) -> dict[int, str]:
    found: dict[int, str] = {}
    _wait_for(lambda: found.update(_children(server, "spawn_main")) or found)
    assert found, "no worker started"
    return found


@needs_proc
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_server_killed_while_its_worker_measures_leaves_nothing_running(
    how: signal.Signals,
) -> None:
    """Killed (or SIGTERM's default action) before it could stop anything: the worker,
    the measuring process and multiprocessing's resource tracker go too."""
    server = _server()
    everything: dict[int, str] = {}
    with _cleaned(everything):
        worker = _worker_of(server.pid)
        (worker_pid,) = worker
        measuring = _stop_a_measuring_process(worker_pid)
        everything.update(_children(server.pid))  # the worker and the resource tracker
        everything.update(measuring)
        assert len(everything) >= 3  # the worker, its measuring process, the tracker
        os.kill(server.pid, how)
        server.wait()
        _wait_for(lambda: not _alive(everything))
        assert _alive(everything) == []


@needs_proc
def test_sigterm_while_the_worker_measures_stops_it(tmp_path: Path) -> None:
    """``yomiage serve`` turns SIGTERM into an exception in its main thread, which may be
    waiting for the worker to load: the worker and its measuring process are stopped
    there, before the server exits, not left to notice it later."""
    server = _server("--handle-sigterm")
    left: dict[int, str] = {}
    with _cleaned(left, {server.pid: _stat(server.pid)[19]}):  # type: ignore[index]
        worker = _worker_of(server.pid)
        measuring = _stop_a_measuring_process(next(iter(worker)))
        left.update(worker)
        left.update(measuring)
        os.kill(server.pid, signal.SIGTERM)
        assert server.stdout is not None and server.stdout.readline().strip() == "terminated"
        _wait_for(lambda: not _alive(left))
        assert _alive(left) == [] and server.poll() is None  # stopped while it still runs


# -- the start's deadline -------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Pipe:
    """The parent's end of a worker's pipe, its messages due at given times."""

    def __init__(self, clock: _Clock, messages: list[tuple[float, tuple[str, Any]]]) -> None:
        self.clock = clock
        self.messages = list(messages)

    def poll(self, timeout: float) -> bool:
        if self.messages and self.messages[0][0] <= self.clock.now:
            return True
        self.clock.now += timeout
        return False

    def recv(self) -> tuple[str, Any]:
        return self.messages.pop(0)[1]

    def close(self) -> None:
        pass


class _Process:
    def __init__(self, **kw: Any) -> None:
        self.killed = False
        self.exitcode: int | None = None

    def start(self) -> None:
        pass

    def is_alive(self) -> bool:
        return not self.killed

    def kill(self) -> None:
        self.killed, self.exitcode = True, -9

    def join(self, timeout: float | None = None) -> None:
        pass


class _Context:
    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe
        self.process: _Process | None = None

    def Pipe(self, duplex: bool) -> tuple[_Pipe, _Pipe]:
        return self.pipe, self.pipe

    def Process(self, **kw: Any) -> _Process:
        self.process = _Process(**kw)
        return self.process


def test_a_start_that_reports_progress_is_not_given_up_at_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A load of 18 s under a limit of 5 s, reporting a step every 4 s, is ready; the
    same load reporting nothing is given up after 5 s (and its process killed)."""
    clock = _Clock()
    monkeypatch.setattr("yomiage.server.engine.worker_spawn.time.monotonic", clock)
    steps = [(t, ("progress", f"step at {t}")) for t in (4.0, 8.0, 12.0, 16.0)]
    context = _Context(_Pipe(clock, [*steps, (18.0, ("ready", {"v": "card"}))]))
    _, _, voices = spawn_worker(context, slow_start_service.NoVoices, LogLevels(), 0, 5.0)
    assert voices == {"v": "card"} and clock.now >= 18.0
    clock.now = 0.0
    silent = _Context(_Pipe(clock, [(18.0, ("ready", {}))]))
    with pytest.raises(WorkerStartError, match="no progress loading for 5 s"):
        spawn_worker(silent, slow_start_service.NoVoices, LogLevels(), 0, 5.0)
    assert silent.process is not None and silent.process.killed and 5.0 < clock.now < 6.0


@pytest.mark.slow
def test_a_real_worker_reporting_progress_outlives_the_limit() -> None:
    context = multiprocessing.get_context("spawn")
    conn, process, voices = spawn_worker(
        context, functools.partial(slow_start_service.long_load, 16.0, 0.5), LogLevels(), 0, 8.0
    )
    try:
        assert voices == {} and process.is_alive()
    finally:
        conn.close()  # the worker's pipe closes: it exits
        process.join(GUARD)
    with pytest.raises(WorkerStartError, match="no progress loading for 3 s"):
        spawn_worker(context, functools.partial(slow_start_service.long_load, 60.0, None),
                     LogLevels(), 0, 3.0)  # fmt: skip


@pytest.mark.slow
def test_a_voice_loaded_while_serving_that_reports_progress_outlives_the_limit() -> None:
    """A voice installed while serving (a full-size AIVMX measures its plan) was bounded
    by the same fixed limit; now its deadline moves on with each step it reports."""
    from yomiage.server.engine.liveness import Liveness
    from yomiage.server.engine.worker import WorkerService

    service = WorkerService(slow_start_service.loading_service, start_timeout=5.0,
                            liveness=Liveness(call_timeout=3.0))  # fmt: skip
    try:
        assert service.load_voice("measured", "12") == {}
        assert service.hangs == 0
    finally:
        service.close()


def test_the_services_here_report_on_the_progress_logger() -> None:
    from yomiage.progress import PROGRESS_LOGGER, progress_to

    said: list[str] = []
    with progress_to(said.append):
        slow_start_service.long_load(0.3, 0.1)
    assert said and PROGRESS_LOGGER == "yomiage.progress"
