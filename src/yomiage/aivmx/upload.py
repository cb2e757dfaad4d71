"""An upload being received into the store, and the errors the store raises.

Split from :mod:`yomiage.aivmx.store` so that what receives bytes (the server's
form reader) needs only this: a partial file that counts, hashes and refuses
bytes past its limit.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import BinaryIO

from yomiage.errors import NoSpaceError, YomiageError


class ModelStoreError(YomiageError):
    """The model store cannot do what was asked; the message says why."""


class ModelNotInstalledError(ModelStoreError, LookupError):
    """No installed voice has this uuid."""


class UploadTooLargeError(ModelStoreError):
    """An upload or download passes the store's size limit; nothing was installed."""


class StoreFullError(ModelStoreError, NoSpaceError):
    """The models folder's disk or quota is full; nothing was installed."""


class NoUpdateError(ModelStoreError):
    """A voice cannot be updated: it has no recorded source, or the source holds the same file."""


class Upload:
    """A partial file being received; :meth:`write` refuses bytes past the store's limit.

    Made by :meth:`ModelStore.receive`; not for use from two threads at once.
    ``filename``: what the client called the file, for messages (the partial's own
    path is the server's business and named in none).
    """

    def __init__(self, path: Path, stream: BinaryIO, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.filename: str | None = None
        self._stream: BinaryIO | None = stream
        self._sha256 = hashlib.sha256()
        self._size = 0
        self.installed = False

    @property
    def size(self) -> int:
        """Bytes received so far."""
        return self._size

    @property
    def sha256(self) -> str:
        """The hex sha256 of the bytes received so far."""
        return self._sha256.hexdigest()

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``; UploadTooLargeError past ``max_bytes`` (nothing more is kept)."""
        if self._stream is None:
            raise ModelStoreError("the upload is closed; start another with receive()")
        if self._size + len(chunk) > self.max_bytes:
            raise too_large(self.max_bytes, self._size + len(chunk), exact=False)
        try:
            self._stream.write(chunk)
        except OSError as exc:
            raise store_error(exc, self.path.parent) from exc
        self._sha256.update(chunk)
        self._size += len(chunk)

    def close(self) -> None:
        """Flush the bytes to disk (a power cut after install must not lose them)."""
        if self._stream is None:
            return
        stream, self._stream = self._stream, None
        try:
            stream.flush()
            os.fsync(stream.fileno())
        except OSError as exc:
            raise store_error(exc, self.path.parent) from exc
        finally:
            stream.close()


def store_error(exc: OSError, folder: Path) -> ModelStoreError:
    """The error for a failed write of a voice into ``folder``: StoreFullError when the
    disk or quota is full (the voice is not to blame), else why the write failed."""
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return StoreFullError(
            f"no space left on the device for the voice in {folder}; free some space there "
            "and try again"
        )
    return ModelStoreError(f"cannot store the voice in {folder}: {exc.strerror or exc}")


def shown(text: str, limit: int = 100) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters (a user string may be long)."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def too_large(limit: int, size: int, *, exact: bool = True) -> UploadTooLargeError:
    """The error for a voice of ``size`` bytes (``exact=False``: at least that many)."""
    what = f"{size:,} bytes" if exact else f"over {limit:,} bytes"
    return UploadTooLargeError(
        f"the model is {what}; the limit is {limit:,} bytes ({limit / 1e6:.0f} MB): "
        "raise it with the server's --max-upload-mb"
    )
