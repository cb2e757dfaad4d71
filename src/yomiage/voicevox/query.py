"""AudioQueries from our readings, and readings from AudioQueries an editor changed.

Unlike AivisSpeech, which fills every mora with zeros, the lengths here are the
voice's own (its duration predictor, per phoneme) and the pitches follow the
accent the voice is given (a high and a low level on VOICEVOX's log-F0 scale,
zero for unvoiced moras), so an editor shows what the voice will do. Going
back, the moras and accents of the query decide the phonemes and tones the
voice reads: an editor's accent change is heard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from yomiage.audio.timings import Timings
from yomiage.text.accent_phrases import DEVOICED, MoraSpec, PhraseSpec, mora_kana
from yomiage.text.g2p import Phonemes
from yomiage.text.symbols import PAD, PUNCTUATION_SET
from yomiage.voicevox.model import AccentPhrase, AudioQuery, Mora, QueryError

PITCH_HIGH = 5.9  # ln Hz, VOICEVOX's scale (about 365 Hz)
PITCH_LOW = 5.6  # about 270 Hz
# Sentence-final marks as a pause mora's text (VOICEVOX writes 、 for every pause;
# the mark tells where our sentences end, so pauseLength reaches the right pauses).
_MARK_OF = {".": "。", "!": "！", "?": "？", "…": "…"}
_PHONE_OF_MARK = {"。": ".", "．": ".", "！": "!", "？": "?", "…": "…", "、": ",", "，": ",",
                  ".": ".", "!": "!", "?": "?", ",": ","}  # fmt: skip
# What BERT reads for a mark: one token each ("…" is three to its tokenizer, as "...").
_BERT_CHAR = {"…": "."}
SENTENCE_MARKS = frozenset({"。", "！", "？", "…", "．", ".", "!", "?"})


@dataclass(frozen=True)
class SentenceReading:
    """One sentence as the engine reads it: phonemes, predicted timings, accent phrases."""

    phonemes: Phonemes
    timings: Timings
    phrases: tuple[PhraseSpec, ...]


def _phone(vowel: str) -> str:
    """SBV2's phoneme for a mora's vowel (devoiced vowels are voiced ones to it)."""
    return "q" if vowel == "cl" else "N" if vowel == "N" else vowel.lower()


def _phone_lengths(reading: SentenceReading) -> list[float]:
    """Seconds of each phoneme between the pads; a blank's time goes to the phoneme
    before it."""
    phones = reading.phonemes.phones
    tokens = reading.timings.phonemes
    blanks = len(tokens) == 2 * len(phones) + 1
    lengths = []
    for i in range(1, len(phones) - 1):
        if blanks:
            lengths.append(tokens[2 * i + 1].duration + tokens[2 * i + 2].duration)
        else:
            lengths.append(tokens[i].duration)
    return lengths


def _mora(spec: MoraSpec, consonant_length: float | None, vowel_length: float, tone: int) -> Mora:
    voiced = spec.vowel not in DEVOICED and spec.vowel != "cl"
    pitch = (PITCH_HIGH if tone else PITCH_LOW) if voiced else 0.0
    return Mora(spec.text, spec.consonant, consonant_length, spec.vowel, vowel_length, pitch)


def accent_phrases(readings: Sequence[SentenceReading]) -> list[AccentPhrase]:
    """The accent phrases of whole text: each sentence's, the last phrase of each but the
    last sentence ending in a pause mora whose text is the sentence's final mark."""
    out: list[AccentPhrase] = []
    for n, reading in enumerate(readings):
        phrases = _sentence_phrases(reading)
        last_phone = reading.phonemes.phones[-2] if len(reading.phonemes.phones) > 2 else ""
        if n < len(readings) - 1 and phrases and last_phone in _MARK_OF:
            last = phrases[-1]
            length = last.pause_mora.vowel_length if last.pause_mora else 0.0
            pause = Mora(_MARK_OF[last_phone], None, None, "pau", length, 0.0)
            phrases[-1] = AccentPhrase(last.moras, last.accent, pause, last.is_interrogative)
        out.extend(phrases)
    return out


def _sentence_phrases(reading: SentenceReading) -> list[AccentPhrase]:
    phones = reading.phonemes.phones[1:-1]
    lengths = _phone_lengths(reading)
    j = 0
    aligned = True
    built: list[tuple[list[tuple[MoraSpec, float | None, float]], float]] = []
    for phrase in reading.phrases:
        moras: list[tuple[MoraSpec, float | None, float]] = []
        for spec in phrase.moras:
            consonant_length = None
            if spec.consonant is not None:
                aligned &= j < len(phones) and phones[j] == spec.consonant
                consonant_length = lengths[j] if j < len(lengths) else 0.0
                j += 1
            aligned &= j < len(phones) and phones[j] == _phone(spec.vowel)
            moras.append((spec, consonant_length, lengths[j] if j < len(lengths) else 0.0))
            j += 1
        pause = 0.0
        while j < len(phones) and phones[j] in PUNCTUATION_SET:
            pause += lengths[j]
            j += 1
        built.append((moras, pause))
    if not aligned:  # the labels and the reading disagree: spread the time evenly
        count = sum(len(m) for m, _ in built) or 1
        each = sum(lengths) / count
        built = [([(s, None if s.consonant is None else each / 2, each / 2 if s.consonant
                    else each) for s, _, _ in m], p) for m, p in built]  # fmt: skip
    phrases = []
    for phrase, (moras, pause) in zip(reading.phrases, built, strict=True):
        tones = phrase.tones()
        pause_mora = Mora("、", None, None, "pau", pause, 0.0) if phrase.pause is not None else None
        phrases.append(AccentPhrase(
            tuple(_mora(s, c, v, t) for (s, c, v), t in zip(moras, tones, strict=True)),
            phrase.accent, pause_mora, phrase.interrogative,
        ))  # fmt: skip
    return phrases


def audio_query(readings: Sequence[SentenceReading], text: str, sample_rate: int) -> AudioQuery:
    """A fresh AudioQuery for ``text``: VOICEVOX's defaults, ``kana`` = the text."""
    return AudioQuery(tuple(accent_phrases(readings)), outputSamplingRate=sample_rate, kana=text)


def spec_of(phrase: AccentPhrase) -> PhraseSpec:
    """What an accent phrase says to read, its lengths and pitches left out."""
    moras = tuple(MoraSpec(m.text, m.consonant, m.vowel) for m in phrase.moras)
    pause = phrase.pause_mora.text if phrase.pause_mora is not None else None
    return PhraseSpec(moras, phrase.accent, pause, phrase.is_interrogative)


def retime(specs: Sequence[PhraseSpec], fresh: Sequence[AccentPhrase]) -> list[AccentPhrase]:
    """Phrases as a client wrote them, with the lengths the voice gave when it read
    them (``fresh``) and pitches from their own accents. When the voice's moras do
    not line up with the client's (it read the kana otherwise), their time is
    spread evenly over the client's moras."""
    fresh_moras = [m for p in fresh for m in p.moras]
    wanted = [s for p in specs for s in p.moras]
    lengths: list[tuple[float | None, float]]
    if [(m.consonant, m.vowel.lower()) for m in fresh_moras] == [
        (s.consonant, s.vowel.lower()) for s in wanted
    ]:
        lengths = [(m.consonant_length, m.vowel_length) for m in fresh_moras]
    else:
        total = sum((m.consonant_length or 0.0) + m.vowel_length for m in fresh_moras)
        each = total / (len(wanted) or 1)
        lengths = [(each / 2, each / 2) if s.consonant else (None, each) for s in wanted]
    pauses = [p.pause_mora.vowel_length for p in fresh if p.pause_mora is not None]
    out, k = [], 0
    for spec in specs:
        moras = []
        for mora, tone in zip(spec.moras, spec.tones(), strict=True):
            consonant_length, vowel_length = lengths[k]
            k += 1
            moras.append(_mora(mora, consonant_length, vowel_length, tone))
        pause = None
        if spec.pause is not None:
            length = pauses.pop(0) if pauses else 0.0
            pause = Mora(spec.pause, None, None, "pau", length, 0.0)
        out.append(AccentPhrase(tuple(moras), spec.accent, pause, spec.interrogative))
    return out


# -- back to a reading -----------------------------------------------------------------------


def structure(phrases: Sequence[AccentPhrase]) -> list[tuple[object, ...]]:
    """What a reading is made of (moras, accents, pauses, questions), lengths left out."""
    return [
        (tuple((m.text, m.consonant, m.vowel) for m in p.moras), p.accent,
         p.pause_mora is not None, p.is_interrogative)
        for p in phrases
    ]  # fmt: skip


def sentences(phrases: Sequence[AccentPhrase]) -> list[list[AccentPhrase]]:
    """The phrases cut after each pause mora that is a sentence-final mark."""
    out: list[list[AccentPhrase]] = [[]]
    for phrase in phrases:
        out[-1].append(phrase)
        if phrase.pause_mora is not None and phrase.pause_mora.text in SENTENCE_MARKS:
            out.append([])
    return [s for s in out if s]


def reading_of(phrases: Sequence[AccentPhrase], where: str = "accent_phrases") -> Phonemes:
    """The phonemes, tones and BERT text of one sentence's phrases as the editor left
    them. BERT reads the moras' kana (the text they came from is gone once moras
    change); each pause is its punctuation, and the sentence ends in a mark."""
    phones: list[str] = [PAD]
    tones: list[int] = [0]
    chars: list[str] = []
    word2ph: list[int] = [1]
    for n, phrase in enumerate(phrases):
        spec = PhraseSpec(tuple(MoraSpec(m.text, m.consonant, m.vowel) for m in phrase.moras),
                          phrase.accent)  # fmt: skip
        for i, (mora, tone) in enumerate(zip(phrase.moras, spec.tones(), strict=True)):
            mora_phones = _mora_phones(mora, f"{where}[{n}].moras[{i}]")
            phones.extend(mora_phones)
            tones.extend([tone] * len(mora_phones))
            text = mora.text or mora_kana(mora.consonant, mora.vowel)
            chars.extend(text)
            word2ph.extend(_spread(len(mora_phones), len(text)))
        if phrase.pause_mora is not None:
            mark = _PHONE_OF_MARK.get(phrase.pause_mora.text, ",")
            phones.append(mark)
            tones.append(0)
            chars.append(_BERT_CHAR.get(mark, mark))
            word2ph.append(1)
    if phones[-1] not in PUNCTUATION_SET:
        mark = "?" if phrases and phrases[-1].is_interrogative else "."
        phones.append(mark)
        tones.append(0)
        chars.append(mark)
        word2ph.append(1)
    phones.append(PAD)
    tones.append(0)
    word2ph.append(1)
    text = "".join(chars)
    return Phonemes(text, text, tuple(chars), tuple(chars), tuple(phones), tuple(tones),
                    tuple(word2ph))  # fmt: skip


def lengths_of(phrases: Sequence[AccentPhrase]) -> tuple[float | None, ...] | None:
    """Seconds of each phoneme :func:`reading_of` makes of one sentence's phrases, between
    its pads, as the query sets them (a mark it adds itself: None, the voice's own);
    None when every length is zero, as AivisSpeech fills them, which sets nothing."""
    lengths: list[float | None] = []
    for phrase in phrases:
        for mora in phrase.moras:
            if mora.consonant:
                lengths.append(mora.consonant_length or 0.0)
            lengths.append(mora.vowel_length)
        if phrase.pause_mora is not None:
            lengths.append(phrase.pause_mora.vowel_length)
    if not any(lengths):
        return None
    if not phrases or phrases[-1].pause_mora is None:
        lengths.append(None)  # the mark reading_of ends the sentence with
    return tuple(lengths)


_CONSONANTS = frozenset({
    "b", "by", "ch", "d", "dy", "f", "g", "gw", "gy", "h", "hy", "j", "k", "kw", "ky", "m",
    "my", "n", "ny", "p", "py", "r", "ry", "s", "sh", "t", "ts", "ty", "v", "w", "y", "z",
})  # fmt: skip
_VOWELS = frozenset({"a", "i", "u", "e", "o", "A", "I", "U", "E", "O", "N", "cl"})


def _mora_phones(mora: Mora, where: str) -> list[str]:
    if mora.vowel not in _VOWELS:
        raise QueryError(f"{where}.vowel", f"{mora.vowel!r} is not a mora vowel")
    if mora.consonant is not None and mora.consonant not in _CONSONANTS:
        raise QueryError(f"{where}.consonant", f"{mora.consonant!r} is not a consonant")
    vowel = _phone(mora.vowel)
    return [mora.consonant, vowel] if mora.consonant else [vowel]


def _spread(n_phones: int, n_chars: int) -> list[int]:
    """``n_phones`` over ``n_chars`` characters, as evenly as the g2p spreads them."""
    base, extra = divmod(n_phones, n_chars)
    return [base + (1 if i < extra else 0) for i in range(n_chars)]
