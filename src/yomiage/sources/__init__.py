"""Where voices and BERT come from, resolved to a local folder.

Local folders (plain paths and ``file://`` URIs) work today; hub and S3
sources, the cache and the voice catalog are not implemented yet and say so.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from yomiage.errors import ModelLoadError

REMOTE_SCHEMES = ("hf", "s3", "http", "https")


def resolve(source: str | Path) -> Path:
    """The local folder ``source`` names; ModelLoadError if there is none."""
    if isinstance(source, Path):
        path = source
    else:
        if not isinstance(source, str) or not source or "\0" in source:
            raise ModelLoadError(f"not a voice source: {source!r}")
        parsed = urlparse(source)
        if parsed.scheme in REMOTE_SCHEMES:
            raise ModelLoadError(
                f"{source}: {parsed.scheme}:// sources are not supported yet; download the "
                "folder and pass its local path"
            )
        if parsed.scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise ModelLoadError(f"{source}: file:// URIs must name a local path")
            path = Path(unquote(parsed.path))
        elif parsed.scheme and len(parsed.scheme) > 1:  # not a Windows drive letter
            raise ModelLoadError(f"{source}: unknown source scheme {parsed.scheme!r}")
        else:
            path = Path(source)
    path = path.expanduser()
    if not path.is_dir():
        raise ModelLoadError(f"voice source {str(source)!r}: no such folder {path}")
    return path
