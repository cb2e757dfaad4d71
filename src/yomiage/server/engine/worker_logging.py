"""How the worker process logs: as the process that started it.

``yomiage serve`` configures logging in its own process (``yomiage.cli.main``):
WARNING by default, INFO for what takes minutes or changes while serving
(downloads, first-use conversions, voice installs, user dictionary reloads), more
with ``-v``. The worker is a fresh process ("spawn") where the voices load and the
dictionary is reloaded, so it is handed those levels and sets them again; it used
to get the root level only, and said none of that without ``-v``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

WORKER_FORMAT = "%(levelname)s %(name)s (worker): %(message)s"


@dataclass(frozen=True)
class LogLevels:
    """The root logger's level, and the levels set on yomiage's own loggers."""

    root: int = logging.WARNING
    loggers: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of_this_process(cls, root: int | None = None) -> LogLevels:
        """This process's levels (``root`` overrides the root logger's)."""
        own = sorted(
            (name, logger.level)
            for name, logger in logging.Logger.manager.loggerDict.items()
            if isinstance(logger, logging.Logger)
            and logger.level != logging.NOTSET
            and (name == "yomiage" or name.startswith("yomiage."))
        )
        level = logging.getLogger().getEffectiveLevel() if root is None else root
        return cls(level, tuple(own))

    def apply(self) -> None:
        """Log in this (new) process as :meth:`of_this_process` found the other one doing."""
        logging.basicConfig(level=self.root, format=WORKER_FORMAT)
        for name, level in self.loggers:
            logging.getLogger(name).setLevel(level)
