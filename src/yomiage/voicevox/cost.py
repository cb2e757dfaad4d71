"""What an AudioQuery will cost, known before any of it is made.

A server refuses a request over its limits before it synthesizes, not after
minutes of work: :func:`spoken_chars` is the text the voice's BERT will read
(held to ``--max-chars`` like any text), :func:`estimated_seconds` the audio
the query will make (held to ``--max-audio-seconds``), silence included.

The estimate reads the query's own mora lengths, which are the voice's when
the query came from ``/audio_query``. Synthesis ignores them (the voice's
duration predictor decides), so a length past :data:`MAX_MORA_SECONDS`, which
no voice predicts at normal speed, counts as that much: an editor's stretched
vowel does not get a query refused for audio it will not make. The engine
still checks the lengths it predicts, sentence by sentence, before making
each; this estimate spares the work done before that check would fire.
"""

from __future__ import annotations

from collections.abc import Sequence

from yomiage.synthesis.pauses import MIN_PAUSE_SECONDS
from yomiage.voicevox.model import AccentPhrase, AudioQuery
from yomiage.voicevox.query import SENTENCE_MARKS

MAX_MORA_SECONDS = 1.0


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


def estimated_seconds(query: AudioQuery) -> float:
    """Seconds of audio the query will make: its moras, the pauses between its
    sentences (``pauseLength`` or the query's own, at least the engine's floor,
    times ``pauseLengthScale``) and the padding, at its speed."""
    speech = pauses = 0.0  # speech is read at the query's speed, the pauses not
    for phrase in query.accent_phrases:
        for mora in phrase.moras:
            length = max(0.0, mora.consonant_length or 0.0) + max(0.0, mora.vowel_length)
            speech += min(length, MAX_MORA_SECONDS)
        pause = phrase.pause_mora
        if pause is None:
            continue
        if pause.text not in SENTENCE_MARKS:  # a pause inside a sentence is the voice's own
            speech += min(max(0.0, pause.vowel_length), MAX_MORA_SECONDS)
        elif query.pauseLength is not None:
            pauses += query.pauseLength * query.pauseLengthScale
        else:
            own = max(MIN_PAUSE_SECONDS, min(pause.vowel_length, MAX_MORA_SECONDS))
            pauses += own * query.pauseLengthScale
    return speech / query.speedScale + pauses + padding_seconds(query)
