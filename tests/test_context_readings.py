"""The natural reading's context readings (yomiage.text.context_readings), the
punctuation it hands OpenJTalk (yomiage.text.natural) and phone numbers however
the dash is written: one case per class, with the reading that stays."""

from __future__ import annotations

import pytest

from yomiage.text import Frontend


def phones(frontend: Frontend, text: str) -> str:
    return "".join(p for p in frontend.g2p(text).phones[1:-1] if p.isalpha())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 何 before t, d, n is ナン; before に and others ナニ
        ("何でも言う", "naNdemoiu"),
        ("何とかする", "naNtokasuru"),
        ("何ですか", "naNdesuka"),
        ("何にする", "naninisuru"),
        ("何を食べる", "naniotaberu"),
        # 御 before a native word is お, before a Sino-Japanese one ご
        ("御支払いします", "oshiharaishimasu"),
        ("御都合", "gotsugoo"),
        # 分 in a fraction is ブン; in minutes フン/プン
        ("三分の一", "saNbuNnoichi"),
        ("三分待つ", "saNpuNmatsu"),
        # 風 after そんな is a manner, フー; otherwise the wind
        ("そんな風に話す", "soNnafuunihanasu"),
        ("風に吹かれる", "kazenifukareru"),
        # 方 after a clause is a person (カタ) unless a comparison follows (ホー)
        ("くださる方だけに", "kudasarukatadakeni"),
        ("早い方がいい", "hayaihoogaii"),
        # 中 after a place is ジュー, after an activity チュー
        ("街中で", "machijuude"),
        ("輸送中に", "yusoochuuni"),
        # 七 before 日 in a date is ナナ
        ("二十七日の", "nijuunananichino"),
        # 良い before a particle or an auxiliary is イイ, before a noun ヨイ
        ("それで良いか", "soredeiika"),
        ("良い状態", "yoijootai"),
        # 種 between a demonstrative and の is a kind (シュ), otherwise a seed (タネ)
        ("ある種の病気", "arushunobyooki"),
        ("種を蒔く", "taneomaku"),
    ],
)
def test_reads_a_word_as_its_neighbours_make_it_read(
    natural_frontend: Frontend, text: str, expected: str
) -> None:
    assert phones(natural_frontend, text) == expected


def test_a_noun_after_a_comma_is_not_read_as_a_suffix(natural_frontend: Frontend) -> None:
    """MeCab takes ASCII ``,`` for a digit separator and the noun after it for a
    suffix (色 ショク, 人 ニン); the natural reading hands it 、 instead."""
    assert phones(natural_frontend, "サイズ、色、スタイル") == "saizuirosutairu"
    assert phones(natural_frontend, "それだけで、人を責めるな") == "soredakedehitoosemeruna"


def test_sbv2_reading_keeps_openjtalks_readings(frontend: Frontend) -> None:
    assert phones(frontend, "何でも言う") == "nanidemoiu"
    assert phones(frontend, "サイズ、色") == "saizushoku"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("４８６ー２４３５です", "ヨンハチロク,ニーヨンサンゴーです"),
        ("486－2435", "ヨンハチロク,ニーヨンサンゴー"),
        ("２１２ー８３６ー１７２５", "ニーイチニー,ハチサンロク,イチナナニーゴー"),
        ("０９０ー１２３４ー５６７８", "ゼロキューゼロ,イチニーサンヨン,ゴーロクナナハチ"),
        # ranges stay ranges: a counter follows, or the groups are not a phone's
        ("100-2000円", "百から二千円"),
        ("１９９０ー２０００年", "千九百九十から二千年"),
    ],
)
def test_phone_numbers_in_every_written_form(
    natural_frontend: Frontend, text: str, expected: str
) -> None:
    assert natural_frontend.normalize(text) == expected
