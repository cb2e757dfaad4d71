"""The compiled OpenJTalk dictionaries bundled with yomiage: packed small in the wheel
(:mod:`.pack`), pinned file by file (:mod:`.pins`), unpacked once where OpenJTalk can
map them (:mod:`.place`)."""

from yomiage.text.system_dictionary.place import dictionary_dir

__all__ = ["dictionary_dir"]
