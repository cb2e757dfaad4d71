"""OpenJTalk keeps process-global state; concurrent use must not corrupt output."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from yomiage.text import Frontend

SENTENCES = [
    "今日はいい天気ですね。",
    "円周率は3.14です。",
    "GitHubでJSONを公開した。",
    "電話番号は03-1234-5678です。",
    "彼女は――少し迷ってから――うなずいた。",
    "ーーーそうなんだ。",
    "2024/01/15の10:30に集合。",
    "気象庁によりますと、台風十号は明日の朝にも九州南部に上陸するおそれがあります。",
    "NASAとJAXAが共同で研究を進めている。",
    "ヴェネツィアでゴンドラに乗った。",
    "すごーい！！やったぁ〜！",
    "この宝石は、ひとつ百万円以上のお値段です。",
]


def test_eight_threads_match_sequential(frontend: Frontend) -> None:
    work = SENTENCES * 20
    sequential = [frontend.g2p(t) for t in work]
    with ThreadPoolExecutor(max_workers=8) as pool:
        concurrent = list(pool.map(frontend.g2p, work))
    assert concurrent == sequential


def test_two_frontends_in_threads(frontend: Frontend) -> None:
    other = Frontend(None, reading=frontend.reading)
    work = SENTENCES * 10
    sequential = [frontend.g2p(t) for t in work]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(lambda i: (frontend if i % 2 else other).g2p(work[i]), range(len(work)))
        )
    assert results == sequential
