"""The plain-Python CharTokenizer gives the ``tokenizers`` library's ids for any text.

yomiage dropped the library from its run-time dependencies (issue 49, item 19: with
huggingface_hub and the six packages it brings, 37.8 MiB of a 524 MiB user install).
These tests build the library's pipeline the way yomiage used to and compare: every
code point, random text from all of Unicode (hypothesis, derandomised), JSUT's sentences, the
real 22,012-entry vocabulary when ``/tmp/full-bundle`` has it, batches with
padding, and the tokenizer.json files each side writes.
"""

from __future__ import annotations

import functools
import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES
from yomiage.bert import CharTokenizer
from yomiage.errors import ModelLoadError

tokenizers = pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[1]
TINY_VOICE_JSON = ROOT / "tests" / "data" / "voices" / "tiny" / "bert" / "tokenizer.json"
FULL_JSON = Path("/tmp/full-bundle/bert/tokenizer.json")
FIXTURE_VOCAB = FIXTURES / "sbv2_tiny" / "bert" / "tokenizer" / "vocab.txt"
FIXTURE_NFKC_JSON = FIXTURES / "sbv2_tiny" / "bert" / "tokenizer_json" / "tokenizer.json"
JSUT = FIXTURES / "jsut" / "basic5000_0001-2500.json"

# Every kind of character whose handling differs somewhere between Python, Rust
# and Unicode versions, in small groups so that random text draws from each.
EDGE_GROUPS = (
    # C0/C1 controls (dropped, or whitespace: tab, LF, CR; U+000B/C and U+0085 dropped)
    "\x00\x01\x07\x08\t\n\x0b\x0c\r\x0e\x1c\x1d\x1e\x1f\x7f\x80\x85\x9f",
    # format characters: the crate's Unicode 8.0 Cf table, and later ones it keeps
    "\xad\u0600\u061c\u06dd\u070f\u08e2\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202e"
    "\u2060\u2066\ufeff\ufff9\U000110bd\U000110cd\U00013430\U0001bca0\U0001d173\U000e0001",
    # whitespace kinds (Rust's char::is_whitespace), and look-alikes that are not
    " \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\u180e\u200b\ufeff",
    # U+FFFD (dropped), other specials, noncharacters, private use (dropped)
    "\ufffd\ufffc\ufffe\uffff\ue000\uf8ff\U000e0041\U000f0000\U0010fffd",
    # combining marks of many classes, and letters they compose with
    "\u0300\u0301\u0308\u0323\u0334\u0345\u093c\u05b0\u3099\u309a\u1df6\u08d3",
    "eaAoOuIn\u0915\u1100\u1161\u11a8\uac00かカｶはﾊ",
    # NFKC expansions and full-/half-width forms
    "㍿ﬁ½①⑳㈱㌔¨¯´¸˘゛゜ＡＢＣｚ１２３！？ｶﾞﾊﾟｧｰ･",
    # newer than the crate's Unicode 9.0 tables (NFKC leaves them, or does not reorder)
    "㋿\U0001f16c\U0001fbf0\ua7f2\U00010781\U00011935\U00011930\U0001f97a\u1df6\u08d3",
    # ordinary Japanese
    "あいうえおがぱゃっー。、「」漢字今日は天気😀",
)
EDGE_CHARACTERS = "".join(EDGE_GROUPS)
SPECIAL_STRINGS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UN", "K]", "[", "]"]


def _random_text(rng: random.Random) -> str:
    """Up to 60 pieces: any code point, an edge character, or a special-token string.

    Drawn with a Random from hypothesis: its own choices favour the first items of
    a list, which would leave most edge characters out.
    """
    pieces = []
    for _ in range(rng.randrange(61)):
        kind = rng.random()
        if kind < 0.3:
            pieces.append(chr(rng.choice(ALL_CODE_POINTS)))
        elif kind < 0.4:
            pieces.append(chr(rng.randrange(0x3000)))
        elif kind < 0.95:
            pieces.append(rng.choice(rng.choice(EDGE_GROUPS)))
        else:
            pieces.append(rng.choice(SPECIAL_STRINGS))
    return "".join(pieces)


def _library_pipeline(vocab: dict[str, int], *, clean_text: bool = True) -> Any:
    """The pipeline yomiage built with the library before it dropped it."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    nfkc = normalizers.NFKC()
    tokenizer.normalizer = (
        normalizers.Sequence(
            [
                normalizers.BertNormalizer(
                    clean_text=True,
                    handle_chinese_chars=False,
                    strip_accents=False,
                    lowercase=False,
                ),
                nfkc,
            ]
        )
        if clean_text
        else nfkc
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex("."), behavior="isolated")]
    )
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    special = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    tokenizer.add_special_tokens([t for t in special if t in vocab])
    tokenizer.enable_padding(direction="right", pad_id=vocab["[PAD]"], pad_token="[PAD]")
    return tokenizer


def _library_pieces(*, clean_text: bool) -> Callable[[str], list[str]]:
    """The library's characters before the vocabulary lookup."""
    from tokenizers import Regex, normalizers, pre_tokenizers

    steps = [normalizers.NFKC()]
    if clean_text:
        bert = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False
        )
        steps.insert(0, bert)
    normalizer = normalizers.Sequence(steps)
    pre = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex("."), behavior="isolated")]
    )
    return lambda text: [p for p, _ in pre.pre_tokenize_str(normalizer.normalize_str(text))]


def _json_files() -> list[Path]:
    """Every tokenizer.json at hand: the committed voice's, the real one, the NFKC-only one."""
    return [p for p in (TINY_VOICE_JSON, FULL_JSON, FIXTURE_NFKC_JSON) if p.is_file()]


@functools.cache
def _pairs() -> list[tuple[CharTokenizer, Any]]:
    """(ours, the library's) for each tokenizer.json and for the old from_vocab pipeline."""
    found = [
        (CharTokenizer.from_file(p), tokenizers.Tokenizer.from_file(str(p))) for p in _json_files()
    ]
    vocab = (
        json.loads(FULL_JSON.read_text("utf-8"))["model"]["vocab"] if FULL_JSON.is_file() else None
    )
    vocab = vocab or json.loads(TINY_VOICE_JSON.read_text("utf-8"))["model"]["vocab"]
    found.append((CharTokenizer(vocab), _library_pipeline(vocab)))
    if FIXTURE_VOCAB.is_file():
        ours = CharTokenizer.from_vocab(FIXTURE_VOCAB)
        found.append((ours, _library_pipeline(dict(ours.vocab))))
    return found


def _chunks(code_points: list[int], size: int) -> list[list[int]]:
    return [code_points[i : i + size] for i in range(0, len(code_points), size)]


ALL_CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def test_every_code_point_becomes_the_librarys_characters() -> None:
    """All 1,112,064 code points, side by side (so marks meet their neighbours);
    the slow test below takes them one at a time, and without clean_text."""
    from yomiage.bert.normalizer import characters

    library = _library_pieces(clean_text=True)
    for chunk in _chunks(ALL_CODE_POINTS, 4096):
        text = "".join(map(chr, chunk))
        if characters(text) != library(text):
            wrong = [c for c in chunk if characters(chr(c)) != library(chr(c))]
            pytest.fail(f"{[hex(c) for c in wrong[:20]]} or their order differ")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("before", "after"),
    [("", ""), ("e", "\u0301"), ("a\u0301", "\u0334"), ("\u0915", "\u093c"), ("\u3099", "\u0345")],
)
def test_every_code_point_between_marks_becomes_the_librarys_characters(
    before: str, after: str
) -> None:
    """Each code point alone between a letter and marks: is it dropped (the marks
    compose), a space (they do not), decomposed, or reordered by its combining class?"""
    from yomiage.bert.normalizer import characters

    for clean in (True, False):
        library = _library_pieces(clean_text=clean)
        for chunk in _chunks(ALL_CODE_POINTS, 2048):
            text = " ".join(before + chr(c) + after for c in chunk)
            if characters(text, clean=clean) != library(text):
                wrong = [
                    hex(c)
                    for c in chunk
                    if characters(before + chr(c) + after, clean=clean)
                    != library(before + chr(c) + after)
                ]
                pytest.fail(f"clean_text={clean}: {wrong[:20]}")


@settings(max_examples=1500, derandomize=True, database=None, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_random_text_gives_the_librarys_ids(rng: random.Random) -> None:
    text = _random_text(rng)
    for ours, library in _pairs():
        assert ours.encode(text) == library.encode(text).ids, repr(text)


def test_edge_characters_one_by_one_give_the_librarys_ids() -> None:
    texts = [f"a{c}b" for c in EDGE_CHARACTERS] + [f"e{c}\u0301" for c in EDGE_CHARACTERS]
    texts += [EDGE_CHARACTERS, *SPECIAL_STRINGS, "[UN[UNK]K]", "e[UNK]\u0301", "[MASK][MASK]"]
    for ours, library in _pairs():
        assert [ours.encode(t) for t in texts] == [library.encode(t).ids for t in texts]


def test_jsut_sentences_give_the_librarys_ids() -> None:
    if not JSUT.is_file():
        pytest.skip(f"{JSUT} is not here")
    texts = [case["text"] for case in json.loads(JSUT.read_text("utf-8"))]
    assert len(texts) > 2400
    for ours, library in _pairs():
        assert [ours.encode(t) for t in texts] == [library.encode(t).ids for t in texts]


def test_batches_pad_like_the_library() -> None:
    texts = ["こんにちは。", "", "ｶﾞｷﾞ ㍿\u3000[UNK]", "今日はいい天気ですね、本当に。", "a\x00b"]
    for ours, library in _pairs():
        ids, mask = ours.encode_batch(texts)
        encodings = library.encode_batch(texts)
        np.testing.assert_array_equal(ids, [e.ids for e in encodings])
        np.testing.assert_array_equal(mask, [e.attention_mask for e in encodings])
        assert ours.vocab_size == library.get_vocab_size(with_added_tokens=True)


@pytest.mark.parametrize("clean_text", [True, False])
def test_each_side_reads_the_others_tokenizer_json(tmp_path: Path, clean_text: bool) -> None:
    vocab = json.loads(TINY_VOICE_JSON.read_text("utf-8"))["model"]["vocab"]
    written_by_us = CharTokenizer(vocab, clean_text=clean_text).save(tmp_path / "ours.json")
    written_by_library = tmp_path / "library.json"
    _library_pipeline(vocab, clean_text=clean_text).save(str(written_by_library))
    texts = ["e\x0b\u0301 ㍿ [UNK]か\u309b", EDGE_CHARACTERS, "今日は\u00a0晴れ"]
    expected = [_library_pipeline(vocab, clean_text=clean_text).encode(t).ids for t in texts]
    library = tokenizers.Tokenizer.from_file(str(written_by_us))
    assert [library.encode(t).ids for t in texts] == expected
    assert library.encode_batch(["あ", "あい"])[0].ids == [1, vocab["あ"], 2, 0]
    ours = CharTokenizer.from_file(written_by_library)
    assert [ours.encode(t) for t in texts] == expected
    assert json.loads(written_by_us.read_text("utf-8")) == json.loads(
        written_by_library.read_text("utf-8")
    )


def test_lone_surrogates_are_unknown_characters() -> None:
    """The library refused them (TypeError); they are [UNK] now, never a crash."""
    ours = CharTokenizer.from_file(TINY_VOICE_JSON)
    assert ours.encode("あ\ud800い\udfff") == [1, ours.vocab["あ"], 3, ours.vocab["い"], 3, 2]


def test_tokenizer_works_without_the_tokenizers_library() -> None:
    """A user install has no ``tokenizers``: loading and encoding must not import it."""
    script = (
        "import sys; sys.modules['tokenizers'] = None\n"
        "from yomiage.bert import CharTokenizer\n"
        f"tok = CharTokenizer.from_dir({str(TINY_VOICE_JSON.parent)!r})\n"
        "ids, mask = tok.encode_batch(['こんにちは。', 'あ'])\n"
        "print(ids.tolist(), mask.tolist())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    ours = CharTokenizer.from_file(TINY_VOICE_JSON)
    ids, mask = ours.encode_batch(["こんにちは。", "あ"])
    assert result.stdout.strip() == f"{ids.tolist()} {mask.tolist()}"


def _edited(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    data = json.loads(TINY_VOICE_JSON.read_text("utf-8"))
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param(
            lambda d: d["normalizer"]["normalizers"][0].update(lowercase=True),
            "normalizer",
            id="lowercase",
        ),
        pytest.param(lambda d: d["normalizer"].update(type="NFC"), "normalizer", id="NFC"),
        pytest.param(lambda d: d.update(normalizer=None), "normalizer", id="no-normalizer"),
        pytest.param(
            lambda d: d["pre_tokenizer"]["pretokenizers"].pop(), "pre_tokenizer", id="no-split"
        ),
        pytest.param(
            lambda d: d["pre_tokenizer"]["pretokenizers"][1]["pattern"].update(Regex=".."),
            "pre_tokenizer",
            id="split-pairs",
        ),
        pytest.param(
            lambda d: d.update(truncation={"max_length": 512}), "truncation", id="truncation"
        ),
        pytest.param(lambda d: d["model"].update(type="WordPiece"), "WordPiece", id="wordpiece"),
        pytest.param(lambda d: d["model"].update(unk_token="[MASK]"), "unk_token", id="unk"),
        pytest.param(lambda d: d["model"]["vocab"].pop("[SEP]"), r"\[SEP\]", id="no-sep"),
        pytest.param(lambda d: d["added_tokens"][0].update(lstrip=True), "lstrip", id="lstrip"),
        pytest.param(
            lambda d: d["added_tokens"][0].update(normalized=True), "normalized", id="normalized"
        ),
        pytest.param(lambda d: d["added_tokens"][1].update(id=7), "added token", id="added-id"),
        pytest.param(
            lambda d: d["post_processor"]["single"].pop(), "post_processor", id="template"
        ),
        pytest.param(
            lambda d: d["post_processor"]["special_tokens"]["[CLS]"].update(ids=[9]),
            r"\[CLS\] ids",
            id="cls-id",
        ),
    ],
)
def test_other_pipelines_are_refused_naming_the_difference(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], named: str
) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_edited(change)), encoding="utf-8")
    with pytest.raises(ModelLoadError, match=named):
        CharTokenizer.from_file(path)
