"""The natural reading's accent phrases (yomiage.text.phrasing): one case per rule
class, written as JSUT's labels write a reading (``#`` a phrase boundary, ``]``
the nucleus; a flat phrase has no ``]``), and OpenJTalk's accent-combination rules."""

from __future__ import annotations

import copy

import pytest

from yomiage.text import Frontend
from yomiage.text.g2p import g2p
from yomiage.text.nucleus import chained_accent
from yomiage.text.openjtalk import OpenJTalk, bundled_dictionary_dir
from yomiage.text.phrasing import rephrase
from yomiage.text.user_dict import UserDictionary


def prosody(frontend: Frontend, text: str) -> str:
    """The accent phrases of ``text``: katakana (a vowel that lengthens the one
    before as ー), ``]`` after the nucleus, ``#`` between phrases (a flat phrase,
    or one falling only after its last mora, has no ``]``)."""
    phrases = frontend.accent_phrases(frontend.g2p(text))
    out = []
    for phrase in phrases:
        kana = [
            "ー" if m.consonant is None and k and m.vowel == phrase.moras[k - 1].vowel else m.text
            for k, m in enumerate(phrase.moras)
        ]
        if phrase.accent < len(kana):
            kana[phrase.accent - 1] += "]"
        out.append("".join(kana))
    return "#".join(out)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a verbal noun and する: one phrase, the noun's accent
        ("検査する", "ケ]ンサスル"),
        ("実行した", "ジッコーシタ"),
        # て and an auxiliary verb: one phrase
        ("食べている", "タ]ベテイル"),
        ("走ってください", "ハシ]ッテクダサイ"),
        # a formal noun after the clause it ends: one phrase
        ("行くのです", "イク]ノデス"),
        ("言うことだ", "イウコト]ダ"),
        # によって: a particle grammaticalized with its verb
        ("風によって", "カゼニヨッテ"),
    ],
)
def test_joins_what_a_speaker_says_as_one_phrase(
    natural_frontend: Frontend, text: str, expected: str
) -> None:
    assert prosody(natural_frontend, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("学生ではない", "ガクセーデ]ワ#ナ]イ"),
        ("激しくなった", "ハゲシ]ク#ナ]ッタ"),
    ],
)
def test_splits_what_a_speaker_keeps_apart(
    natural_frontend: Frontend, text: str, expected: str
) -> None:
    assert prosody(natural_frontend, text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ます takes the nucleus whatever the verb's accent...
        ("書きます", "カキマ]ス"),
        ("ありません", "アリマセ]ン"),
        ("選びましょう", "エラビマショ]ー"),
        ("消しなさい", "ケシナサ]イ"),
        # ...but ...ています keeps the verb's, flat after a flat verb
        ("思っています", "オモ]ッテイマス"),
        ("販売しています", "ハンバイシテイマス"),
        # verb forms: た/て one mora before the stem ends, ない on its last mora
        ("食べた", "タ]ベタ"),
        ("名付けた", "ナズ]ケタ"),
        ("取られた", "トラ]レタ"),
        ("限らない", "カギラ]ナイ"),
        ("思われる", "オモワレ]ル"),
        # no nucleus on ー, ン, ッ or a diphthong's second vowel
        ("外交官は", "ガイコ]ーカンワ"),
        # である after a flat word
        ("必要である", "ヒツヨーデア]ル"),
        # a noun accented on its last mora is flat before の
        ("娘の", "ムスメノ"),
        ("娘が", "ムスメ]ガ"),
        # お/ご before a flat word is flat; before an accented one it keeps a nucleus
        ("お名前は", "オナマエワ"),
        ("お兄さん", "オニ]ーサン"),
        ("お伝えします", "オツタエシマ]ス"),
    ],
)
def test_nucleus_where_a_speaker_puts_it(
    natural_frontend: Frontend, text: str, expected: str
) -> None:
    assert prosody(natural_frontend, text) == expected


def test_sbv2_reading_keeps_openjtalks_phrases(frontend: Frontend) -> None:
    assert prosody(frontend, "検査する") == "ケ]ンサ#スル"
    assert prosody(frontend, "食べている") == "タベ]テ#イル"


def test_readings_and_phones_never_change(natural_frontend: Frontend) -> None:
    """Phrasing moves boundaries and nuclei only: the phones are those of the same
    dictionary's analysis without it; only the tones differ."""
    text = "彼は検査している人のことを、食べてしまったのではないと言いました。"
    normalized = natural_frontend.normalize(text)
    unphrased = OpenJTalk(bundled_dictionary_dir("natural"))
    plain = g2p(normalized, unphrased)
    phrased = natural_frontend.g2p(text)
    assert phrased.phones == plain.phones
    assert phrased.word2ph == plain.word2ph
    assert phrased.tones != plain.tones
    features = unphrased.run_frontend(normalized)
    before = copy.deepcopy(features)
    moved = rephrase(features)
    assert [f["pron"] for f in moved] == [f["pron"] for f in features]
    assert features == before != moved  # a copy is changed, never the list given


def _word(pos: str, acc: int, moras: int, rule: str) -> dict[str, object]:
    return {"pos": pos, "acc": acc, "mora_size": moras, "chain_rule": rule}


@pytest.mark.parametrize(
    ("accent", "rule", "own", "expected"),
    [
        (0, "動詞%F2@1", 1, 4),  # F2: a flat phrase gains a nucleus
        (2, "動詞%F2@1", 1, 2),  # ...an accented one keeps its own
        (0, "動詞%F3@1", 1, 0),  # F3: only an accented one moves
        (2, "動詞%F3@1", 1, 4),
        (2, "F4@-1", 1, 2),  # F4: always moves (no part of speech named)
        (2, "動詞%F5", 1, 0),  # F5: flat
        (2, "C1", 2, 5),  # C1: the second word's own nucleus
        (2, "C2", 2, 4),  # C2: its first mora
        (2, "C3", 2, 3),  # C3: the last mora of the first word
        (2, "形容詞%F5/動詞%F1", 1, 2),  # F1 for a verb: unchanged
        (2, "名詞%F5", 1, 2),  # no entry for a verb: unchanged
    ],
)
def test_chained_accent_follows_openjtalks_rules(
    accent: int, rule: str, own: int, expected: int
) -> None:
    previous = _word("動詞", 0, 3, "*")
    assert chained_accent(accent, 3, _word("助詞", own, 1, rule), previous) == expected


def test_user_words_keep_their_accent_and_reading() -> None:
    """The user dictionary overrides the natural reading: a nucleus the user put
    on ン stays there, and a word read ナニ stays ナニ before で."""
    frontend = Frontend(UserDictionary(None))
    frontend.add_word("担々麺", "タンタンメン", accent=2)
    frontend.add_word("何", "ナニ", accent=1, word_type="common_noun")
    assert prosody(frontend, "担々麺") == "タン]タンメン"
    assert frontend.g2p("何でも").phones[1:5] == ("n", "a", "n", "i")
