"""Product, service and tool names of Japanese technical writing, read as their
Japanese users say them (issue 49, item 17: Raspberry Pi was e2k's ラスペリーパイ).

Each name is read inside a sentence, as it is met; a case passes on the phonemes,
so spellings of one sound (ウィンドウズ, ウィンドーズ) are one reading.
"""

from __future__ import annotations

import pytest

from tests.readings import expected, ours
from yomiage.text import Frontend

# Names the lexicon had to learn: each was read otherwise at c453008 (in brackets).
LEARNED = [
    ("Raspberry Pi", ("ラズベリーパイ",)),  # ラスペリーパイ
    ("RASPBERRY PI", ("ラズベリーパイ",)),  # ラスペリーピーアイ
    ("Raspbian", ("ラズビアン",)),  # ラスピアン
    ("Arduino", ("アルドゥイーノ", "アルディーノ")),  # アーディノ
    ("Jetson", ("ジェットソン",)),  # ジェツン
    (
        "PostgreSQL",
        ("ポストグレスキューエル", "ポストグレエスキューエル"),
    ),  # ポストグルエスキューエル
    ("Nginx", ("エンジンエックス",)),  # spelled
    ("Jupyter", ("ジュピター",)),  # ジュピーター
    ("Azure", ("アジュール",)),  # アジュア
    ("Netlify", ("ネットリファイ",)),  # ネトリファイ
    ("Supabase", ("スーパーベース",)),  # スーパベース
    ("Qiita", ("キータ",)),  # spelled
    ("Xcode", ("エックスコード",)),  # spelled
    ("VMware", ("ブイエムウェア",)),  # ブイムエア
    ("Vagrant", ("ベイグラント",)),  # バグラント
    ("Matplotlib", ("マットプロットリブ",)),  # spelled
    ("scikit-learn", ("サイキットラーン",)),  # スキーキットラーン
    ("LangChain", ("ラングチェーン",)),  # ランチェーン
    ("ONNX", ("オニキス",)),  # spelled
    ("Vite", ("ビート", "ヴィート")),  # バイト
    ("Babel", ("バベル",)),  # ベーベル
    ("Deno", ("ディーノ",)),  # デノ
    ("Nuxt", ("ナクスト",)),  # spelled
    ("Redux", ("リダックス",)),  # レダックス
    ("Gradle", ("グレードル",)),  # グラードル
    ("Maven", ("メイブン", "メイヴン")),  # マベン
    ("Jira", ("ジラ",)),  # ジャイラ
    ("Snowflake", ("スノーフレーク",)),  # スノーフレーキ
    ("Chromebook", ("クロームブック",)),  # クロムブック
    ("Obsidian", ("オブシディアン",)),  # オブシアン
    ("LaTeX", ("ラテック",)),  # ラテフ
    ("Midjourney", ("ミッドジャーニー",)),  # ミズガーニー
    ("Anthropic", ("アンソロピック",)),  # アントロピック
    ("Colab", ("コラボ",)),  # コラブ
    ("VS Code", ("ブイエスコード",)),  # バーサスコード
    ("LINE WORKS", ("ラインワークス",)),  # ライン + spelled
]

# Names that were already read right, kept so a new entry cannot break them.
KEPT = [
    ("Kubernetes", ("クバネティス", "クーベネティス")),
    ("GitHub Actions", ("ギットハブアクションズ",)),
    ("Docker", ("ドッカー",)),
    ("Linux", ("リナックス",)),
    ("Ubuntu", ("ウブントゥ", "ウブンツ")),
    ("Python", ("パイソン",)),
    ("JavaScript", ("ジャバスクリプト",)),
    ("TypeScript", ("タイプスクリプト",)),
    ("MySQL", ("マイエスキューエル",)),
    ("Redis", ("レディス",)),
    ("Slack", ("スラック",)),
    ("YouTube", ("ユーチューブ",)),
    ("ChatGPT", ("チャットジーピーティー",)),
    ("Wi-Fi", ("ワイファイ",)),
    ("Bluetooth", ("ブルートゥース",)),
    ("macOS", ("マックオーエス",)),
    ("Windows", ("ウィンドウズ", "ウィンドーズ")),
    ("Android", ("アンドロイド",)),
    ("PowerPoint", ("パワーポイント",)),
    ("Visual Studio Code", ("ビジュアルスタジオコード",)),
    ("TensorFlow", ("テンソルフロー",)),
    ("PyTorch", ("パイトーチ",)),
    ("Google Cloud", ("グーグルクラウド",)),
    ("Terraform", ("テラフォーム",)),
    ("Ansible", ("アンシブル",)),
    ("Jenkins", ("ジェンキンス",)),
    ("React", ("リアクト",)),
    ("GitLab", ("ギットラボ",)),
    ("Django", ("ジャンゴ",)),
    ("Flutter", ("フラッター",)),
    ("Figma", ("フィグマ",)),
    ("Notion", ("ノーション",)),
]


def _params(cases: list[tuple[str, tuple[str, ...]]]) -> list[object]:
    return [pytest.param(name, readings, id=name) for name, readings in cases]


def _check(frontend: Frontend, name: str, readings: tuple[str, ...]) -> None:
    text = f"{name}を使う。"
    wanted = [expected(r + "ヲツカウ") for r in readings]
    assert ours(frontend, text) in wanted, f"{name}: read {frontend.normalize(text)}"


@pytest.mark.parametrize(("name", "readings"), _params(LEARNED))
def test_tech_names_e2k_and_openjtalk_misread(
    natural_frontend: Frontend, name: str, readings: tuple[str, ...]
) -> None:
    _check(natural_frontend, name, readings)


@pytest.mark.parametrize(("name", "readings"), _params(KEPT))
def test_tech_names_read_right_before_stay_right(
    natural_frontend: Frontend, name: str, readings: tuple[str, ...]
) -> None:
    _check(natural_frontend, name, readings)


@pytest.mark.parametrize(
    ("text", "kana"),
    [("Node.jsで書く", "ノードジェイエスデカク"), ("Vue.jsで書く", "ビュージェイエスデカク")],
)
def test_a_library_name_with_a_dot_paused_at_the_dot(
    natural_frontend: Frontend, text: str, kana: str
) -> None:
    """Node.js was ノード、ジェイエス, with a pause: the dot was read as a full stop."""
    phones = natural_frontend.g2p(text).phones
    assert "." not in phones
    assert ours(natural_frontend, text) == expected(kana)


def test_a_dot_stays_in_a_site_and_a_longer_dotted_name(natural_frontend: Frontend) -> None:
    assert "." in natural_frontend.normalize("example.comを見る")
    assert "." in natural_frontend.normalize("Node.js.orgを見る")


def test_the_names_read_the_same_in_the_sbv2_reading(frontend: Frontend) -> None:
    """The lexicon is read before either dictionary sees the text."""
    _check(frontend, "Raspberry Pi", ("ラズベリーパイ",))
    _check(frontend, "Nginx", ("エンジンエックス",))
