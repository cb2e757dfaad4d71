"""Accent phrases as a person groups them, for the natural reading.

OpenJTalk cuts a sentence into more accent phrases than a speaker does: it
starts a new phrase at する after a verbal noun (検査 | する), at いる after
て (食べて | いる) and at a formal noun after the verb it ends (行く | の),
where Tokyo speakers say one phrase with one accent nucleus; and it joins a
few that speakers keep apart (ではない is デワ | ナ]イ). Measured on JSUT's
hand-checked accents, those are most of the pitch patterns it gets wrong
(benchmarks/history/issues-22-23.md, issue 23).

:func:`rephrase` moves those boundaries on OpenJTalk's analysis (its NJD
features) before the full-context labels are made, and gives each joined
phrase the accent OpenJTalk's own accent-combination rules give a word
chained to the one before it (each word's ``chain_rule``, from the
dictionary), then corrects where its pitch falls (:mod:`yomiage.text.nucleus`).
Readings are never changed here, only where phrases start and where their
pitch falls; the "sbv2" reading does not use this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from yomiage.text.nucleus import chain, moras, place_nucleus
from yomiage.text.openjtalk import NJDFeature

WordTest = Callable[[NJDFeature], bool]

_PREDICATES = frozenset({"動詞", "助動詞", "形容詞"})
# Auxiliary verbs after て/で said in the verb's phrase: 食べている, 見てください.
_AFTER_TE = frozenset({"動詞", "形容詞"})
# Conjugated forms that end a clause before a noun (the forms a formal noun follows).
_ATTRIBUTIVE_FORMS = frozenset({"基本形", "体言接続", "連体形"})


def _is(pos: str, group: str | None = None, orig: frozenset[str] | None = None) -> WordTest:
    def test(word: NJDFeature) -> bool:
        return (
            word["pos"] == pos
            and (group is None or word["pos_group1"] == group)
            and (orig is None or word["orig"] in orig)
        )

    return test


_VERBAL_NOUN = _is("名詞", "サ変接続")
_SURU = _is("動詞", "自立", frozenset({"する"}))
_TE = _is("助詞", "接続助詞", frozenset({"て", "で"}))
_FORMAL_NOUN = _is("名詞", "非自立")
_TOPIC_PARTICLE = _is("助詞", "係助詞")
_ADVERBIAL_PARTICLE = _is("助詞", "副助詞")
_NEGATIVE_OR_BE = frozenset({"ない", "ある"})


def _ends_clause(word: NJDFeature) -> bool:
    if word["pos"] == "連体詞":
        return True
    return word["pos"] in _PREDICATES and word["cform"] in _ATTRIBUTIVE_FORMS


def joins(left: NJDFeature, right: NJDFeature) -> bool:
    """Whether a speaker says ``right`` in the same accent phrase as ``left``
    where OpenJTalk starts a new one."""
    if _VERBAL_NOUN(left) and _SURU(right):  # 検査する, 寄付した, 建立された
        return True
    if _TE(left) and right["pos"] in _AFTER_TE and right["pos_group1"] == "非自立":
        return True  # 食べている, 走ってください, 忘れてしまった
    if _FORMAL_NOUN(right) and _ends_clause(left):  # 行くの, 言うこと, 来たとき
        return True
    # によって, による: a particle grammaticalized with its verb
    return bool(left["pos_group1"] == "格助詞" and (left["orig"], right["orig"]) == ("に", "よる"))


def splits(left: NJDFeature, right: NJDFeature) -> bool:
    """Whether a speaker starts a new accent phrase at ``right`` where OpenJTalk
    chains it to ``left``."""
    if right["orig"] in _NEGATIVE_OR_BE and right["pos"] in ("助動詞", "形容詞"):
        # ではない, じゃない, もある: the particle ends its phrase
        return _TOPIC_PARTICLE(left) or _ADVERBIAL_PARTICLE(left)
    # 激しく | なった, 速く | 走る: an adverbial adjective keeps its own phrase
    return bool(
        left["pos"] == "形容詞" and left["cform"] == "連用テ接続" and right["pos"] == "動詞"
    )


def _phrases(words: Sequence[NJDFeature]) -> list[list[int]]:
    """Indices of ``words`` grouped into OpenJTalk's accent phrases (symbols,
    which have no moras, stand alone and end the phrase before them)."""
    phrases: list[list[int]] = []
    open_phrase = False
    for i, word in enumerate(words):
        spoken = int(word["mora_size"]) > 0 and word["pos"] != "記号"
        if spoken and open_phrase and word["chain_flag"] == 1:
            phrases[-1].append(i)
        else:
            phrases.append([i])
        open_phrase = spoken
    return phrases


def rephrase(
    features: Sequence[NJDFeature], keep_accent: frozenset[str] = frozenset()
) -> list[NJDFeature]:
    """``features`` (copied) with accent phrases joined and split as a speaker
    says them and each phrase's nucleus placed (:func:`place_nucleus`): only
    ``chain_flag`` and the accent (``acc``) of each phrase's first word change.
    A phrase that holds a word written as in ``keep_accent`` (the user
    dictionary's) keeps the nucleus its words' own accents give it."""
    words = [dict(f) for f in features]
    phrases = _split(words, _phrases(words))
    merged: list[list[int]] = []
    for phrase in phrases:
        if merged and _spoken(words, merged[-1]) and _spoken(words, phrase):
            left, right = words[merged[-1][-1]], words[phrase[0]]
            if joins(left, right):
                _join(words, merged[-1], phrase)
                merged[-1].extend(phrase)
                continue
        merged.append(phrase)
    for phrase in merged:
        if not any(words[i]["string"] in keep_accent for i in phrase):
            place_nucleus(words, phrase)
    return words


def _spoken(words: Sequence[NJDFeature], phrase: Sequence[int]) -> bool:
    return moras(words, phrase) > 0 and words[phrase[0]]["pos"] != "記号"


def _join(words: list[NJDFeature], left: Sequence[int], right: Sequence[int]) -> None:
    """Chain phrase ``right`` onto ``left`` and re-accent the whole."""
    head = words[left[0]]
    words[right[0]]["chain_flag"] = 1
    head["acc"] = chain(words, int(head["acc"]), left, right)


def _split(words: list[NJDFeature], phrases: list[list[int]]) -> list[list[int]]:
    """``phrases`` with a new phrase started wherever :func:`splits` says. The
    part before keeps the nucleus if it lies there, else is flat; a new phrase
    takes its first word's own accent and the rules of the words after it."""
    out: list[list[int]] = []
    for phrase in phrases:
        parts = [[phrase[0]]]
        for i in phrase[1:]:
            if splits(words[parts[-1][-1]], words[i]):
                words[i]["chain_flag"] = 0
                parts.append([i])
            else:
                parts[-1].append(i)
        if len(parts) > 1:
            head = words[phrase[0]]
            accent = int(head["acc"])
            head["acc"] = accent if accent <= moras(words, parts[0]) else 0
            for part in parts[1:]:
                first = words[part[0]]
                first["acc"] = chain(words, int(first["acc"]), part[:1], part[1:])
        out.extend(parts)
    return out
