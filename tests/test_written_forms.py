"""Written forms a Japanese reader reads without thinking and the normalizer misread
(issue 31, item 19): 々 after a kanji no word holds, enclosed numerals in a run, a
weekday in brackets after a date, addresses, the postal mark, a race after a
distance, and emoji. Both readings normalize the same way, so each class is checked
in both; each also names what it must leave alone.
"""

from __future__ import annotations

import logging

import pytest

from tests.readings import expected, ours
from yomiage.errors import TextError
from yomiage.text import Frontend, UserDictionary

READINGS = ["frontend", "natural_frontend"]  # sbv2's reading and the natural one


@pytest.fixture(params=READINGS)
def either(request: pytest.FixtureRequest) -> Frontend:
    frontend: Frontend = request.getfixturevalue(request.param)
    return frontend


def reads(frontend: Frontend, text: str, kana: str) -> None:
    """``text`` is read as the katakana ``kana`` (pauses aside), with no pause mark
    standing for a character."""
    got = ours(frontend, text)
    assert got == expected(kana), f"{text}: read {frontend.normalize(text)!r} as {got}"


# -- 々 ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("担々麺", "タンタンメン"),
        ("湯々麺", "ユユメン"),  # 湯湯麺 would segment as 湯 + 湯麺 (タンメン)
        ("担々麺を食べた", "タンタンメンヲタベタ"),
        ("部分々々", "ブブンブブン"),  # 々々 repeats the two kanji before it
    ],
)
def test_iteration_mark_after_a_kanji_no_word_holds_repeats_it_not_a_pause(
    either: Frontend, text: str, kana: str
) -> None:
    """担々麺 was タン'メン: OpenJTalk read the lone 々 as a symbol, a pause."""
    assert "'" not in either.g2p(text).phones
    reads(either, text, kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("時々", "トキドキ"),
        ("人々", "ヒトビト"),
        ("佐々木さん", "ササキサン"),
        ("代々木", "ヨヨギ"),
        ("奈々子", "ナナコ"),
        ("日々", "ヒビ"),
        ("様々な", "サマザマナ"),
        ("騒々しい音楽", "ソーゾーシイオンガク"),  # the word goes on in kana
        ("堂々と", "ドードート"),
    ],
)
def test_iteration_mark_in_a_dictionary_word_keeps_its_reading(
    either: Frontend, text: str, kana: str
) -> None:
    reads(either, text, kana)
    assert "々" in either.normalize(text)  # left for the dictionary, not rewritten


def test_iteration_mark_in_a_user_word_keeps_the_users_reading() -> None:
    frontend = Frontend(UserDictionary(None))
    frontend.add_word("湯々麺", "トートーメン", accent=3)
    reads(frontend, "湯々麺", "トートーメン")


@pytest.mark.parametrize(
    ("text", "kana"),
    [("バナヽ", "バナナ"), ("ミスヾ", "ミスズ"), ("こゝろ", "ココロ"), ("いすゞ", "イスズ")],
)
def test_kana_iteration_marks_repeat_the_kana_before(
    either: Frontend, text: str, kana: str
) -> None:
    """ヽ and ヾ after katakana were pauses too (バナ'); ゞ and ヾ add the voicing."""
    reads(either, text, kana)


# -- enclosed numerals --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("手順は①②③の順です", "テジュンワイチニサンノジュンデス"),
        ("⑴⑵⑶", "イチニサン"),
        ("❶❷", "イチニ"),
        ("➀➁", "イチニ"),
        ("⓵⓶", "イチニ"),
        ("㈠㈡", "イチニ"),
        ("㊀㊁", "イチニ"),
        ("⑩⑪⑫", "ジュージューイチジューニ"),
        ("ⅠⅡⅢ", "イチニサン"),
        ("①を選ぶ", "イチヲエラブ"),  # one alone is unchanged
    ],
)
def test_enclosed_numerals_in_a_run_are_read_one_by_one_not_as_one_number(
    either: Frontend, text: str, kana: str
) -> None:
    """①②③ was ヒャクニジューサン: each became a kanji numeral and OpenJTalk read 一二三
    as one number. Each is its own item, with a pause between."""
    reads(either, text, kana)


def test_enclosed_letters_stay_letters(either: Frontend) -> None:
    reads(either, "ⒶⒷ", "エイビー")


# -- weekdays --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("会議は4月8日(月)です", "カイギワシガツヨーカゲツヨービデス"),
        ("4月9日（火）", "シガツココノカカヨービ"),
        ("10日(水)", "トーカスイヨービ"),
        ("十一日（木）", "ジューイチニチモクヨービ"),
        ("12日 (金)", "ジューニニチキンヨービ"),
        ("13日(土)", "ジューサンニチドヨービ"),
        ("14日(日)", "ジューヨッカニチヨービ"),
        ("4月29日(祝)", "シガツニジュークニチシュクジツ"),
        ("5/3(土・祝)", "ゴガツミッカドヨービシュクジツ"),
        ("4/8(月)", "シガツヨーカゲツヨービ"),
        ("2024/4/8(月)", "ニセンニジューヨネンシガツヨーカゲツヨービ"),
        ("8日(月曜)", "ヨーカゲツヨービ"),
        ("明日(火)は", "アシタカヨービワ"),
        ("8日㈪", "ヨーカゲツヨービ"),
        ("㈬の会議", "スイヨービノカイギ"),
        ("8日㊎", "ヨーカキンヨービ"),
    ],
)
def test_a_weekday_in_brackets_after_a_date_is_the_weekday_not_the_moon(
    either: Frontend, text: str, kana: str
) -> None:
    """4月8日(月) was read ヨーカ ツキ: the bracketed 月 was the moon."""
    reads(either, text, kana)


@pytest.mark.parametrize(
    ("text", "kana"), [("(月)が出た", "ツキガデタ"), ("山(木)", "ヤマキ"), ("3(金)", "サンキン")]
)
def test_a_bracketed_kanji_elsewhere_is_not_a_weekday(
    either: Frontend, text: str, kana: str
) -> None:
    reads(either, text, kana)


# -- addresses, postal codes ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("東京都港区六本木6-10-1", "トーキョートミナトクロッポンギロクノジューノイチ"),
        ("六本木6-10-1", "ロッポンギロクノジューノイチ"),
        ("梅田1-2-3にある", "ウメダイチノニノサンニアル"),
        ("港区六本木6-10", "ミナトクロッポンギロクノジュー"),
        ("六本木6丁目10-1", "ロッポンギロクチョーメジューノイチ"),
    ],
)
def test_an_address_is_read_block_by_block_with_no_not_as_a_range(
    either: Frontend, text: str, kana: str
) -> None:
    """六本木6-10-1 was ロク カラ ジュー - イチ: the first hyphen was a range."""
    reads(either, text, kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("10-20人", "ジューカラニジューニン"),
        ("気温は10-20度", "キオンワジューカラニジュード"),
        ("港区で10-20人", "ミナトクデジューカラニジューニン"),
        ("03-1234-5678", "ゼロサンイチニーサンヨンゴーロクナナハチ"),
        ("2024-04-08", "ニセンニジューヨネンシガツヨーカ"),
    ],
)
def test_hyphens_that_are_not_addresses_stay_ranges_phones_and_dates(
    either: Frontend, text: str, kana: str
) -> None:
    reads(either, text, kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("郵便番号は〒106-0032", "ユービンバンゴーワイチゼロロクノゼロゼロサンニー"),
        ("〒106-0032 東京都", "イチゼロロクノゼロゼロサンニートーキョート"),
        ("〒1060032", "イチゼロロクノゼロゼロサンニー"),
    ],
)
def test_the_postal_mark_is_not_read_before_the_code(
    either: Frontend, text: str, kana: str
) -> None:
    """〒106-0032 was read ユービンバンゴー before the code, so 郵便番号は〒… said it twice."""
    reads(either, text, kana)


# -- a race after a distance ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("100m走で", "ヒャクメートルソーデ"),
        ("50メートル走", "ゴジューメートルソー"),
        ("1500m走の選手", "センゴヒャクメートルソーノセンシュ"),
        ("百メートル走で", "ヒャクメートルソーデ"),
    ],
)
def test_a_race_after_a_distance_is_sou_not_hashiri(either: Frontend, text: str, kana: str) -> None:
    reads(either, text, kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("10km走った", "ジュッキロメートルハシッタ"),
        ("100m走ると", "ヒャクメートルハシルト"),
        ("5キロ走り続けた", "ゴキロハシリツズケタ"),
        ("100mを走る", "ヒャクメートルヲハシル"),
    ],
)
def test_running_a_distance_stays_the_verb(either: Frontend, text: str, kana: str) -> None:
    reads(either, text, kana)


# -- emoji and symbols -------------------------------------------------------------


def test_emoji_are_skipped_with_a_warning_naming_them(
    either: Frontend, caplog: pytest.LogCaptureFixture
) -> None:
    """今日は🍣を食べた lost its 🍣 with no message; the sentence is still read (a chat
    bot's text with emoji must speak) and the warning names what was skipped."""
    with caplog.at_level(logging.WARNING, logger="yomiage.text"):
        reads(either, "今日は🍣を食べた。", "キョーワヲタベタ")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("🍣 (U+1F363)" in message for message in warned), warned


def test_spaces_and_the_parts_of_an_emoji_are_not_named(
    either: Frontend, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="yomiage.text"):
        either.g2p("今日は 晴れ、\u3000明日は雨。")
        either.g2p("👍🏽です")  # the skin tone is part of the emoji, named once
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(messages) == 1 and "👍" in messages[0] and "U+1F3FD" not in messages[0]


def test_emoji_alone_is_an_error_naming_it(either: Frontend) -> None:
    with pytest.raises(TextError, match=r"😀 \(U\+1F600\)"):
        either.g2p("😀")
