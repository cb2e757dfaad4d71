"""Words that tell which sense a word around them has, for the context readings.

OpenJTalk's analysis gives a word's part of speech but not what it is about, so the
rules of :mod:`yomiage.text.context_readings` that depend on a topic (辛い: hot food
or hardship; 人気: popularity or people about; 表: a table or the front) look for
these words, matched on the base form (``orig``) OpenJTalk gives each word. Each set
is a class of words, kept short and unambiguous: a word that belongs to both senses
(店 for 人気, 紙 for 表) is not a cue for either.
"""

from __future__ import annotations

# Food, eating and taste: 辛い beside one of them is hot (カライ), not hard (ツライ).
TASTE = frozenset({
    "味", "味付け", "料理", "食べ物", "食事", "舌", "唐辛子", "山椒", "胡椒", "香辛料",
    "スパイス", "わさび", "山葵", "からし", "辛子", "キムチ", "カレー", "ラーメン", "麺",
    "スープ", "ソース", "タレ", "たれ", "鍋", "麻婆豆腐", "激辛", "辛口", "中辛", "甘口",
    "辛味", "辛み", "食べる", "食う", "飲む", "味わう", "甘い", "苦い", "酸っぱい",
    "しょっぱい", "塩辛い", "美味しい", "おいしい", "旨い", "うまい", "まずい",
})  # fmt: skip

# Places and times of day one can find deserted: 人気のない道 is ヒトケ (no one about);
# 人気のない歌手 or 店 (unpopular) stays ニンキ.
DESERTED = frozenset({
    "道", "通り", "路地", "夜道", "山道", "小道", "裏道", "道路", "場所", "所", "ところ",
    "辺り", "あたり", "公園", "森", "林", "山", "海", "海岸", "浜", "浜辺", "砂浜", "駅",
    "ホーム", "廊下", "部屋", "建物", "屋敷", "家", "校舎", "教室", "街", "町", "村",
    "路", "坂", "橋", "広場", "墓地", "境内", "神社", "寺", "島", "夜", "深夜", "真夜中",
    "早朝", "一角", "空間", "住宅街", "商店街", "ビル", "トンネル", "駐車場", "田舎",
    "山奥", "周囲", "周り",
})  # fmt: skip

# What a table is in or where it is on a page: 表 after "X の" is ヒョー (Excelの表,
# 下の表); コインの表 (a coin's face) stays オモテ.
DOCUMENTS = frozenset({
    "エクセル", "スプレッドシート", "ワード", "データ", "データベース", "資料", "論文",
    "報告書", "レポート", "文書", "書類", "ファイル", "ページ", "教科書", "結果", "統計",
    "集計", "成績", "売上", "一覧", "以下", "上記", "下記", "前述", "後述", "左記", "次",
    "上", "下", "左", "右", "別紙", "添付",
})  # fmt: skip

# What one does with a table, the word after 表 and its particle: 表にまとめる,
# 表を作成する, 表から読み取る, 表の通り. (表に出る, 表で遊ぶ stay オモテ.)
TABLE_USES = {
    "に": frozenset({"まとめる", "示す", "記入", "記載", "入力", "整理", "追加", "載せる", "載る"}),
    "を": frozenset({"作成", "作る", "参照", "ご覧", "埋める", "更新", "編集", "挿入", "印刷"}),
    "から": frozenset({"分かる", "わかる", "読み取る"}),
    "の": frozenset({"通り", "とおり", "行", "列", "セル", "項目", "数値", "見方"}),
}
