"""How large a body the routes that take VOICEVOX's AudioQuery read: what the heaviest
query this server accepts can weigh.

A query weighs ~130-230 bytes for each character it reads (every mora is an object
of six fields, every accent phrase another), so the body limit that suits ``/tts``
(4 bytes a character) refused the query this server had itself written for a
450-character text (87 KB, 413 from ``/synthesis``). The routes take a query only if
it reads at most ``--max-chars`` characters, its ``kana`` and its moras alike, and a
``/multi_synthesis`` list in all (:meth:`VoxSynthesis.check_cost`); every accent
phrase has a mora, and every mora counts at least one character. So the heaviest
query of ``max_chars`` characters is one phrase per character, each of one mora with
every field at its longest, and a ``kana`` of as many 4-byte characters.
:func:`query_body_limit` is what that query weighs, written as this server writes
it and as an ASCII-only encoder does (Python's ``json.dumps`` by default, which
``requests`` uses: ``\\u30a2`` for ア), plus the fields of the other queries of a
``/multi_synthesis`` list and 64 KiB for the keys a client adds (they are sent back
as given).
"""

from __future__ import annotations

import json

from yomiage.server.voicevox.http import json_bytes
from yomiage.voicevox.model import AccentPhrase, AudioQuery, Mora

MAX_QUERIES = 100  # AudioQueries in one /multi_synthesis
# The routes whose body is a query or its accent phrases (the streaming routes are
# added by yomiage.server.voicevox.streaming_routes, under these paths).
QUERY_PATHS = (
    "/synthesis", "/cancellable_synthesis", "/multi_synthesis", "/streaming_synthesis",
    "/mora_data", "/mora_length", "/mora_pitch",
)  # fmt: skip
# The longest a float prints (a mora's lengths are 0-10 s; a scale, any float in range).
_LONGEST_FLOAT = 2.2250738585072014e-308
_OTHER_FIELDS_BYTES = 64 * 1024


def _heaviest(chars: int) -> AudioQuery:
    """The heaviest query that reads ``chars`` characters."""
    f = _LONGEST_FLOAT
    mora = Mora("ア", "ky", f, "pau", f, f)  # the longest consonant and vowel written
    phrase = AccentPhrase((mora,), accent=1)
    return AudioQuery(
        (phrase,) * chars, speedScale=f, pitchScale=f, intonationScale=f, volumeScale=f,
        prePhonemeLength=f, postPhonemeLength=f, pauseLength=f, pauseLengthScale=f,
        outputSamplingRate=48000, kana="𠮷" * chars, tempoDynamicsScale=f,
    )  # fmt: skip


def _weight(query: AudioQuery) -> int:
    """Bytes of ``query`` as the heavier of this server's encoding and an ASCII-only one."""
    data = query.to_json()
    return max(len(json_bytes(data)), len(json.dumps(data, allow_nan=False)))


def query_body_limit(max_chars: int) -> int:
    """The largest body the query routes read under ``--max-chars max_chars``.

    The weight grows by the same bytes with each character, so it is measured on
    queries of one and two characters and extended (a query of 4,096 is never built)."""
    one, two = _weight(_heaviest(1)), _weight(_heaviest(2))
    per_char = two - one
    fields = one - per_char  # a query's own fields, with no phrase and no kana
    return one + (max_chars - 1) * per_char + (MAX_QUERIES - 1) * fields + _OTHER_FIELDS_BYTES
