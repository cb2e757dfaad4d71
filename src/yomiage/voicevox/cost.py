"""What an AudioQuery will cost, known before any of it is made.

A server refuses a request over its limits before it synthesizes, not after
minutes of work: :func:`spoken_chars` is the text the voice's BERT will read
(held to ``--max-chars`` like any text), :func:`estimated_seconds` the audio
the query will make (held to ``--max-audio-seconds``), silence included.

The estimate reads the query's own lengths, which are the voice's when the
query came from ``/audio_query`` and what the voice reads when an editor changed
them (:mod:`yomiage.synthesis.lengths`); the pauses between sentences count at
``pauseLength`` or the engine's floor, since the voice predicts them only as it
reads. The engine still checks the audio it is about to make, sentence by
sentence; this estimate spares the work done before that check would fire.
"""

from __future__ import annotations

from collections.abc import Sequence

from yomiage.synthesis.pauses import MIN_PAUSE_SECONDS
from yomiage.voicevox.model import AccentPhrase, AudioQuery
from yomiage.voicevox.query import SENTENCE_MARKS


def spoken_chars(phrases: Sequence[AccentPhrase]) -> int:
    """Characters the voice reads for these phrases: each mora's kana (at least one
    character), each pause's mark and each question's mark."""
    count = 0
    for phrase in phrases:
        count += sum(max(1, len(m.text)) for m in phrase.moras)
        count += int(phrase.pause_mora is not None) + int(phrase.is_interrogative)
    return count


def padding_seconds(query: AudioQuery) -> float:
    """The silence added before and after, shortened by speedScale as VOICEVOX does."""
    return (query.prePhonemeLength + query.postPhonemeLength) / query.speedScale


def estimated_seconds(query: AudioQuery, *, pause_fields: bool = True) -> float:
    """Seconds of audio the query will make: its moras, the pauses between its
    sentences (``pauseLength`` or the engine's floor, times ``pauseLengthScale``;
    the floor alone where ``pause_fields`` is False, as AivisSpeech ignores them)
    and the padding, at its speed."""
    speech = pauses = 0.0  # speech is read at the query's speed, the pauses not
    for phrase in query.accent_phrases:
        for mora in phrase.moras:
            speech += max(0.0, mora.consonant_length or 0.0) + max(0.0, mora.vowel_length)
        pause = phrase.pause_mora
        if pause is None:
            continue
        speech += max(0.0, pause.vowel_length)  # the mark itself, read at its length
        if pause.text in SENTENCE_MARKS:  # then the pause the voice puts between sentences
            if pause_fields and query.pauseLength is not None:
                pauses += query.pauseLength * query.pauseLengthScale
            else:
                pauses += MIN_PAUSE_SECONDS * (query.pauseLengthScale if pause_fields else 1.0)
    return speech / query.speedScale + pauses + padding_seconds(query)
