"""One build at a time, shared by the requests that ask together (issue 31, R14: four
GET /aivm_models at once built and held four 200 MB listings)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from yomiage.server.voicevox.shared_build import SharedBuild


def test_requests_at_once_share_one_build_and_a_change_starts_another() -> None:
    release = threading.Event()
    builds: list[int] = []

    def build() -> int:
        builds.append(1)
        mine = len(builds)  # which build this is
        assert release.wait(30)
        return mine

    async def scenario() -> None:
        shared = SharedBuild(build)
        first = [asyncio.ensure_future(shared.get()) for _ in range(4)]
        while not builds:  # the build runs on a thread: wait for it to begin
            await asyncio.sleep(0.01)
        shared.changed()  # a change ends meanwhile: who asks now must not get the old one
        late = asyncio.ensure_future(shared.get())
        while len(builds) < 2:
            await asyncio.sleep(0.01)
        release.set()
        assert await asyncio.gather(*first) == [1, 1, 1, 1]  # four requests, one build
        assert await late == 2  # the change: one more
        assert len(builds) == 2
        assert await shared.get() == 3  # nothing running: a new build

    asyncio.run(scenario())


def test_one_waiter_leaving_does_not_cancel_the_build_of_the_others() -> None:
    release = threading.Event()

    async def scenario() -> None:
        shared = SharedBuild(lambda: release.wait(30) and "built")
        leaving, staying = (asyncio.ensure_future(shared.get()) for _ in range(2))
        await asyncio.sleep(0.05)
        leaving.cancel()
        release.set()
        assert await staying == "built"
        with pytest.raises(asyncio.CancelledError):
            await leaving

    asyncio.run(scenario())
