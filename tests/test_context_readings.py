"""The natural reading's context readings (yomiage.text.context_readings), the
punctuation it hands OpenJTalk (yomiage.text.natural) and phone numbers however
the dash is written: one case per class, with the reading that stays."""

from __future__ import annotations

import pytest

from tests.readings import expected, ours
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


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        # a date: a range to another day that ends in まで, a weekday, 付
        ("1日から10日まで休みます", "ツイタチカラトーカマデヤスミマス"),
        ("1日から31日まで", "ツイタチカラサンジューイチニチマデ"),
        ("1日(月)に集合", "ツイタチゲツヨービニシューゴー"),
        ("1日付で異動した", "ツイタチズケデイドーシタ"),
        ("4月1日から", "シガツツイタチカラ"),  # after a month, as OpenJTalk already reads
        # a length of time stays イチニチ
        ("1日3回飲む", "イチニチサンカイノム"),
        ("1日中寝ていた", "イチニチジューネテイタ"),
        ("1日に3回", "イチニチニサンカイ"),
        ("1日から3日かかる", "イチニチカラミッカカカル"),
        ("1日から3日間", "イチニチカラミッカカン"),
    ],
)
def test_the_first_without_a_month_is_tsuitachi_where_a_date_follows(
    natural_frontend: Frontend, text: str, kana: str
) -> None:
    """1日から10日まで was read イチニチ カラ トーカ: with no month before it, OpenJTalk
    took every 一日 for a day's length."""
    assert ours(natural_frontend, text) == expected(kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("辛いカレーは辛い。", "カライカレーワカライ"),
        ("辛い物を食べた", "カライモノヲタベタ"),
        ("このスープは甘くて辛い", "コノスープワアマクテカライ"),
        ("この辛さがたまらない味だ", "コノカラサガタマラナイアジダ"),
        ("辛い生活をした", "ツライセーカツヲシタ"),  # hardship
        ("別れは辛い", "ワカレワツライ"),
    ],
)
def test_karai_in_a_sentence_about_food_tsurai_elsewhere(
    natural_frontend: Frontend, text: str, kana: str
) -> None:
    """辛いカレーは辛い was ツライ カレーワ ツライ: the dictionary's 辛い is hardship."""
    assert ours(natural_frontend, text) == expected(kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("人気のない道", "ヒトケノナイミチ"),
        ("人気の少ない公園", "ヒトケノスクナイコーエン"),
        ("人気のない暗い夜道", "ヒトケノナイクライヨミチ"),
        ("人気のない店", "ニンキノナイミセ"),  # an unpopular shop
        ("この歌手は人気がない", "コノカシュワニンキガナイ"),
        ("人気のある場所", "ニンキノアルバショ"),
    ],
)
def test_hitoke_where_a_place_has_no_one_about_ninki_for_popularity(
    natural_frontend: Frontend, text: str, kana: str
) -> None:
    assert ours(natural_frontend, text) == expected(kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("Excelの表", "エクセルノヒョー"),
        ("下の表を参照", "シタノヒョーヲサンショー"),
        ("表1に示す", "ヒョーイチニシメス"),
        ("結果を表にまとめる", "ケッカヲヒョーニマトメル"),
        ("表を作成する", "ヒョーヲサクセースル"),
        ("表に出る", "オモテニデル"),  # the outside
        ("コインの表", "コインノオモテ"),  # a coin's face
        ("表で遊ぶ", "オモテデアソブ"),
    ],
)
def test_a_table_in_writing_about_documents_is_hyou_the_front_stays_omote(
    natural_frontend: Frontend, text: str, kana: str
) -> None:
    """Excelの表 was オモテ with the natural reading's dictionary (SBV2's says ヒョー
    everywhere, 表に出る included)."""
    assert ours(natural_frontend, text) == expected(kana)


def test_context_words_keep_sbv2s_readings_in_the_sbv2_reading(frontend: Frontend) -> None:
    """The sbv2 reading is SBV2's words as they are: the context passes are the natural
    reading's."""
    assert ours(frontend, "辛いカレー") == expected("ツライカレー")
    assert ours(frontend, "人気のない道") == expected("ニンキノナイミチ")
