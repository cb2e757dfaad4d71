"""The OpenJTalk binding, pointed at the dictionary bundled with yomiage.

We construct ``pyopenjtalk.openjtalk.OpenJTalk`` ourselves and never call the
module-level helpers of ``pyopenjtalk``: those download a dictionary on first
use, which must never happen (offline hosts, read-only installs).
"""

from __future__ import annotations

import threading
from importlib.resources import files
from pathlib import Path
from typing import Any

from yomiage.errors import DictionaryNotFoundError

DICTIONARY_NAME = "open_jtalk_dic_utf_8-1.11"

# OpenJTalk's C frontend and MeCab keep state that is not safe to touch from two
# threads at once, even through different instances; one process-wide lock
# serialises every call. A call costs well under a millisecond.
_OPENJTALK_LOCK = threading.Lock()

NJDFeature = dict[str, Any]


def bundled_dictionary_dir() -> Path:
    """Directory of the compiled OpenJTalk dictionary shipped inside the package."""
    path = Path(str(files("yomiage").joinpath("_data", DICTIONARY_NAME)))
    if not (path / "sys.dic").is_file():
        raise DictionaryNotFoundError(
            f"the OpenJTalk dictionary is missing from {path}; the installation is "
            "incomplete: reinstall yomiage (building it unpacks data/"
            f"{DICTIONARY_NAME}.tar.xz)"
        )
    return path


class OpenJTalk:
    """One OpenJTalk analyser over the bundled (or a given) dictionary.

    Safe to share between threads. ``user_dictionary`` is a compiled MeCab
    user dictionary (see :mod:`yomiage.text.user_dict`).
    """

    def __init__(
        self, dictionary_dir: Path | None = None, user_dictionary: Path | None = None
    ) -> None:
        from pyopenjtalk.openjtalk import OpenJTalk as _Binding

        self.dictionary_dir = dictionary_dir or bundled_dictionary_dir()
        self.user_dictionary = user_dictionary
        userdic = str(user_dictionary).encode() if user_dictionary else b""
        with _OPENJTALK_LOCK:
            self._binding = _Binding(dn_mecab=str(self.dictionary_dir).encode(), userdic=userdic)

    def run_frontend(self, text: str) -> list[NJDFeature]:
        """Word segmentation, readings and accents (NJD features) of ``text``."""
        with _OPENJTALK_LOCK:
            return list(self._binding.run_frontend(text))

    def analyze(self, text: str) -> tuple[list[NJDFeature], list[str]]:
        """NJD features and full-context labels of ``text``, computed under one lock."""
        with _OPENJTALK_LOCK:
            features = list(self._binding.run_frontend(text))
            labels = list(self._binding.make_label(features))
        return features, labels


def compile_user_dictionary(csv_path: Path, out_path: Path, dictionary_dir: Path) -> bool:
    """Compile a MeCab user-dictionary CSV; returns False when MeCab rejects it."""
    from pyopenjtalk.openjtalk import mecab_dict_index

    with _OPENJTALK_LOCK:
        status = mecab_dict_index(
            str(dictionary_dir).encode(), str(csv_path).encode(), str(out_path).encode()
        )
    return bool(status == 0)
