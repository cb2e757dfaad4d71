"""Normalized text to the phonemes, tones and word2ph a JP-Extra model expects.

This follows SBV2's g2p exactly (spec §2.3-§2.7): any difference changes
what a trained voice hears, so readings are improved in the normalizer, never here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from yomiage.errors import TextError
from yomiage.text.accent import tones_from_labels
from yomiage.text.mora import is_punctuation, reading_to_phonemes
from yomiage.text.openjtalk import NJDFeature, OpenJTalk
from yomiage.text.punctuation import replace_punctuation
from yomiage.text.symbols import PAD, PUNCTUATION_SET


@dataclass(frozen=True)
class Phonemes:
    """One utterance as the model reads it (before blanks are interspersed).

    ``phones``/``tones`` start and end with the ``_`` pad; ``word2ph`` has one
    entry per character of ``bert_text`` plus one per pad and sums to
    ``len(phones)``. ``bert_text`` is what BERT reads: the joined OpenJTalk
    word surfaces, which may differ from ``text`` (OpenJTalk rewrites some
    numerals).

    ``text`` is the *normalized* text (numbers spelled out, punctuation
    unified), not the reading: the reading is ``words``/``readings`` (one
    katakana reading per word) or :attr:`kana`, the whole of it.
    """

    text: str
    bert_text: str
    words: tuple[str, ...]
    readings: tuple[str, ...]
    phones: tuple[str, ...]
    tones: tuple[int, ...]
    word2ph: tuple[int, ...]

    @property
    def kana(self) -> str:
        """The reading in katakana, word after word (punctuation kept): what is spoken."""
        return "".join(self.readings)


def split_words(features: Sequence[NJDFeature]) -> tuple[list[str], list[str]]:
    """Word surfaces and readings; unreadable symbols read as ``'`` (a short pause)."""
    words: list[str] = []
    readings: list[str] = []
    for node in features:
        word = replace_punctuation(node["string"])
        reading = str(node["pron"]).replace("’", "")
        if reading == "、":  # OpenJTalk's reading of any symbol
            reading = word if all(ch in PUNCTUATION_SET for ch in word) else "'" * len(word)
        elif reading == "？":
            reading = "?"
        if not reading:
            continue  # a symbol removed entirely by the punctuation filter
        words.append(word)
        readings.append(reading)
    return words, readings


def _merge_tones(phones: list[str], tones: list[tuple[str, int]]) -> list[int]:
    """Give every phone its tone; punctuation (absent from the labels) gets 0."""
    out: list[int] = []
    i = 0
    for phone in phones:
        if i >= len(tones):
            out.append(0)
        elif phone == tones[i][0]:
            out.append(tones[i][1])
            i += 1
        elif phone in PUNCTUATION_SET:
            out.append(0)
        else:
            raise TextError(f"reading and accent labels disagree at {phone!r} vs {tones[i][0]!r}")
    return out


def _distribute(n_phones: int, n_tokens: int) -> list[int]:
    if n_tokens == 0:
        return []
    base, rem = divmod(n_phones, n_tokens)
    return [base + 1] * rem + [base] * (n_tokens - rem)


def g2p(text: str, openjtalk: OpenJTalk) -> Phonemes:
    """SBV2 g2p of already-normalized ``text``."""
    features, labels = openjtalk.analyze(text)
    words, readings = split_words(features)
    phones: list[str] = []
    word2ph: list[int] = []
    previous: list[str] = []
    for word, reading in zip(words, readings, strict=True):
        word_phones = reading_to_phonemes(reading, previous)
        phones.extend(word_phones)
        n_tokens = 1 if word in PUNCTUATION_SET else len(word)
        word2ph.extend(_distribute(len(word_phones), n_tokens))
        previous = word_phones or previous
    tones = _merge_tones(phones, tones_from_labels(labels))
    bert_text = "".join(words)
    result = Phonemes(
        text=text,
        bert_text=bert_text,
        words=tuple(words),
        readings=tuple(readings),
        phones=(PAD, *phones, PAD),
        tones=(0, *tones, 0),
        word2ph=(1, *word2ph, 1),
    )
    if sum(result.word2ph) != len(result.phones) or len(result.word2ph) != len(bert_text) + 2:
        raise TextError(f"phonemes of {text!r} do not line up with its characters")
    return result


__all__ = ["Phonemes", "g2p", "is_punctuation", "split_words"]
