"""When ``yomiage bench`` calls the machine busy (issue 49, 3): the load average read
before and after each configuration, judged against the cores and bench's own threads.
Nothing here is timed: the readings are given."""

from __future__ import annotations

import os

import pytest

from yomiage.cli.bench_load import LoadReading, busy_warning, load_average, own_threads


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        (0.2, 1.1, None),  # bench's own thread
        (7.8, 6.9, "load 7.8 on 2 logical cores"),  # the newcomer's machine
        (0.3, 3.5, "load 3.5 on 2 logical cores"),  # over the cores at the end
        (None, None, None),  # no load average here (Windows)
    ],
)
def test_a_load_over_the_cores_is_called_busy(
    before: float | None, after: float | None, why: str | None
) -> None:
    assert LoadReading(before, after).disturbed(cores=2, own_threads=2) == why


def test_a_load_that_moves_more_than_bench_own_threads_is_called_busy() -> None:
    # 16 logical cores: a build of 6 jobs started while 1 thread was measured.
    moved = LoadReading(0.5, 6.6)
    assert moved.disturbed(cores=16, own_threads=4) == "load went from 0.5 to 6.6 while it ran"
    # A 4-thread configuration after a quiet one moves the load by its own threads only.
    assert LoadReading(0.4, 4.2).disturbed(cores=16, own_threads=4) is None
    said = busy_warning([("1 thread, decoder auto", moved, 1),
                         ("4 threads, decoder auto", LoadReading(6.6, 7.0), 4)], 16)  # fmt: skip
    assert said == (
        "the machine was busy: the load changed by more than bench's own threads "
        "(1 thread, decoder auto, 0.5 to 6.6); timings are not reliable, run again when idle "
        "(`uptime` shows the load)"
    )


def test_busy_names_the_configurations_it_disturbed_and_the_highest_load() -> None:
    quiet, busy = LoadReading(0.1, 1.0), LoadReading(2.5, 3.4)
    said = busy_warning([("1 thread, decoder auto", quiet, 2), ("2 threads, decoder auto", busy, 2)],
                        2)  # fmt: skip
    assert said is not None
    assert said.startswith("the machine was busy: load up to 3.4 on 2 logical cores during "
                           "2 threads, decoder auto; timings are not reliable")  # fmt: skip
    assert busy_warning([("1 thread, decoder auto", quiet, 2)], 2) is None


def test_bench_own_threads_before_a_configuration_are_not_other_work() -> None:
    """After the voice's first load on 16 threads, a 1-thread configuration sees the load
    fall from 16: that was bench. A build starting during the next one is not."""
    assert own_threads([1, 2, 8], cores=16) == [16, 2, 8]
    falling, rising = LoadReading(15.0, 2.0), LoadReading(2.0, 9.5)
    own = own_threads([1, 2], cores=16)
    assert falling.disturbed(16, own[0]) is None
    assert rising.disturbed(16, own[1]) == "load went from 2.0 to 9.5 while it ran"


def test_load_average_is_none_where_the_system_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "getloadavg")
    assert load_average() is None
