"""Writing a file so that readers see the old one or the new one, never half of either.

The data goes to a temporary file in the same folder, which is then renamed
over the target (atomic on POSIX and on Windows for files on one volume). On
any failure the temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(
    path: Path | str, data: bytes | str, *, mode: int = 0o644, sync: bool = False
) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically; ``sync`` flushes it to disk
    first (for a user's data, where a power cut must not lose the last change).
    Raises OSError, with the target unchanged and no temporary file left."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            if sync:
                out.flush()
                os.fsync(out.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it private
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
