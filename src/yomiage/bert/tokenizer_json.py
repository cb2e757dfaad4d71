"""``tokenizer.json`` of the character pipeline, read and written without the library.

The file is the ``tokenizers`` library's serialisation. Only the pipeline that
:class:`~yomiage.bert.tokenizer.CharTokenizer` reproduces is accepted: an NFKC
normaliser (optionally after ``BertNormalizer`` with nothing but
``clean_text``), ``WhitespaceSplit`` then a ``Split`` on ``.`` (one piece per
character), a ``WordLevel`` vocabulary with ``[UNK]``, the ``[CLS] $A [SEP]``
template, no truncation, and added tokens matched whole in the raw text. Any
other file is refused with the part that differs, so a tokenizer this module
would misread is never used. ``padding`` and ``decoder`` do not change the ids
and are not checked: ``encode_batch`` always pads right with ``[PAD]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ParsedTokenizer", "parse_tokenizer_json", "tokenizer_json"]

_PAD, _CLS, _SEP, _UNK = "[PAD]", "[CLS]", "[SEP]", "[UNK]"

_NFKC = {"type": "NFKC"}
_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "WhitespaceSplit"},
        {"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated", "invert": False},
    ],
}
_TEMPLATE = [("SpecialToken", _CLS), ("Sequence", "A"), ("SpecialToken", _SEP)]


@dataclass(frozen=True)
class ParsedTokenizer:
    """What a valid ``tokenizer.json`` holds, as ``CharTokenizer``'s constructor takes it."""

    vocab: dict[str, int]
    special_tokens: tuple[str, ...]
    clean_text: bool


def parse_tokenizer_json(data: Any) -> ParsedTokenizer:
    """Check a parsed ``tokenizer.json``; ValueError names the first part that differs."""
    if not isinstance(data, dict):
        raise ValueError(f"the file holds {type(data).__name__}, not a JSON object")
    if data.get("truncation") is not None:
        raise ValueError(f"truncation is {_show(data['truncation'])}, not null")
    vocab = _vocab(data.get("model"))
    clean = _clean_text(data.get("normalizer"))
    if data.get("pre_tokenizer") != _PRE_TOKENIZER:
        raise ValueError(
            f"pre_tokenizer is {_show(data.get('pre_tokenizer'))}, not WhitespaceSplit then"
            " Split(Regex '.', Isolated)"
        )
    _check_template(data.get("post_processor"), vocab)
    return ParsedTokenizer(vocab, _added_tokens(data.get("added_tokens", []), vocab), clean)


def tokenizer_json(
    vocab: Mapping[str, int], *, special_tokens: Iterable[str], clean_text: bool
) -> str:
    """The ``tokenizers`` library's ``tokenizer.json`` for this pipeline (compact, UTF-8 text).

    ``special_tokens`` must all be in ``vocab``; they become added tokens
    matched in the raw text. The library's ``Tokenizer.from_file`` loads the
    result and pads batches as ``encode_batch`` does.
    """
    specials = sorted(set(special_tokens), key=lambda t: vocab[t])
    bert = {
        "type": "BertNormalizer",
        "clean_text": True,
        "handle_chinese_chars": False,
        "strip_accents": False,
        "lowercase": False,
    }
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": {
            "strategy": "BatchLongest",
            "direction": "Right",
            "pad_to_multiple_of": None,
            "pad_id": vocab[_PAD],
            "pad_type_id": 0,
            "pad_token": _PAD,
        },
        "added_tokens": [
            {
                "id": vocab[token],
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for token in specials
        ],
        "normalizer": ({"type": "Sequence", "normalizers": [bert, _NFKC]} if clean_text else _NFKC),
        "pre_tokenizer": _PRE_TOKENIZER,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [_piece(kind, name, 0) for kind, name in _TEMPLATE],
            "pair": [
                *(_piece(kind, name, 0) for kind, name in _TEMPLATE),
                _piece("Sequence", "B", 1),
                _piece("SpecialToken", _SEP, 1),
            ],
            "special_tokens": {
                token: {"id": token, "ids": [vocab[token]], "tokens": [token]}
                for token in (_CLS, _SEP)
            },
        },
        "decoder": None,
        "model": {
            "type": "WordLevel",
            "vocab": dict(sorted(vocab.items(), key=lambda item: item[1])),
            "unk_token": _UNK,
        },
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _piece(kind: str, name: str, type_id: int) -> dict[str, dict[str, Any]]:
    return {kind: {"id": name, "type_id": type_id}}


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def _vocab(model: Any) -> dict[str, int]:
    if not isinstance(model, dict) or model.get("type") != "WordLevel":
        kind = model.get("type") if isinstance(model, dict) else model
        raise ValueError(f"the model is {_show(kind)}, not WordLevel")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in vocab.values()
    ):
        raise ValueError("the WordLevel vocab is not an object of token -> non-negative id")
    if model.get("unk_token") != _UNK:
        raise ValueError(f"the unk_token is {_show(model.get('unk_token'))}, not {_UNK}")
    for token in (_PAD, _CLS, _SEP, _UNK):
        if token not in vocab:
            raise ValueError(f"the vocabulary has no {token} token")
    return vocab


def _clean_text(normalizer: Any) -> bool:
    """``clean_text`` of the accepted normaliser shapes (False for NFKC alone)."""
    steps = normalizer.get("normalizers") if isinstance(normalizer, dict) else None
    if normalizer == _NFKC or steps == [_NFKC]:
        return False
    if (
        isinstance(normalizer, dict)
        and normalizer.get("type") == "Sequence"
        and isinstance(steps, list)
        and len(steps) == 2
        and steps[1] == _NFKC
        and isinstance(steps[0], dict)
        and steps[0].get("type") == "BertNormalizer"
        and isinstance(steps[0].get("clean_text"), bool)
        and steps[0].get("handle_chinese_chars") is False
        and steps[0].get("strip_accents") in (False, None)
        and steps[0].get("lowercase") is False
    ):
        return bool(steps[0]["clean_text"])
    raise ValueError(
        f"the normalizer is {_show(normalizer)}, not NFKC (optionally after BertNormalizer"
        " with handle_chinese_chars, strip_accents and lowercase false)"
    )


def _template_piece(item: Any) -> tuple[str, Any] | None:
    """``{"SpecialToken": {"id": "[CLS]", ...}}`` -> ``("SpecialToken", "[CLS]")``; type ids
    do not change the ids."""
    if not (isinstance(item, dict) and len(item) == 1):
        return None
    [(kind, body)] = item.items()
    return (kind, body.get("id") if isinstance(body, dict) else None)


def _check_template(post: Any, vocab: Mapping[str, int]) -> None:
    single = post.get("single") if isinstance(post, dict) else None
    pieces = [_template_piece(item) for item in single] if isinstance(single, list) else None
    if (
        not isinstance(post, dict)
        or post.get("type") != "TemplateProcessing"
        or pieces != _TEMPLATE
    ):
        raise ValueError(f"the post_processor is {_show(post)}, not the [CLS] $A [SEP] template")
    specials = post.get("special_tokens")
    for token in (_CLS, _SEP):
        entry = specials.get(token) if isinstance(specials, dict) else None
        ids = entry.get("ids") if isinstance(entry, dict) else None
        if ids != [vocab[token]]:
            raise ValueError(
                f"the template's {token} ids are {_show(ids)}, not [{vocab[token]}] as in the vocab"
            )


def _added_tokens(added: Any, vocab: Mapping[str, int]) -> tuple[str, ...]:
    if not isinstance(added, list):
        raise ValueError(f"added_tokens is {_show(added)}, not a list")
    tokens = []
    for entry in added:
        content = entry.get("content") if isinstance(entry, dict) else None
        if not isinstance(content, str) or not content:
            raise ValueError(f"the added token {_show(entry)} has no content")
        flags = [f for f in ("single_word", "lstrip", "rstrip", "normalized") if entry.get(f)]
        if flags:
            raise ValueError(f"the added token {content} sets {', '.join(flags)}")
        if entry.get("id") != vocab.get(content):
            raise ValueError(
                f"the added token {content} has id {_show(entry.get('id'))}, but the vocab"
                f" gives {_show(vocab.get(content))}"
            )
        tokens.append(content)
    return tuple(tokens)
