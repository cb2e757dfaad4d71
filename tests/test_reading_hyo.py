"""表 in the natural reading: ヒョー where it is a table, オモテ where it is the front
(issue 49, item 16). One case per cue of :func:`yomiage.text.context_readings._table_hyou`,
so a cue that stops working shows up by name."""

from __future__ import annotations

import pytest

from tests.readings import expected, ours
from yomiage.text import Frontend


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        # what is done with a table, after its particle
        ("この表を見てください。", "コノヒョーヲミテクダサイ"),  # the sentence
        ("表を見てください。", "ヒョーヲミテクダサイ"),
        ("表をよく見ると分かる", "ヒョーヲヨクミルトワカル"),
        ("表をご覧ください", "ヒョーヲゴランクダサイ"),
        ("表を印刷する", "ヒョーヲインサツスル"),
        ("二つの表を比較する", "フタツノヒョーヲヒカクスル"),
        ("表を埋めてください", "ヒョーヲウメテクダサイ"),
        ("表を使って説明する", "ヒョーヲツカッテセツメースル"),
        ("表に記入してください", "ヒョーニキニューシテクダサイ"),
        ("表に掲載されている", "ヒョーニケーサイサレテイル"),
        ("表で示した", "ヒョーデシメシタ"),
        ("表から読み取れる傾向", "ヒョーカラヨミトレルケーコー"),
        ("表は以下の通りです", "ヒョーワイカノトーリデス"),
        ("表が示すように", "ヒョーガシメスヨーニ"),
        # a part of a table, after の
        ("表のとおりです", "ヒョーノトーリデス"),
        ("表のように分類できる", "ヒョーノヨーニブンルイデキル"),
        ("表の行と列", "ヒョーノギョートレツ"),
        ("表の作り方", "ヒョーノツクリカタ"),
        # a suffix only a table takes (中 stays チュー, not ジュー as after a place)
        ("表中の数値", "ヒョーチューノスーチ"),
        ("表参照", "ヒョーサンショー"),
        # a determiner or a prefix before it
        ("その表をご覧ください。", "ソノヒョーヲゴランクダサイ"),
        ("あの表はどこですか", "アノヒョーワドコデスカ"),
        ("各表の見出し", "カクヒョーノミダシ"),
        ("同表によると", "ドーヒョーニヨルト"),
        # a place on a page or another table before の
        ("こちらの表をご覧ください", "コチラノヒョーヲゴランクダサイ"),
        ("前の表と比べる", "マエノヒョートクラベル"),
        ("最初の表", "サイショノヒョー"),
        # a clause that makes or shows it
        ("作成した表を共有する", "サクセーシタヒョーヲキョーユースル"),
        ("以下に示す表", "イカニシメスヒョー"),
        ("Excelで作った表を送ります", "エクセルデツクッタヒョーヲオクリマス"),
        ("先ほどまとめた表をご確認ください", "サキホドマトメタヒョーヲゴカクニンクダサイ"),
    ],
)
def test_hyou_read_omote_where_it_is_a_table(
    natural_frontend: Frontend, text: str, kana: str
) -> None:
    """この表を見てください read オモテ at c453008: only a document before の, a
    number after it or a few verbs (作成, まとめる) made 表 a table."""
    assert ours(natural_frontend, text) == expected(kana)


@pytest.mark.parametrize(
    ("text", "kana"),
    [
        ("表に出る", "オモテニデル"),  # the outside
        ("事態を表に出さないようにしたまえ。", "ジタイヲオモテニダサナイヨーニシタマエ"),
        ("表で遊ぶ", "オモテデアソブ"),
        ("表に回る", "オモテニマワル"),
        ("表を歩く", "オモテヲアルク"),
        ("表を向く", "オモテヲムク"),  # a side
        ("表を上に向ける", "オモテヲウエニムケル"),
        ("表が出た", "オモテガデタ"),
        # something that has a front owns it, whatever is done with it
        ("コインの表", "コインノオモテ"),
        ("コインの表を見る", "コインノオモテヲミル"),
        ("カードの表を見せる", "カードノオモテヲミセル"),
        ("紙の表に名前を書く", "カミノオモテニナマエヲカク"),
        ("封筒の表に住所を書く", "フートーノオモテニジューショヲカク"),
        ("店の表を掃除する", "ミセノオモテヲソージスル"),
        # the sentence speaks of the back
        ("表も裏も", "オモテモウラモ"),
        ("表か裏か", "オモテカウラカ"),
        ("裏返して表を見る", "ウラガエシテオモテヲミル"),
        ("表が出るか裏が出るか", "オモテガデルカウラガデルカ"),
        ("表の顔と裏の顔", "オモテノカオトウラノカオ"),
        # the dictionary's own words
        ("表と裏", "オモテトウラ"),
        ("表通り", "オモテドーリ"),
        ("表玄関", "オモテゲンカン"),
        ("表向きは平静だ", "オモテムキワヘーセーダ"),
        ("表沙汰になる", "オモテザタニナル"),
    ],
)
def test_hyou_stays_omote_where_it_is_the_front(
    natural_frontend: Frontend, text: str, kana: str
) -> None:
    """The guard on the other side: the table cues must not reach the front's 表."""
    assert ours(natural_frontend, text) == expected(kana)
