"""An installed voice that crashes the worker natively as it loads is skipped by the next
worker, so one bad file in the models folder neither stops ``yomiage serve`` from
starting nor makes a restarted worker die on it again and again."""

from __future__ import annotations

import functools
import os
import signal
import time
from pathlib import Path

import pytest

from tests import crashing_service
from tests.conftest import TEST_VOICES
from yomiage.server.engine.load_journal import LoadJournal, died_loading

AIVMX = TEST_VOICES.parent / "aivmx" / "tiny.aivmx"


def test_a_voice_a_worker_died_loading_is_skipped_by_the_next(tmp_path: Path) -> None:
    bad, good = tmp_path / "bad.aivmx", tmp_path / "good.aivmx"
    first = LoadJournal(tmp_path)
    with first.loading(good):
        assert died_loading(tmp_path)  # while it loads, the mark is there
    assert not died_loading(tmp_path)
    dying = first.loading(bad)
    dying.__enter__()  # the process dies here: the block never ends
    assert died_loading(tmp_path)

    second = LoadJournal(tmp_path)  # the next worker
    assert second.crashed(bad) and not second.crashed(good)
    assert not died_loading(tmp_path)  # taken into the record
    assert LoadJournal(tmp_path).crashed(bad)  # and kept for every later worker


def test_a_python_error_while_loading_is_not_a_crash(tmp_path: Path) -> None:
    journal = LoadJournal(tmp_path)
    with pytest.raises(ValueError, match="refused"), journal.loading(tmp_path / "v.aivmx"):
        raise ValueError("refused")
    assert not died_loading(tmp_path)
    assert not LoadJournal(tmp_path).crashed(tmp_path / "v.aivmx")


@pytest.mark.parametrize("content", ["{not json", '{"a": 1}', "\xff"])
def test_an_unreadable_record_is_taken_as_empty(tmp_path: Path, content: str) -> None:
    (tmp_path / "crashed.json").write_text(content, encoding="latin-1")
    assert not LoadJournal(tmp_path).crashed(tmp_path / "v.aivmx")


def test_a_journal_that_cannot_be_written_never_stops_a_load(tmp_path: Path) -> None:
    journal = LoadJournal(tmp_path / "gone")  # no such folder
    with journal.loading(tmp_path / "v.aivmx"):
        pass
    assert not journal.crashed(tmp_path / "v.aivmx")


@pytest.mark.server
def test_serve_starts_without_an_installed_voice_that_crashes_it(
    test_voice: Path, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi")
    from yomiage.cli.serve import start_worker

    journal = tmp_path / "journal"
    journal.mkdir()
    bad = str(tmp_path / "bad.aivmx")
    factory = functools.partial(
        crashing_service.build_with_installed, str(test_voice), str(journal), bad, str(AIVMX)
    )
    worker = start_worker(factory, journal=journal, installed=2, worker_timeout=60)
    try:
        assert sorted(worker.voices) == ["good", "tiny"]
        assert LoadJournal(journal).crashed(Path(bad))  # the first start died on it
        # A later crash restarts the worker once, without that voice, not in a loop.
        pid, restarts = worker.pid, worker.restarts
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        crashing_service.wait_until_restarted(worker, pid)
        time.sleep(1.0)  # a restart loop would show as more restarts by now
        assert worker.restarts == restarts + 1 and worker.available
        assert sorted(worker.voices) == ["good", "tiny"]
    finally:
        worker.close()


@pytest.mark.server
def test_a_start_that_dies_elsewhere_is_not_retried(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from yomiage.cli.serve import start_worker
    from yomiage.server.engine.worker import WorkerStartError

    starts = tmp_path / "starts"
    factory = functools.partial(crashing_service.crash_at_start, str(starts))
    with pytest.raises(WorkerStartError, match="died"):
        start_worker(factory, journal=tmp_path, installed=3, worker_timeout=60)
    assert starts.read_text() == "started\n"  # once: no installed voice was loading
