"""Words whose reading depends on the words around them, for the natural reading.

OpenJTalk reads a word the way its dictionary entry does, whatever follows:
何でも as ナニデモ, 御支払い as ゴシハライ, 三分の一 as サンプンノイチ. Each rule
here is one class of such words, told apart by the words beside it (their part
of speech and reading, from OpenJTalk's own analysis), never a list of
sentences. A rule changes a word's reading (``pron``) and accent (``acc``) and
nothing else, so its mora count must stay what the new reading has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from yomiage.text.context_cues import (
    BACK_SIDE,
    DESERTED,
    DOCUMENTS,
    FRONT_HOLDERS,
    TABLE_DETERMINERS,
    TABLE_MAKING,
    TABLE_SUFFIXES,
    TABLE_USES,
    TASTE,
)
from yomiage.text.mora import mora_count
from yomiage.text.openjtalk import NJDFeature

# Moras that turn 何 into ナン before them: t-, d- and n- sounds, except に
# (何に ナニニ). 何でも ナンデモ, 何と ナント, 何の ナンノ, 何です ナンデス.
_NAN_BEFORE = frozenset("タチツテトダヂヅデドナヌネノ")
# Demonstratives before 風 in the sense "way, manner" (そんな風に ソンナフーニ).
_MANNER_DEMONSTRATIVES = frozenset({"そんな", "こんな", "あんな", "どんな"})
_HIRAGANA = range(0x3041, 0x3097)

Rule = Callable[[list[NJDFeature], int], None]


def _pron(word: NJDFeature) -> str:
    return str(word["pron"]).replace("’", "")


def _set(word: NJDFeature, pron: str, accent: int) -> None:
    word["pron"] = pron
    word["read"] = pron
    word["acc"] = accent
    word["mora_size"] = mora_count(pron)


def _nani(words: list[NJDFeature], i: int) -> None:
    """何 before a t-, d- or n- sound is ナン (何でも ナ]ンデモ)."""
    word = words[i]
    if word["string"] != "何" or _pron(word) != "ナニ" or i + 1 >= len(words):
        return
    following = _pron(words[i + 1])
    if following[:1] in _NAN_BEFORE:
        _set(word, "ナン", 1)


def _honorific_o(words: list[NJDFeature], i: int) -> None:
    """御 before a native word (one written with kana endings: 支払い, 急ぎ,
    楽しみ) is お, not ご (御支払い オシハライ; 御都合 stays ゴツゴー)."""
    word = words[i]
    if word["string"] != "御" or _pron(word) != "ゴ" or i + 1 >= len(words):
        return
    surface = str(words[i + 1]["string"])
    if any(ord(ch) in _HIRAGANA for ch in surface) and not surface.isascii():
        _set(word, "オ", int(word["acc"]))


def _fraction_bun(words: list[NJDFeature], i: int) -> None:
    """分 in a fraction (三分の一) is ブン, not プン or フン (minutes)."""
    word = words[i]
    pron = _pron(word)
    if not (str(word["string"]).endswith("分") and pron[-2:] in ("プン", "フン")):
        return
    if i + 2 >= len(words) or words[i + 1]["string"] != "の":
        return
    if words[i + 2]["pos_group1"] != "数":
        return
    _set(word, pron[:-2] + "ブン", int(word["acc"]))


def _manner_fuu(words: list[NJDFeature], i: int) -> None:
    """風 after そんな/こんな/あんな/どんな means a way of doing: フー (そんな風に)."""
    word = words[i]
    if word["string"] != "風" or i == 0 or words[i - 1]["string"] not in _MANNER_DEMONSTRATIVES:
        return
    _set(word, "フー", 0)


def _person_kata(words: list[NJDFeature], i: int) -> None:
    """方 after a clause, as what the sentence is about, is a person: カタ
    (くださる方だけに, いない方は); before が, を, より it is a side: ホー
    (早い方がいい)."""
    word = words[i]
    if word["string"] != "方" or _pron(word) != "ホー" or i == 0:
        return
    before = words[i - 1]
    if before["pos"] not in ("動詞", "助動詞", "形容詞") or before["cform"] != "基本形":
        return
    after = words[i + 1]["string"] if i + 1 < len(words) else ""
    if after in _SIDE_PARTICLES:
        return
    _set(word, "カタ", 2)


def _throughout_juu(words: list[NJDFeature], i: int) -> None:
    """中 after a place is "throughout": ジュー (街中 マチジュー, 国中, アメリカ中);
    after an activity it is "during": チュー (輸送中, 来日中), and after 表 "in the
    table" (表中 ヒョーチュー)."""
    word = words[i]
    if word["string"] != "中" or _pron(word) != "チュー" or i == 0:
        return
    before = words[i - 1]
    if before["string"] == "表":  # 表中, in a table: ヒョーチュー
        return
    if before["pos"] == "名詞" and before["pos_group1"] in ("一般", "固有名詞"):
        _set(word, "ジュー", int(word["acc"]))


def _day_nana(words: list[NJDFeature], i: int) -> None:
    """七 before 日 in a date is ナナ (二十七日 ニジューナナニチ), as people say it
    to keep it apart from 一日 イチニチ."""
    word = words[i]
    if word["string"] != "七" or _pron(word) != "シチ" or i + 1 >= len(words):
        return
    if words[i + 1]["string"] == "日" and _pron(words[i + 1]) == "ニチ":
        _set(word, "ナナ", 1)


def _spoken_ii(words: list[NJDFeature], i: int) -> None:
    """良い as a predicate before a particle or an auxiliary is said イイ (良いか,
    良いけれど, 良いです); before a noun or at the end it stays ヨイ (良い状態)."""
    word = words[i]
    if word["string"] != "良い" or _pron(word) != "ヨイ" or i + 1 >= len(words):
        return
    if words[i + 1]["pos"] in ("助詞", "助動詞"):
        _set(word, "イイ", int(word["acc"]))


def _kind_shu(words: list[NJDFeature], i: int) -> None:
    """種 between a demonstrative and の is a kind: シュ (ある種の, この種の);
    elsewhere it is a seed, タネ (種を蒔く)."""
    word = words[i]
    if word["string"] != "種" or _pron(word) != "タネ" or i == 0 or i + 1 >= len(words):
        return
    if words[i - 1]["pos"] == "連体詞" and words[i + 1]["string"] == "の":
        _set(word, "シュ", 1)


def _first_of_month(words: list[NJDFeature], i: int) -> None:
    """一日 is ツイタチ, the first of a month, where what follows makes it a date: a
    weekday (一日月曜日, from 1日(月)), 付 (一日付で), or a range to another day that
    ends in まで (一日から十日まで). OpenJTalk already says ツイタチ after a month
    (四月一日, 来月一日); a length of time stays イチニチ (一日三回, 一日中, 一日に三回,
    一日から三日かかる)."""
    word = words[i]
    if word["string"] != "一日" or _pron(word) != "イチニチ" or i + 1 >= len(words):
        return
    following = str(words[i + 1]["string"])
    dated = following in ("付", "付け") or following.endswith(("曜日", "曜"))
    if dated or (following == "から" and _day_until(words, i + 2)):
        _set(word, "ツイタチ", 4)


def _day_until(words: list[NJDFeature], start: int) -> bool:
    """Whether ``words[start:]`` opens with a day of the month and まで (十日まで, 三十一日まで)."""
    for k in range(start, min(start + 5, len(words) - 1)):
        if str(words[k]["string"]).endswith("日"):
            return bool(words[k + 1]["string"] == "まで")
        if words[k]["pos_group1"] != "数":
            return False
    return False


def _spicy_karai(words: list[NJDFeature], i: int) -> None:
    """辛い (辛さ) in a sentence about food or taste is カライ, hot; elsewhere the
    dictionary's ツライ, hard (辛い生活). The cues are :data:`~yomiage.text.context_cues.TASTE`
    (辛いカレーは辛い: both カライ)."""
    word = words[i]
    pron = _pron(word)
    if not (str(word["string"]).startswith("辛") and pron.startswith("ツラ")):
        return
    if word["pos"] != "形容詞" and word["string"] != "辛さ":
        return
    if any(w["orig"] in TASTE or w["string"] in TASTE for w in words):
        _set(word, "カラ" + pron[2:], int(word["acc"]))


def _deserted_hitoke(words: list[NJDFeature], i: int) -> None:
    """人気 with no one about is ヒトケ: 人気のない道, 人気の少ない公園, where a place
    (:data:`~yomiage.text.context_cues.DESERTED`) is what has none; popularity
    (人気のない店, 人気がない) stays ニンキ."""
    word = words[i]
    if word["string"] != "人気" or _pron(word) != "ニンキ" or i + 3 >= len(words):
        return
    if words[i + 1]["string"] not in ("の", "が", "も"):
        return
    if words[i + 2]["orig"] not in ("ない", "無い", "少ない"):
        return
    for following in words[i + 3 : i + 6]:
        if following["pos"] == "名詞":
            if following["orig"] in DESERTED or following["string"] in DESERTED:
                _set(word, "ヒトケ", 0)
            return


def _table_hyou(words: list[NJDFeature], i: int) -> None:
    """表 is ヒョー, a table, where the words beside it make it one: a determiner
    (この表, 各表), a document or a place on a page before の (Excelの表, 下の表), a
    clause that makes or shows it (作成した表, 以下に示す表), a number or a suffix
    after it (表1, 表中), or what one does with a table after its particle (表を見る,
    表にまとめる, 表の通り). It stays the dictionary's オモテ, the front, where
    something that has a front owns it (コインの表を見る), in a sentence that speaks
    of the back (表も裏も), and where nothing marks a table (表に出る, 表で遊ぶ)."""
    word = words[i]
    if word["string"] != "表" or _pron(word) != "オモテ":
        return
    owner = words[i - 2] if i >= 2 and words[i - 1]["string"] == "の" else None
    if owner is not None and _is_in(owner, FRONT_HOLDERS):
        return
    if any(_is_in(w, BACK_SIDE) for w in words):
        return
    if (
        (owner is not None and _is_in(owner, DOCUMENTS))
        or (i > 0 and _points_at_table(words[i - 1]))
        or _made_as_table(words, i)
        or _used_as_table(words, i)
    ):
        _set(word, "ヒョー", 0)


def _is_in(word: NJDFeature, cues: frozenset[str]) -> bool:
    return word["orig"] in cues or word["string"] in cues


def _points_at_table(before: NJDFeature) -> bool:
    """この, その, 各, 同 ... right before 表 (a determiner or a prefix)."""
    return before["pos"] in ("連体詞", "接頭詞") and _is_in(before, TABLE_DETERMINERS)


def _made_as_table(words: list[NJDFeature], i: int) -> bool:
    """Whether a clause ending right before 表 has a verb that makes or shows a table
    (作成した表, まとめられた表): its auxiliaries and する are passed over."""
    for k in range(i - 1, max(i - 5, -1), -1):
        before = words[k]
        if _is_in(before, TABLE_MAKING):
            return bool(before["pos"] == "動詞" or before["pos_group1"] == "サ変接続")
        if not (
            before["pos"] == "助動詞"
            or before["pos_group1"] in ("接尾", "非自立")
            or before["orig"] == "する"
        ):
            return False
    return False


def _used_as_table(words: list[NJDFeature], i: int) -> bool:
    """Whether what follows 表 is a number, a table's suffix (表中), or a particle
    and what is done with a table (表を見る, 表にまとめる); adverbs between the
    particle and the verb are passed over (表をよく見る)."""
    if i + 1 >= len(words):
        return False
    after = words[i + 1]
    if after["pos_group1"] == "数" or _is_in(after, TABLE_SUFFIXES):
        return True
    uses = TABLE_USES.get(str(after["string"]))
    if uses is None:
        return False
    for following in words[i + 2 : i + 5]:
        if following["pos"] != "副詞":
            return _is_in(following, uses)
    return False


_SIDE_PARTICLES = frozenset({"が", "を", "へ", "より", "から", "まで", "、", "。", ""})
# Each rule with a character its word always holds: a rule is only called on words
# holding it, so a sentence's words cost a substring test per rule, not a call.
_RULES: Sequence[tuple[str, Rule]] = (
    ("何", _nani),
    ("御", _honorific_o),
    ("分", _fraction_bun),
    ("風", _manner_fuu),
    ("方", _person_kata),
    ("中", _throughout_juu),
    ("七", _day_nana),
    ("良", _spoken_ii),
    ("種", _kind_shu),
    ("一日", _first_of_month),
    ("辛", _spicy_karai),
    ("人気", _deserted_hitoke),
    ("表", _table_hyou),
)


def read_in_context(
    features: list[NJDFeature], keep: frozenset[str] = frozenset()
) -> list[NJDFeature]:
    """``features`` (copied) with each word read as its neighbours make it read;
    words written as in ``keep`` (the user dictionary's) keep their reading."""
    words = [dict(f) for f in features]
    for i in range(len(words)):
        if words[i]["string"] in keep:
            continue
        surface = str(words[i]["string"])
        for trigger, rule in _RULES:
            if trigger in surface:
                rule(words, i)
    return words
