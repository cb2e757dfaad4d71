"""The SBV2 symbol table and the conversion of phonemes to model input ids.

The table is fixed by the architecture (112 symbols shared by the Chinese,
Japanese and English frontends of SBV2); a JP-Extra model's embedding rows are
indexed by it, so it must never change order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

PAD = "_"
PUNCTUATIONS: tuple[str, ...] = ("!", "?", "…", ",", ".", "'", "-")
PUNCTUATION_SET = frozenset(PUNCTUATIONS)

# fmt: off
SYMBOLS: tuple[str, ...] = (
    "_", "AA", "E", "EE", "En", "N", "OO", "V", "a", "a:", "aa", "ae", "ah", "ai", "an",
    "ang", "ao", "aw", "ay", "b", "by", "c", "ch", "d", "dh", "dy", "e", "e:", "eh",
    "ei", "en", "eng", "er", "ey", "f", "g", "gy", "h", "hh", "hy", "i", "i0", "i:",
    "ia", "ian", "iang", "iao", "ie", "ih", "in", "ing", "iong", "ir", "iu", "iy", "j",
    "jh", "k", "ky", "l", "m", "my", "n", "ng", "ny", "o", "o:", "ong", "ou", "ow",
    "oy", "p", "py", "q", "r", "ry", "s", "sh", "t", "th", "ts", "ty", "u", "u:",
    "ua", "uai", "uan", "uang", "uh", "ui", "un", "uo", "uw", "v", "van", "ve", "vn",
    "w", "x", "y", "z", "zh", "zy", "!", "?", "…", ",", ".", "'", "-", "SP", "UNK",
)
# fmt: on

SYMBOL_TO_ID: dict[str, int] = {s: i for i, s in enumerate(SYMBOLS)}
JP_TONE_OFFSET = 6
JP_LANGUAGE_ID = 1
NUM_TONES = 12
NUM_LANGUAGES = 3


@dataclass(frozen=True)
class ModelInputs:
    """Token-level synthesizer inputs (spec §2.8), all int64 of length ``T``.

    ``word2ph`` has one entry per BERT token (``[CLS]``, characters, ``[SEP]``)
    and sums to ``T``; it says how many synthesizer tokens each BERT row covers.
    """

    phone_ids: npt.NDArray[np.int64]
    tone_ids: npt.NDArray[np.int64]
    language_ids: npt.NDArray[np.int64]
    word2ph: tuple[int, ...]

    @property
    def length(self) -> int:
        return int(self.phone_ids.shape[0])


def _intersperse(values: list[int]) -> npt.NDArray[np.int64]:
    out = np.zeros(2 * len(values) + 1, dtype=np.int64)
    out[1::2] = values
    return out


def to_model_inputs(
    phones: tuple[str, ...] | list[str],
    tones: tuple[int, ...] | list[int],
    word2ph: tuple[int, ...] | list[int],
    *,
    add_blank: bool = True,
) -> ModelInputs:
    """Map g2p output to ids, add the JP tone offset and intersperse blanks.

    Blanks get phone, tone and language id 0 while the ``_`` pads keep tone 6
    and language 1: this asymmetry is what SBV2 models were trained on.
    """
    phone_ids = [SYMBOL_TO_ID[p] for p in phones]
    tone_ids = [t + JP_TONE_OFFSET for t in tones]
    language_ids = [JP_LANGUAGE_ID] * len(phones)
    if not add_blank:
        return ModelInputs(
            np.asarray(phone_ids, dtype=np.int64),
            np.asarray(tone_ids, dtype=np.int64),
            np.asarray(language_ids, dtype=np.int64),
            tuple(word2ph),
        )
    doubled = [2 * w for w in word2ph]
    doubled[0] += 1
    return ModelInputs(
        _intersperse(phone_ids),
        _intersperse(tone_ids),
        _intersperse(language_ids),
        tuple(doubled),
    )
