"""What an access-log line shows of a request: its path, the query string only when asked.

VOICEVOX's routes carry the text to read in the URL (``POST /audio_query?text=...``),
so uvicorn's access log wrote every sentence a client had spoken to stderr, and a
4,096-character text made one line of 37 kB. :class:`AccessLogFilter` rewrites the
lines of the ``uvicorn.access`` logger (uvicorn's own, and the app's 499 lines, which
have the same arguments): the query string becomes ``?…`` unless the operator asked
for it (``yomiage serve --access-log-query``), and a target longer than
:data:`MAX_TARGET_CHARS` is cut there, with its length said.
"""

from __future__ import annotations

import logging

ACCESS_LOGGER = "uvicorn.access"
# Long enough for every route with its ids; a line stays one terminal line or two.
MAX_TARGET_CHARS = 200


def shown_target(target: str, *, query: bool = False) -> str:
    """``target`` (a path and perhaps ``?query``) as an access-log line shows it."""
    path, mark, _ = target.partition("?")
    if mark and not query:
        target = f"{path}?…"
    if len(target) > MAX_TARGET_CHARS:
        target = f"{target[:MAX_TARGET_CHARS]}…[{len(target)} characters]"
    return target


class AccessLogFilter(logging.Filter):
    """The access log's lines with their targets shown by :func:`shown_target`.

    uvicorn logs ``'%s - "%s %s HTTP/%s" %d'`` with the client, method, target,
    HTTP version and status; a record of another shape passes unchanged."""

    def __init__(self, *, query: bool = False) -> None:
        super().__init__()
        self.query = query

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            target = shown_target(args[2], query=self.query)
            record.args = (args[0], args[1], target, args[3], args[4])
        return True


def install(*, query: bool = False) -> AccessLogFilter:
    """Put the filter on the access logger (once: a filter already there is replaced)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    for old in [f for f in logger.filters if isinstance(f, AccessLogFilter)]:
        logger.removeFilter(old)
    added = AccessLogFilter(query=query)
    logger.addFilter(added)
    return added
