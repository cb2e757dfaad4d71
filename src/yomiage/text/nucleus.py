"""Where each accent phrase's pitch falls, for the natural reading.

OpenJTalk gives a phrase the accent of its first word, moved by the
combination rule of each word chained after it (:func:`chained_accent`, the
rules its dictionary names in ``chain_rule``). Measured against JSUT's
hand-checked accents it misplaces the nucleus in a few regular ways that
:func:`place_nucleus` corrects: verb forms (食べた タ]ベタ, not タベ]タ), ます
and なさい, which take the nucleus (書きます カキマ]ス), である, a nucleus on a
mora that cannot carry one (外交官 ガイコ]ーカン), a final-accented noun
before の (娘の ムスメノ) and お/ご before a flat word (お名前 オナマエ).

A phrase is a list of indices into the sentence's NJD features; its accent is
the ``acc`` of its first word (1-based mora of the nucleus, 0 for flat), the
field OpenJTalk's labels read.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from yomiage.text.mora import SMALL_KANA
from yomiage.text.openjtalk import NJDFeature


def moras(words: Sequence[NJDFeature], phrase: Sequence[int]) -> int:
    """The number of moras of ``phrase``."""
    return sum(int(words[i]["mora_size"]) for i in phrase)


def _clamp(accent: int, size: int) -> int:
    return min(max(accent, 0), size)


def _rule_for(word: NJDFeature, previous: NJDFeature) -> tuple[str, int]:
    """The accent-combination rule ``word`` follows after ``previous``: the entry
    of its ``chain_rule`` for ``previous``'s part of speech, else its general one
    (``("", 0)`` when it has none: the phrase keeps its accent)."""
    general = ("", 0)
    for entry in str(word["chain_rule"]).split("/"):
        pos, _, rule = entry.rpartition("%")
        name, _, add = rule.partition("@")
        parsed = (name, int(add) if add.lstrip("-").isdigit() else 0)
        if pos == previous["pos"]:
            return parsed
        if not pos and name not in ("", "*"):
            general = parsed
    return general


def chained_accent(accent: int, size: int, word: NJDFeature, previous: NJDFeature) -> int:
    """The accent of a phrase of ``size`` moras with ``accent``, once ``word``
    (whose own accent is ``word["acc"]``) is chained after ``previous``: OpenJTalk's
    combination rules (F: an ancillary word, C: a compound noun's second part,
    P: after a prefix)."""
    name, add = _rule_for(word, previous)
    own = int(word["acc"])
    if name == "F2":
        return size + add if accent == 0 else accent
    if name == "F3":
        return size + add if accent != 0 else accent
    if name == "F4":
        return size + add
    if name in ("F5", "C4", "P6"):
        return 0
    if name == "C1":
        return size + own
    if name == "C2":
        return size + 1
    if name == "C3":
        return size
    if name == "P1":
        return 0 if own == 0 else size + own
    if name == "P2":
        return size + (own or 1)
    if name == "P14":
        return size + own if own else accent
    return accent  # F1, C5 and words without a rule keep the phrase's accent


def chain(
    words: Sequence[NJDFeature], accent: int, phrase: Sequence[int], chained: Sequence[int]
) -> int:
    """The accent of ``phrase`` (accented ``accent``) once the words ``chained``
    follow it in one phrase, each by its combination rule."""
    size, previous = moras(words, phrase), words[phrase[-1]]
    for i in chained:
        accent = chained_accent(accent, size, words[i], previous)
        size += int(words[i]["mora_size"])
        previous = words[i]
    return _clamp(accent, size)


def place_nucleus(words: list[NJDFeature], phrase: Sequence[int]) -> None:
    """Correct the accent of ``phrase`` (its first word's ``acc``) where a speaker
    puts the nucleus elsewhere than OpenJTalk's rules do."""
    _accent_verb_forms(words, phrase)
    _place_dominant_suffix(words, phrase)
    _accent_copula(words, phrase)
    _move_off_special_mora(words, phrase)
    _flatten_final_accent_before_no(words, phrase)
    _flatten_honorific_flat_noun(words, phrase)


def _accent_verb_forms(words: list[NJDFeature], phrase: Sequence[int]) -> None:
    """Where an accented verb's nucleus falls in the forms OpenJTalk's dictionary
    gets wrong, counted on the stem (the verb with a passive or causative suffix):
    before た or て one mora before the stem ends (食べた タ]ベタ, 取られた トラ]レタ;
    OpenJTalk says タベ]タ), before ない on the stem's last mora (限らない
    カギラ]ナイ, not カギ]ラナイ), and a passive's dictionary form one mora
    before its end (思われる オモワレ]ル)."""
    verb = words[phrase[0]]
    if verb["pos"] != "動詞" or int(verb["acc"]) == 0 or len(phrase) < 2:
        return
    stem, k = int(verb["mora_size"]), 1
    suffixed = False
    while k < len(phrase) and words[phrase[k]]["pos_group1"] == "接尾":
        stem += int(words[phrase[k]]["mora_size"])
        suffixed = True
        k += 1
    if int(verb["acc"]) > stem:
        return  # a later word (ます, ください) holds the nucleus
    last = words[phrase[k - 1]]
    following = words[phrase[k]] if k < len(phrase) else None
    nucleus = None
    if following is not None and following["orig"] in ("た", "て") and stem >= 2:
        if last["cform"].startswith("連用") and (suffixed or int(verb["acc"]) == stem):
            nucleus = stem - 1
    elif following is not None and following["orig"] == "ない" and following["pos"] == "助動詞":
        nucleus = stem if last["cform"].startswith("未然") else None
    elif suffixed and last["cform"] == "基本形":
        nucleus = stem - 1
    if nucleus:
        verb["acc"] = nucleus


# Suffixes that take the phrase's nucleus whatever the verb's accent (書きます
# カキマ]ス, 書きません カキマセ]ン, 書きなさい カキナサ]イ; OpenJTalk moves it
# only after a flat verb): the mora of the suffix it falls on, by conjugated form
# ("" for any other form).
_DOMINANT_SUFFIXES: dict[tuple[str, str], dict[str, int]] = {
    ("助動詞", "ます"): {"未然形": 2, "未然ウ接続": 2, "": 1},
    ("動詞", "なさる"): {"": 2},
}


def _place_dominant_suffix(words: list[NJDFeature], phrase: Sequence[int]) -> None:
    head = words[phrase[0]]
    before, after_te = 0, False
    for i in phrase:
        word = words[i]
        rule = _DOMINANT_SUFFIXES.get((word["pos"], word["orig"]))
        if rule is not None and before > 0:
            if not (after_te and word["cform"] == "基本形"):
                nucleus = before + rule.get(word["cform"], rule[""])
                head["acc"] = _clamp(nucleus, moras(words, phrase))
            elif int(head["acc"]) > before:
                # ...ています keeps the verb's own accent (思っています オモ]ッテイマス),
                # and a flat verb's stays flat (しています シテイマス)
                head["acc"] = 0
        after_te = after_te or (word["pos_group1"] == "接続助詞" and word["orig"] in ("て", "で"))
        before += int(word["mora_size"])


def _accent_copula(words: list[NJDFeature], phrase: Sequence[int]) -> None:
    """A flat phrase ending in である falls after its ア (必要である ヒツヨーデア]ル);
    OpenJTalk leaves it flat."""
    if int(words[phrase[0]]["acc"]) != 0:
        return
    before = 0
    for k, i in enumerate(phrase):
        word = words[i]
        after_de = k > 0 and words[phrase[k - 1]]["orig"] == "だ"  # the で of である
        if after_de and word["orig"] == "ある" and word["pos"] == "助動詞":
            words[phrase[0]]["acc"] = before + 1
            return
        before += int(word["mora_size"])


def _flatten_final_accent_before_no(words: list[NJDFeature], phrase: Sequence[int]) -> None:
    """A noun accented on its last mora loses the accent before の (娘の ムスメノ,
    橋の ハシノ, against 娘が ムスメ]ガ)."""
    if len(phrase) < 2:
        return
    last, noun = words[phrase[-1]], words[phrase[-2]]
    head = words[phrase[0]]
    if (
        last["orig"] == "の"
        and last["pos_group1"] == "連体化"
        and noun["pos"] == "名詞"
        and int(head["acc"]) == moras(words, phrase[:-1])
    ):
        head["acc"] = 0


# Moras that cannot carry a nucleus: the long vowel, the moraic nasal, the
# geminate and the second vowel of a diphthong (アイ, オイ, エイ). A nucleus a
# compound rule puts on one falls on the mora before (外交官 ガイコ]ーカン, not
# ガイコー]カン; 独裁者 ドクサ]イシャ).
_SPECIAL_MORAS = frozenset("ーンッ")


def _vowel(mora: str) -> str:
    """The vowel a katakana mora ends in ("" for ー, ン, ッ and anything else)."""
    name = unicodedata.name(mora[-1], "")
    return name[-1] if name.startswith("KATAKANA LETTER") and name[-1] in "AIUEO" else ""


def _moras_of(kana: str) -> list[str]:
    moras: list[str] = []
    for ch in kana:
        if ch in SMALL_KANA and moras:
            moras[-1] += ch
        else:
            moras.append(ch)
    return moras


def _cannot_carry_nucleus(moras: Sequence[str], k: int) -> bool:
    if moras[k] in _SPECIAL_MORAS:
        return True
    return moras[k] == "イ" and k > 0 and _vowel(moras[k - 1]) in ("A", "O", "E")


def _move_off_special_mora(words: list[NJDFeature], phrase: Sequence[int]) -> None:
    head = words[phrase[0]]
    accent = int(head["acc"])
    kana = _moras_of("".join(str(words[i]["pron"]).replace("’", "") for i in phrase))
    if len(kana) != moras(words, phrase):
        return  # a reading whose moras cannot be told apart here
    # A nucleus on the phrase's last mora stays: ending on ー (弟 オトート]) is a
    # word's own accent, heard only on the particle after it.
    while 1 < accent < len(kana) and _cannot_carry_nucleus(kana, accent - 1):
        accent -= 1
    head["acc"] = accent


def _flatten_honorific_flat_noun(words: list[NJDFeature], phrase: Sequence[int]) -> None:
    """お or ご before a flat word is flat (お名前 オナマエ, ご都合 ゴツゴー);
    OpenJTalk's prefix rule puts a nucleus after the prefix's first mora. A
    nucleus a later word placed (お伝えします) stays."""
    if len(phrase) < 2:
        return
    prefix, word = words[phrase[0]], words[phrase[1]]
    if prefix["pos"] != "接頭詞" or str(prefix["pron"]) not in ("オ", "ゴ"):
        return
    if int(word["acc"]) == 0 and int(prefix["acc"]) <= moras(words, phrase[:2]):
        prefix["acc"] = 0
