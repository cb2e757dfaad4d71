"""Our own small English → katakana lexicon (written for yomiage, MIT).

It covers what the layers below it get wrong: acronyms that are pronounced as
words, and common technical words and brands that OpenJTalk's dictionary lacks
and the e2k model mispronounces (python → ピソン, json → ジョン). Keys are
lower case; lookups are case-insensitive.
"""

from __future__ import annotations

LETTER_NAMES: dict[str, str] = {
    "a": "エイ", "b": "ビー", "c": "シー", "d": "ディー", "e": "イー", "f": "エフ",
    "g": "ジー", "h": "エイチ", "i": "アイ", "j": "ジェイ", "k": "ケイ", "l": "エル",
    "m": "エム", "n": "エヌ", "o": "オー", "p": "ピー", "q": "キュー", "r": "アール",
    "s": "エス", "t": "ティー", "u": "ユー", "v": "ブイ", "w": "ダブリュー",
    "x": "エックス", "y": "ワイ", "z": "ゼット",
}  # fmt: skip

# Acronyms said as words rather than letter by letter.
ACRONYM_WORDS: dict[str, str] = {
    "nasa": "ナサ", "jaxa": "ジャクサ", "json": "ジェイソン", "unesco": "ユネスコ",
    "unicef": "ユニセフ", "nato": "ナトー", "asean": "アセアン", "opec": "オペック",
    "fifa": "フィファ", "ram": "ラム", "rom": "ロム", "lan": "ラン", "wan": "ワン",
    "nisa": "ニーサ", "ascii": "アスキー", "gif": "ジフ", "jpeg": "ジェイペグ",
    "yaml": "ヤムル", "toml": "トムル", "wifi": "ワイファイ", "sim": "シム",
    "covid": "コビット", "aids": "エイズ", "laser": "レーザー", "radar": "レーダー",
    "scuba": "スキューバ", "ufo": "ユーフォー", "pin": "ピン", "pos": "ポス",
    "dos": "ドス", "ios": "アイオーエス", "gui": "グイ", "nas": "ナス", "jis": "ジス",
    "cad": "キャド", "ok": "オーケー", "tepco": "テプコ", "emoji": "エモジ",
    "onnx": "オニキス",
}  # fmt: skip

# Products, services and tools named every day in Japanese technical writing, with
# the katakana their Japanese users say (Arduino アルドゥイーノ, Nginx エンジンエックス,
# Qiita キータ), where OpenJTalk and e2k read them otherwise (e2k: Raspberry
# ラスペリー, Jupyter ジュピーター; letter by letter: Nginx, Xcode, Matplotlib).
PRODUCTS: dict[str, str] = {
    "raspberry": "ラズベリー", "raspbian": "ラズビアン", "arduino": "アルドゥイーノ",
    "jetson": "ジェットソン", "postgresql": "ポストグレスキューエル",
    "postgres": "ポストグレス", "nginx": "エンジンエックス", "jupyter": "ジュピター",
    "azure": "アジュール", "netlify": "ネットリファイ", "supabase": "スーパーベース",
    "qiita": "キータ", "xcode": "エックスコード", "vmware": "ブイエムウェア",
    "vagrant": "ベイグラント", "matplotlib": "マットプロットリブ",
    "scikit": "サイキット", "langchain": "ラングチェーン", "fastapi": "ファストエーピーアイ",
    "colab": "コラボ", "vite": "ビート", "babel": "バベル", "deno": "ディーノ",
    "nuxt": "ナクスト", "redux": "リダックス", "gradle": "グレードル", "maven": "メイブン",
    "jira": "ジラ", "snowflake": "スノーフレーク", "chromebook": "クロームブック",
    "shopify": "ショッピファイ", "obsidian": "オブシディアン", "latex": "ラテック",
    "tex": "テック", "midjourney": "ミッドジャーニー", "anthropic": "アンソロピック",
}  # fmt: skip

# Words and brands that OpenJTalk does not know and e2k reads badly.
WORDS: dict[str, str] = {
    "python": "パイソン", "github": "ギットハブ", "gitlab": "ギットラボ", "git": "ギット",
    "hub": "ハブ", "docker": "ドッカー", "kubernetes": "クバネティス", "linux": "リナックス",
    "ubuntu": "ウブントゥ", "debian": "デビアン", "nvidia": "エヌビディア",
    "cuda": "クーダ", "pytorch": "パイトーチ", "numpy": "ナムパイ", "java": "ジャバ",
    "javascript": "ジャバスクリプト", "typescript": "タイプスクリプト", "rust": "ラスト",
    "golang": "ゴーラン", "ruby": "ルビー", "perl": "パール", "php": "ピーエイチピー",
    "swift": "スウィフト", "kotlin": "コトリン", "npm": "エヌピーエム",
    "youtube": "ユーチューブ", "tiktok": "ティックトック", "netflix": "ネットフリックス",
    "twitter": "ツイッター", "slack": "スラック", "discord": "ディスコード",
    "zoom": "ズーム", "line": "ライン", "chatgpt": "チャットジーピーティー",
    "openai": "オープンエーアイ", "tesla": "テスラ", "toyota": "トヨタ", "honda": "ホンダ",
    "nissan": "ニッサン", "nintendo": "ニンテンドー", "sony": "ソニー",
    "panasonic": "パナソニック", "samsung": "サムスン", "huawei": "ファーウェイ",
    "xiaomi": "シャオミ", "intel": "インテル", "amd": "エーエムディー", "ibm": "アイビーエム",
    "iphone": "アイフォーン", "ipad": "アイパッド", "imac": "アイマック", "mac": "マック",
    "macbook": "マックブック", "airpods": "エアポッズ", "android": "アンドロイド",
    "office": "オフィス", "excel": "エクセル", "word": "ワード",
    "powerpoint": "パワーポイント", "google": "グーグル", "gmail": "ジーメール",
    "amazon": "アマゾン", "apple": "アップル", "microsoft": "マイクロソフト",
    "facebook": "フェイスブック", "instagram": "インスタグラム", "meta": "メタ",
    "starbucks": "スターバックス", "mcdonald": "マクドナルド", "mcdonalds": "マクドナルド",
    "uber": "ウーバー", "airbnb": "エアビーアンドビー", "spotify": "スポティファイ",
    "wikipedia": "ウィキペディア", "chrome": "クローム", "firefox": "ファイアフォックス",
    "safari": "サファリ", "email": "イーメール", "smartphone": "スマートフォン",
    "app": "アプリ", "apps": "アプリ", "wi": "ワイ", "fi": "ファイ", "bluetooth": "ブルートゥース",
    "online": "オンライン", "offline": "オフライン", "login": "ログイン", "logout": "ログアウト",
    "download": "ダウンロード", "upload": "アップロード", "website": "ウェブサイト",
    "web": "ウェブ", "blog": "ブログ", "cloud": "クラウド", "server": "サーバー",
    "database": "データベース", "software": "ソフトウェア", "hardware": "ハードウェア",
    "computer": "コンピューター", "keyboard": "キーボード", "password": "パスワード",
    "user": "ユーザー", "data": "データ", "game": "ゲーム", "hello": "ハロー",
    "okay": "オーケー", "thanks": "サンクス", "sorry": "ソーリー", "yes": "イエス",
    "the": "ザ", "and": "アンド", "for": "フォー", "with": "ウィズ", "a": "ア", "she": "シー",
    "they": "ゼイ", "this": "ディス", "that": "ザット", "what": "ワット", "who": "フー",
    "ai": "エーアイ", "os": "オーエス", "tv": "テレビ", "pc": "ピーシー",
    "ps": "ピーエス", "dx": "ディーエックス", "iot": "アイオーティー",
    "vs": "バーサス", "etc": "エトセトラ", "mr": "ミスター", "mrs": "ミセス", "ms": "ミズ",
    "dr": "ドクター", "st": "セント", "co": "コー", "inc": "インク", "ltd": "リミテッド",
    **PRODUCTS,
}  # fmt: skip

# English words of two letters, read as words unless written in capitals (Go言語,
# Stand by Me, About Us; US and AT stay initials). OpenJTalk spells a title-cased
# pair letter by letter and e2k's n-gram rejects them all as unpronounceable,
# so without this list Hi, So and Us were spelled (エイチアイ). The class is
# small and closed; pairs that are mostly abbreviations (id, ex, co) are left out.
TWO_LETTER_WORDS: dict[str, str] = {
    "ah": "アー", "am": "アム", "an": "アン", "as": "アズ", "at": "アット", "be": "ビー",
    "by": "バイ", "do": "ドゥー", "go": "ゴー", "he": "ヒー", "hi": "ハイ", "if": "イフ",
    "in": "イン", "is": "イズ", "it": "イット", "me": "ミー", "my": "マイ", "no": "ノー",
    "of": "オブ", "oh": "オー", "on": "オン", "or": "オア", "ox": "オックス", "pi": "パイ",
    "so": "ソー", "to": "トゥー", "up": "アップ", "us": "アス", "we": "ウィー", "yo": "ヨー",
}  # fmt: skip

# Prefixes read as they sound before a hyphen (re-entry リエントリー, co-host
# コホスト) where the prefix alone reads otherwise (re spelled, co コー for "company").
HYPHEN_PREFIXES: dict[str, str] = {"re": "リ", "co": "コ", "un": "アン", "bi": "バイ"}

# Hyphenated words whose reading is not the sum of their parts.
HYPHENATED_WORDS: dict[str, str] = {"co-op": "コープ"}

# Multi-word expressions read as one loanword.
PHRASES: dict[tuple[str, ...], str] = {
    ("thank", "you"): "サンキュー",
    ("good", "morning"): "グッドモーニング",
    ("good", "night"): "グッドナイト",
    ("good", "bye"): "グッドバイ",
    ("see", "you"): "シーユー",
    ("excuse", "me"): "エクスキューズミー",
    ("oh", "my", "god"): "オーマイゴッド",
    ("new", "york"): "ニューヨーク",
    ("los", "angeles"): "ロサンゼルス",
    ("san", "francisco"): "サンフランシスコ",
    ("happy", "birthday"): "ハッピーバースデー",
    ("merry", "christmas"): "メリークリスマス",
    ("i", "love", "you"): "アイラブユー",
    # Products named in two words: Raspberry Pi is one device (ラズベリーパイ even in
    # capitals, where PI alone is spelled); VS is Visual Studio here, not "versus".
    ("raspberry", "pi"): "ラズベリーパイ",
    ("vs", "code"): "ブイエスコード",
    ("line", "works"): "ラインワークス",
}

# Endings after a dot that name a library rather than a file or a site, read with
# the dot silent: Node.js ノードジェイエス, Vue.js ビュージェイエス (example.com keeps
# its dot).
DOT_SUFFIXES: dict[str, str] = {"js": "ジェイエス"}
