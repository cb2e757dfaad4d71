"""BERT tokenizer and features must reproduce SBV2's (spec §3, fixtures sbv2_tiny/bert)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES, reference_cases, require_fixtures
from yomiage.bert import CharTokenizer, expand_to_phones
from yomiage.errors import ModelLoadError

TINY = FIXTURES / "sbv2_tiny"
BERT_MODEL = TINY / "bert" / "model"
BERT_TOKENIZER = TINY / "bert" / "tokenizer"
FIXTURE_TOKENIZER_JSON = TINY / "bert" / "tokenizer_json" / "tokenizer.json"

# Edge cases checked against transformers' BertJapaneseTokenizer: NBSP, tab, newline,
# zero-width space, control characters, combining accents, literal special tokens,
# emoji, half-width kana, full-width Latin, byte-order mark, ideographic space.
EDGE_TEXTS = [
    "今日は 良い天気！",
    "ｶﾀｶﾅ①",
    "a\u00a0b\tc\nd",
    "x\u200by",
    "x\x00y\x07z",
    "e\u0301",
    "[UNK]は[MASK]",
    "A[SEP]B",
    "😀あ",
    "",
    "   ",
    "ＡＢＣ１２３",
    "ﾊﾟﾋﾟﾌﾟ",
    "\ufeffあ",
    "あ\u3000い",
]


def _tiny_cases() -> list[dict[str, Any]]:
    path = TINY / "cases" / "cases.json"
    cases: list[dict[str, Any]] = (
        json.loads(path.read_text("utf-8"))["cases"] if path.exists() else []
    )
    return cases


def _fixture_strings() -> list[str]:
    """Raw and BERT texts of the g2p reference set and of the tiny-model cases."""
    path = FIXTURES / "g2p" / "g2p_cases.json"
    g2p = json.loads(path.read_text("utf-8"))["cases"] if path.exists() else []
    strings = []
    for case in [*g2p, *_tiny_cases()]:
        strings += [s for s in (case.get("text"), case.get("bert_text")) if s]
    return strings


@pytest.fixture(scope="module")
def tokenizer() -> CharTokenizer:
    require_fixtures()
    return CharTokenizer.from_dir(BERT_TOKENIZER)


# --------------------------------------------------------------------- tokenizer


@pytest.mark.parametrize("case", reference_cases("sbv2_tiny/cases/cases.json"))
def test_token_ids_match_reference(tokenizer: CharTokenizer, case: dict[str, Any]) -> None:
    assert tokenizer.encode(case["bert_text"]) == case["token_ids"]
    stored = np.load(TINY / "cases" / f"{case['id']}.npz")["token_ids"]
    assert stored.tolist() == case["token_ids"]


def test_ids_match_fixture_tokenizer_json_on_all_fixture_strings(tokenizer: CharTokenizer) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    strings = _fixture_strings()
    assert len(strings) > 300
    reference = tokenizers.Tokenizer.from_file(str(FIXTURE_TOKENIZER_JSON))
    for text in strings:
        assert tokenizer.encode(text) == reference.encode(text).ids, text
    # The fixture's own tokenizer.json, loaded through from_dir, agrees as well.
    from_json = CharTokenizer.from_dir(FIXTURE_TOKENIZER_JSON.parent)
    assert [from_json.encode(t) for t in strings] == [tokenizer.encode(t) for t in strings]


def test_ids_match_transformers_bert_japanese(tokenizer: CharTokenizer) -> None:
    transformers = pytest.importorskip("transformers")
    reference = transformers.AutoTokenizer.from_pretrained(
        str(BERT_TOKENIZER), local_files_only=True
    )
    for text in [*EDGE_TEXTS, *_fixture_strings()]:
        assert tokenizer.encode(text) == reference(text)["input_ids"], repr(text)


def test_character_level_behaviour(tokenizer: CharTokenizer) -> None:
    vocab = tokenizer.vocab
    assert tokenizer.encode("") == [1, 2]
    # NFKC folds half-width kana and circled digits; whitespace is dropped.
    assert tokenizer.encode("ｶﾀｶﾅ①") == [1, *(vocab[c] for c in "カタカナ1"), 2]
    assert tokenizer.encode("a b\tc") == [1, vocab["a"], vocab["b"], vocab["c"], 2]
    assert tokenizer.encode("[UNK]") == [1, 3, 2]
    assert (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert tokenizer.vocab_size == 3349


def test_encode_batch_pads_right(tokenizer: CharTokenizer) -> None:
    texts = ["こんにちは。", "あ", "今日はいい天気ですね"]
    ids, mask = tokenizer.encode_batch(texts)
    assert ids.dtype == np.int64 and mask.dtype == np.int64
    assert ids.shape == mask.shape == (3, 12)
    for row, text in enumerate(texts):
        expected = tokenizer.encode(text)
        n = len(expected)
        assert ids[row, :n].tolist() == expected
        assert (ids[row, n:] == 0).all()
        assert mask[row].tolist() == [1] * n + [0] * (12 - n)
    empty_ids, empty_mask = tokenizer.encode_batch([])
    assert empty_ids.shape == empty_mask.shape == (0, 0)


def test_vocab_build_save_reload_round_trip(tokenizer: CharTokenizer, tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    built = CharTokenizer.from_vocab(BERT_TOKENIZER / "vocab.txt")
    saved = built.save(tmp_path)
    assert saved == tmp_path / "tokenizer.json"
    reloaded = CharTokenizer.from_dir(tmp_path)
    raw = tokenizers.Tokenizer.from_file(str(saved))
    for text in [*EDGE_TEXTS, *_fixture_strings()]:
        expected = built.encode(text)
        assert reloaded.encode(text) == expected == raw.encode(text).ids == tokenizer.encode(text)
    assert reloaded.vocab_size == built.vocab_size
    assert raw.encode_batch(["あ", "あい"])[0].ids == [1, reloaded.encode("あ")[1], 2, 0]


def test_from_dir_skips_wordpiece_tokenizer_json(tmp_path: Path) -> None:
    """SBV2's own tokenizer.json is WordPiece and maps words to [UNK]; vocab.txt wins."""
    tokenizers = pytest.importorskip("tokenizers")
    models, pre_tokenizers = tokenizers.models, tokenizers.pre_tokenizers
    vocab = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "ア", "イ", "ウ"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    wordpiece = tokenizers.Tokenizer(
        models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]")
    )
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.save(str(tmp_path / "tokenizer.json"))
    assert CharTokenizer.from_dir(tmp_path).encode("アイウ") == [1, 5, 6, 7, 2]
    (tmp_path / "vocab.txt").unlink()
    with pytest.raises(ModelLoadError, match=r"tokenizer\.json"):
        CharTokenizer.from_dir(tmp_path)


def test_tokenizer_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="nowhere"):
        CharTokenizer.from_dir(tmp_path / "nowhere")
    with pytest.raises(ModelLoadError, match=str(tmp_path)):
        CharTokenizer.from_dir(tmp_path)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[CLS]\nあ\n", encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"vocab\.txt.*\[SEP\]"):
        CharTokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"tokenizer\.json"):
        CharTokenizer.from_file(tmp_path / "tokenizer.json")


def test_full_size_vocab_loads(tmp_path: Path) -> None:
    """A vocabulary of the real size loads with every id where it belongs (how fast it
    loads is a benchmark's question, not a test's)."""
    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    chars = [chr(c) for c in range(0x4E00, 0x4E00 + 22_007)]  # CJK ideographs: distinct
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(specials + chars) + "\n", encoding="utf-8")
    tok = CharTokenizer.from_vocab(path)
    assert tok.vocab_size == 22_012
    assert tok.encode(chars[0] + chars[-1]) == [1, 5, 22_011, 2]


# --------------------------------------------------------------------- features


def test_expand_to_phones_shapes() -> None:
    hidden = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = expand_to_phones(hidden, [1, 0, 2])
    assert out.shape == (4, 3) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, hidden[[0, 2, 2]].T)
    assert expand_to_phones(hidden, np.array([2, 2, 2])).shape == (4, 6)
    assert expand_to_phones(np.zeros((0, 4), np.float32), []).shape == (4, 0)
    with pytest.raises(ValueError, match="2 entries but there are 3"):
        expand_to_phones(hidden, [1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        expand_to_phones(hidden, [1, -1, 2])
    with pytest.raises(ValueError, match=r"\[n_tok, C\]"):
        expand_to_phones(hidden[0], [1, 1, 1, 1])


# ------------------------------------------------------------------------ torch


@pytest.fixture(scope="module")
def torch_bert() -> Any:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    require_fixtures()
    from yomiage.bert.torch_bert import TorchBert

    return TorchBert(BERT_MODEL, BERT_TOKENIZER, device="cpu")


@pytest.mark.parametrize("case", reference_cases("sbv2_tiny/cases/cases.json"))
def test_torch_bert_matches_reference(torch_bert: Any, case: dict[str, Any]) -> None:
    from yomiage.bert.torch_bert import expand_to_phones_torch

    ref = np.load(TINY / "cases" / f"{case['id']}.npz")
    (hidden,) = torch_bert.features([case["bert_text"]])
    assert tuple(hidden.shape) == ref["bert_hidden_tokens"].shape
    np.testing.assert_allclose(hidden.numpy(), ref["bert_hidden_tokens"], rtol=0, atol=1e-4)
    phone = expand_to_phones(hidden.numpy(), case["word2ph_blank"])
    assert phone.shape == ref["bert_phone"].shape
    np.testing.assert_allclose(phone, ref["bert_phone"], rtol=0, atol=1e-4)
    phone_torch = expand_to_phones_torch(hidden, case["word2ph_blank"])
    np.testing.assert_array_equal(phone_torch.numpy(), phone)


def test_torch_bert_batched_equals_unbatched(torch_bert: Any) -> None:
    texts = [c["bert_text"] for c in _tiny_cases()] + ["あ", ""]
    batched = torch_bert.features(texts)
    assert len(batched) == len(texts)
    assert len({b.shape[0] for b in batched}) > 3  # really different lengths
    for text, got in zip(texts, batched, strict=True):
        (alone,) = torch_bert.features([text])
        assert got.shape == alone.shape == (len(torch_bert.tokenizer.encode(text)), 64)
        np.testing.assert_allclose(got.numpy(), alone.numpy(), rtol=0, atol=1e-5)
    assert torch_bert.features([]) == []
    assert torch_bert.hidden_size == 64


def test_torch_bert_bad_folders(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    require_fixtures()
    from yomiage.bert.torch_bert import TorchBert

    with pytest.raises(ModelLoadError, match="missing"):
        TorchBert(tmp_path / "missing", BERT_TOKENIZER)
    with pytest.raises(ModelLoadError, match=r"config\.json"):
        TorchBert(tmp_path, BERT_TOKENIZER)
    config = json.loads((BERT_MODEL / "config.json").read_text("utf-8"))
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ModelLoadError, match=r"model\.safetensors"):
        TorchBert(tmp_path, BERT_TOKENIZER)
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00garbage!")
    with pytest.raises(ModelLoadError, match=r"model\.safetensors"):
        TorchBert(tmp_path, BERT_TOKENIZER)
    (tmp_path / "config.json").write_text(
        json.dumps({**config, "model_type": "bert"}), encoding="utf-8"
    )
    with pytest.raises(ModelLoadError, match="model_type"):
        TorchBert(tmp_path, BERT_TOKENIZER)
    # Weights that do not fill the configured encoder (8 layers, of which the
    # first 6 are needed for hidden_states[-3]; 4 stored).
    (tmp_path / "config.json").write_text(
        json.dumps({**config, "num_hidden_layers": 8}), encoding="utf-8"
    )
    (tmp_path / "model.safetensors").write_bytes((BERT_MODEL / "model.safetensors").read_bytes())
    with pytest.raises(ModelLoadError, match=r"does not match.*encoder\.layer\.[45]"):
        TorchBert(tmp_path, BERT_TOKENIZER)
    # No tokenizer folder given: the model folder has no tokenizer files.
    with pytest.raises(ModelLoadError, match="neither"):
        TorchBert(BERT_MODEL)
