"""Messages for clients name files, never the server's folders.

A refused install answered "the voice was not loaded: /srv/yomiage/models/13eb….aivmx:
the graph is not an SBV2 JP-Extra export" (the message of the error that stopped the
load, which names the file it read). A client learns nothing from the server's
layout that it needs, and an attacker learns the user name and the folders:
:func:`without_paths` keeps each absolute path's last part, the file's name, which
is what the client sent or can see in ``GET /aivm_models``. (That listing's
``file_path`` is AivisSpeech's field and stays as its clients expect.)
"""

from __future__ import annotations

import re

# An absolute path of two parts or more: POSIX (not the // of a URL, nor a path inside
# one: the slash follows no name, scheme or slash) or a Windows drive's.
_PATH = re.compile(
    r"(?<![\w.:/\\-])/(?:[^\s/'\":;,()]+/)+([^\s/'\":;,()]+)"
    r"|\b[A-Za-z]:\\(?:[^\s\\'\":;,()]+\\)+([^\s\\'\":;,()]+)"
)


def without_paths(message: str) -> str:
    """``message`` with each absolute file path cut to its file name."""
    return _PATH.sub(lambda m: m.group(1) or m.group(2), message)
