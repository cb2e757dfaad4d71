"""Writing a synthetic DeBERTa-v2 folder: config, seeded weights and tokenizer files.

:func:`make_bert` writes a folder that ``transformers`` loads like
``ku-nlp/deberta-v2-large-japanese-char-wwm`` (``"full"``) or like the tiny
fixture's model (``"tiny"``), with a character-level Japanese vocabulary from
:func:`vocab_characters`. Needs ``torch`` and ``transformers`` (the
``yomiage[torch]`` extra), imported when called.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from yomiage.devtools.sizes import Size, check_seed, check_size

__all__ = ["bert_config", "make_bert", "vocab_characters"]


def bert_config(size: Size) -> dict[str, Any]:
    """``config.json`` values of the DeBERTa-v2 stand-in.

    ``"full"`` has the architecture of ``ku-nlp/deberta-v2-large-japanese-char-wwm``
    (spec §3.1); ``"tiny"`` that of the tiny fixture (hidden 64, 4 layers).
    """
    check_size(size)
    hidden, layers, heads, inter, vocab = (
        (1024, 24, 16, 4096, 22012) if size == "full" else (64, 4, 4, 128, 3349)
    )
    return {
        "architectures": ["DebertaV2ForMaskedLM"],
        "model_type": "deberta-v2",
        "attention_head_size": hidden // heads,
        "attention_probs_dropout_prob": 0.1,
        "conv_act": "gelu",
        "conv_kernel_size": 3,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": inter,
        "layer_norm_eps": 1e-07,
        "max_position_embeddings": 512,
        "max_relative_positions": -1,
        "norm_rel_ebd": "layer_norm",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "pad_token_id": 0,
        "pooler_dropout": 0,
        "pooler_hidden_act": "gelu",
        "pooler_hidden_size": hidden,
        "pos_att_type": ["p2c", "c2p"],
        "position_biased_input": False,
        "position_buckets": 256,
        "relative_attention": True,
        "share_att_key": True,
        "tie_word_embeddings": True,
        "type_vocab_size": 0,
        "vocab_size": vocab,
    }


_SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")


def _code_points(first: int, last: int) -> Iterator[str]:
    return (chr(c) for c in range(first, last + 1))


def vocab_characters(count: int) -> list[str]:
    """``count`` distinct single characters for a character-level Japanese vocabulary.

    In order: printable ASCII, hiragana, katakana, Japanese and general
    punctuation, full-width and half-width forms, Greek, a few symbols, then CJK
    ideographs from U+4E00 (and Extension A from U+3400 once U+9FFF is reached).
    Whitespace never appears, since the tokenizer splits on it.
    """
    base = [
        *_code_points(0x21, 0x7E),  # ASCII
        *_code_points(0x3041, 0x3096),  # hiragana ぁ..ゖ
        *_code_points(0x309D, 0x309E),  # ゝゞ
        *_code_points(0x30A1, 0x30FA),  # katakana ァ..ヺ
        *_code_points(0x30FB, 0x30FE),  # ・ーヽヾ
        *_code_points(0x3001, 0x3003),  # 、。〃
        *_code_points(0x3005, 0x3007),  # 々〆〇
        *_code_points(0x3008, 0x301F),  # brackets, 〒〓, 〜, quotation marks
        *"‐–—―‖‘’“”†‡‥…‰′″※‼⁇⁈⁉",
        *_code_points(0xFF01, 0xFF5E),  # full-width ASCII
        *_code_points(0xFF61, 0xFF9F),  # half-width punctuation and katakana
        *_code_points(0x0391, 0x03A1),  # Greek capitals (U+03A2 is unassigned)
        *_code_points(0x03A3, 0x03A9),
        *_code_points(0x03B1, 0x03C9),  # Greek small letters
        *"¢£¥§¨¬°±´¶×÷",
        *"←↑→↓⇒⇔∀∂∃∇∈∋∑−√∝∞∠∧∨∩∪∫∴∵≒≠≡≦≧≪≫⊂⊃⊆⊇",
        *"─│┌┐└┘├┤┬┴┼■□▲△▼▽◆◇○◎●★☆♀♂♪♭♯",
    ]
    ideographs = [*_code_points(0x4E00, 0x9FFF), *_code_points(0x3400, 0x4DBF)]
    chars = base + ideographs
    if not 0 <= count <= len(chars):
        raise ValueError(f"count must be between 0 and {len(chars)}, not {count}")
    return chars[:count]


def _tokenizer_files(vocab_size: int) -> dict[str, str]:
    """vocab.txt, tokenizer_config.json and special_tokens_map.json, as text."""
    special = {
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "unk_token": "[UNK]",
        "pad_token": "[PAD]",
        "mask_token": "[MASK]",
    }
    tokenizer = {
        "tokenizer_class": "BertJapaneseTokenizer",
        "word_tokenizer_type": "basic",
        "subword_tokenizer_type": "character",
        "do_lower_case": False,
        "do_word_tokenize": True,
        "do_subword_tokenize": True,
        **special,
        "model_max_length": 512,
    }
    tokens = [*_SPECIAL_TOKENS, *vocab_characters(vocab_size - len(_SPECIAL_TOKENS))]
    return {
        "vocab.txt": "\n".join(tokens) + "\n",
        "tokenizer_config.json": json.dumps(tokenizer, indent=2) + "\n",
        "special_tokens_map.json": json.dumps(special, indent=2) + "\n",
    }


def make_bert(out_dir: Path, size: Size, seed: int) -> Path:
    """Write a seeded random DeBERTa-v2 masked-LM folder with its tokenizer files.

    It loads with ``transformers.DebertaV2Model.from_pretrained(out_dir,
    local_files_only=True)`` (and ``DebertaV2ForMaskedLM`` / ``AutoTokenizer``).
    Weights use transformers' own initialisation under ``torch.manual_seed(seed)``
    (the caller's torch RNG state is restored afterwards). The ``"full"`` model
    is stored in float16, as upstream stores it, which halves its size to about
    0.7 GB; loaders cast to float32. ``"tiny"`` is float32. Equal arguments give
    byte-identical files with the same transformers version (its version number
    is written into ``config.json``).
    """
    check_size(size)
    check_seed(seed)
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "writing a synthetic BERT needs torch and transformers: "
            "pip install torch==2.13.0 'yomiage[torch]' (from a checkout: '.[torch]')"
        ) from exc

    values = bert_config(size)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = transformers.DebertaV2Config(**values)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model: Any = transformers.DebertaV2ForMaskedLM(config)
    if size == "full":
        model = model.to(torch.float16)
    model.save_pretrained(str(out_dir))
    for file_name, text in _tokenizer_files(int(values["vocab_size"])).items():
        (out_dir / file_name).write_text(text, encoding="utf-8")
    return out_dir
