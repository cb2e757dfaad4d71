"""The app's worker threads, which say "stopping" rather than fail once they are shut.

In a forced stop the server's thread pool can be shut down while a request
is still running (uvicorn on uvloop does it in that order). A plain
``ThreadPoolExecutor`` then raises a bare RuntimeError at the request's next
step, which every route would answer as a 500 "internal error";
:class:`ServerStopping` lets them all answer what it is, a 503.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class ServerStopping(RuntimeError):
    """Work was handed to the server's threads after they were shut down."""


class ServerThreads(ThreadPoolExecutor):
    def __init__(self, workers: int) -> None:
        super().__init__(workers, thread_name_prefix="yomiage")
        self.stopped = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        try:
            return super().submit(fn, *args, **kwargs)
        except RuntimeError:
            if self.stopped:
                raise ServerStopping("the server is shutting down; retry shortly") from None
            raise

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.stopped = True
        super().shutdown(wait, cancel_futures=cancel_futures)
