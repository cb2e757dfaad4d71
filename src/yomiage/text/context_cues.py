"""Words that tell which sense a word around them has, for the context readings.

OpenJTalk's analysis gives a word's part of speech but not what it is about, so the
rules of :mod:`yomiage.text.context_readings` that depend on a topic (辛い: hot food
or hardship; 人気: popularity or people about; 表: a table or the front) look for
these words, matched on the base form (``orig``) OpenJTalk gives each word. Each set
is a class of words, kept short and unambiguous: a word that belongs to both senses
(店 for 人気) is not a cue for either.
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

# What a table is in or where it is on a page, the word before "の 表": Excelの表,
# 下の表, こちらの表 are ヒョー.
DOCUMENTS = frozenset({
    "エクセル", "スプレッドシート", "ワード", "データ", "データベース", "資料", "論文",
    "報告書", "レポート", "文書", "書類", "ファイル", "ページ", "教科書", "結果", "統計",
    "集計", "成績", "売上", "一覧", "以下", "上記", "下記", "前述", "後述", "左記", "次",
    "上", "下", "左", "右", "別紙", "添付", "前", "後", "先", "最初", "最後", "前者",
    "後者", "こちら", "そちら", "あちら", "本文", "付録", "巻末", "章", "節", "調査",
    "実験", "分析", "比較", "料金", "価格",
})  # fmt: skip

# Determiners right before 表 that point at a table: この表, 各表, 同表 (a front is
# something's front, コインの表, so it is not pointed at on its own).
TABLE_DETERMINERS = frozenset({
    "この", "その", "あの", "どの", "各", "同", "当", "全", "本", "次", "前", "新",
})  # fmt: skip

# What one does with a table, the word after 表 and its particle: 表にまとめる,
# 表を作成する, 表を見る, 表から読み取る, 表の通り, 表は以下の通り. Matched on the
# base form, so 見て, 示した, ご覧ください count. (表に出る, 表で遊ぶ, 表を向く, 表に
# 回る stay オモテ: going out, facing up and the outside are not done with a table.)
TABLE_USES = {
    "を": frozenset({
        "見る", "ご覧", "御覧", "参照", "作成", "作る", "作り直す", "埋める", "更新",
        "編集", "挿入", "印刷", "確認", "比較", "比べる", "掲載", "載せる", "添付",
        "配布", "配る", "提出", "完成", "修正", "読む", "書く", "描く", "使う", "用いる",
        "眺める", "貼り付ける", "コピー", "共有", "保存", "削除", "整理", "集計", "入力",
    }),
    "に": frozenset({
        "まとめる", "示す", "記入", "記載", "入力", "整理", "追加", "載せる", "載る",
        "掲載", "書き込む", "加える", "記録", "反映", "基づく", "従う", "挙げる", "掲げる",
        "示せる",
    }),
    "で": frozenset({"示す", "確認", "整理", "表す", "比較", "まとめる", "管理", "見る"}),
    "から": frozenset({"分かる", "わかる", "読み取る", "読み取れる", "読む", "求める", "選ぶ"}),
    "の": frozenset({
        "通り", "とおり", "よう", "行", "列", "セル", "欄", "項目", "数値", "数字", "値",
        "データ", "内容", "見方", "読み方", "作り方", "書き方", "見出し", "上段", "下段",
        "縦軸", "横軸", "形式", "番号", "作成",
    }),
    "は": frozenset({"以下", "次", "下記", "示す", "表す"}),
    "が": frozenset({"示す", "表す", "完成", "載る"}),
}  # fmt: skip

# Verbs that make or show a table, ending a clause right before 表: 作成した表,
# 以下に示す表, Excelで作った表, まとめられた表.
TABLE_MAKING = frozenset({
    "作成", "作る", "作り直す", "まとめる", "示す", "掲載", "載せる", "添付", "記載",
    "集計", "整理", "更新", "編集", "印刷", "配布", "配る", "挙げる", "掲げる",
})  # fmt: skip

# Words right after 表 that only a table takes: 表中, 表内, 表参照.
TABLE_SUFFIXES = frozenset({"中", "内", "参照"})

# What has a front, before "の 表": コインの表, 紙の表, 封筒の表, 家の表 stay オモテ
# whatever is done with them (コインの表を見る).
FRONT_HOLDERS = frozenset({
    "コイン", "硬貨", "メダル", "紙", "用紙", "封筒", "葉書", "はがき", "ハガキ", "カード",
    "名刺", "写真", "紙幣", "お札", "札", "切手", "表紙", "布", "生地", "服", "着物",
    "シャツ", "葉", "畳", "板", "家", "店", "建物", "門", "屋敷", "玄関",
})  # fmt: skip

# Words of the other side: a sentence holding one is about the front (表も裏も, 表か裏か,
# 裏返して表を見る), and its 表 stays オモテ.
BACK_SIDE = frozenset({"裏", "裏側", "裏面", "裏返す", "裏返し", "コイン", "硬貨"})
