"""Character-level BERT tokenizer in plain Python (no ``tokenizers`` library).

SBV2 JP-Extra feeds its text to ``ku-nlp/deberta-v2-large-japanese-char-wwm``,
whose reference tokenizer (transformers' ``BertJapaneseTokenizer``, "basic"
words + "character" sub-words, no lower-casing) gives ``[CLS]``, one id per
NFKC-normalised character (unknown characters -> ``[UNK]``, whitespace
dropped) and ``[SEP]`` (spec §3.1). yomiage used to build that pipeline with
the ``tokenizers`` library, which brought huggingface_hub and six more packages
(37.8 MiB of a 524 MiB user install) for a dict lookup per character. This
module gives the same ids for any text (:mod:`yomiage.bert.normalizer` follows
the library's character classes and Unicode version), and reads and writes the
same ``tokenizer.json``.

Note that the ``tokenizer.json`` shipped in SBV2's own BERT folder is a
WordPiece tokenizer that turns every multi-character word into ``[UNK]``;
:meth:`CharTokenizer.from_dir` detects such a file and falls back to
``vocab.txt``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from yomiage.atomic import write_atomic
from yomiage.bert.normalizer import WHITESPACE, clean_text, nfkc
from yomiage.bert.tokenizer_json import parse_tokenizer_json, tokenizer_json
from yomiage.errors import ModelLoadError

__all__ = ["SPECIAL_TOKENS", "CharTokenizer"]

_log = logging.getLogger(__name__)

PAD, CLS, SEP, UNK, MASK = "[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"
#: Special tokens of the SBV2 BERT vocabulary (ids 0-4 there, in this order).
SPECIAL_TOKENS: tuple[str, ...] = (PAD, CLS, SEP, UNK, MASK)
_REQUIRED = (PAD, CLS, SEP, UNK)

TOKENIZER_JSON = "tokenizer.json"
VOCAB_TXT = "vocab.txt"


class CharTokenizer:
    """``[CLS]`` + one id per character + ``[SEP]``, identical to SBV2's BERT tokenizer.

    Build one with :meth:`from_dir`, :meth:`from_vocab` or :meth:`from_file`.
    After construction the object is never mutated, so one instance may be
    shared by several threads; :meth:`encode` and :meth:`encode_batch` run in
    the calling thread (there is no thread pool, so forking later is safe). No
    truncation is applied: the caller keeps texts within the model's 512-token
    limit. A lone surrogate (which the ``tokenizers`` library refused with a
    TypeError) is an unknown character.
    """

    def __init__(
        self,
        vocab: Mapping[str, int],
        *,
        special_tokens: Iterable[str] = SPECIAL_TOKENS,
        clean_text: bool = True,
        source: Path | None = None,
    ) -> None:
        """Tokenize with ``vocab`` (token -> id); prefer the ``from_*`` constructors.

        ``special_tokens`` are matched in the raw text and kept whole (a
        literal ``[UNK]`` is one token, as with ``BertJapaneseTokenizer``);
        those missing from ``vocab`` are skipped. ``clean_text`` is
        ``BertNormalizer(clean_text=...)`` before NFKC. Raises
        :class:`~yomiage.errors.ModelLoadError` if ``[PAD]``, ``[CLS]``,
        ``[SEP]`` or ``[UNK]`` is missing from the vocabulary.
        """
        where = str(source) if source is not None else "tokenizer"
        for token in _REQUIRED:
            if token not in vocab:
                raise ModelLoadError(f"{where}: the vocabulary has no {token} token")
        self._vocab: dict[str, int] = dict(vocab)
        self._source = source
        self._clean = clean_text
        self.pad_id = vocab[PAD]
        self.cls_id = vocab[CLS]
        self.sep_id = vocab[SEP]
        self.unk_id = vocab[UNK]
        specials = sorted({t for t in special_tokens if t in vocab}, key=len, reverse=True)
        self._specials: tuple[str, ...] = tuple(specials)
        # Longest first, so that at one position the longest token wins (the
        # library's leftmost-longest matching).
        self._special_re = (
            re.compile("|".join(re.escape(t) for t in specials)) if specials else None
        )

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_vocab(cls, vocab_path: str | os.PathLike[str]) -> CharTokenizer:
        """Build the tokenizer from a BERT ``vocab.txt`` (one token per line, id = line number).

        As in transformers, a token that appears twice keeps the id of its last line.
        """
        path = Path(vocab_path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"cannot read BERT vocabulary {path}: {exc}") from exc
        # read_text() already folds "\r\n" into "\n" (as transformers' reader does).
        # Split on "\n" only: str.splitlines() would also split on characters such
        # as U+2028 or U+001C, which may be vocabulary entries.
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        vocab = {token: index for index, token in enumerate(lines)}
        missing = [t for t in _REQUIRED if t not in vocab]
        if missing:
            raise ModelLoadError(f"BERT vocabulary {path} lacks {', '.join(missing)}")
        return cls(vocab, source=path)

    @classmethod
    def from_file(cls, json_path: str | os.PathLike[str]) -> CharTokenizer:
        """Load a ``tokenizer.json`` (as written by :meth:`save`).

        Raises :class:`~yomiage.errors.ModelLoadError` if the file is missing,
        unparsable, or not this character-level pipeline (the message names
        the part that differs).
        """
        path = Path(json_path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ModelLoadError(f"cannot load tokenizer {path}: {exc}") from exc
        try:
            parsed = parse_tokenizer_json(data)
        except ValueError as exc:
            raise ModelLoadError(f"{path}: not a character-level tokenizer: {exc}") from exc
        return cls(
            parsed.vocab,
            special_tokens=parsed.special_tokens,
            clean_text=parsed.clean_text,
            source=path,
        )

    @classmethod
    def from_dir(cls, folder: str | os.PathLike[str]) -> CharTokenizer:
        """Load the tokenizer of a BERT folder.

        ``tokenizer.json`` is used when present and character-level; otherwise
        ``vocab.txt``. A folder with neither usable file raises
        :class:`~yomiage.errors.ModelLoadError` naming the folder.
        """
        path = Path(folder)
        if not path.is_dir():
            raise ModelLoadError(f"BERT tokenizer folder not found: {path}")
        json_path, vocab_path = path / TOKENIZER_JSON, path / VOCAB_TXT
        json_error: ModelLoadError | None = None
        if json_path.is_file():
            try:
                return cls.from_file(json_path)
            except ModelLoadError as exc:
                json_error = exc
                _log.debug("ignoring %s: %s", json_path, exc)
        if vocab_path.is_file():
            return cls.from_vocab(vocab_path)
        if json_error is not None:
            raise ModelLoadError(
                f"BERT tokenizer folder {path} has no {VOCAB_TXT} and its {TOKENIZER_JSON}"
                f" is unusable ({json_error})"
            ) from json_error
        raise ModelLoadError(
            f"BERT tokenizer folder {path} has neither {TOKENIZER_JSON} nor {VOCAB_TXT}"
        )

    def to_json(self) -> str:
        """The ``tokenizer.json`` text; the ``tokenizers`` library reads it to the same ids."""
        return tokenizer_json(self._vocab, special_tokens=self._specials, clean_text=self._clean)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``tokenizer.json`` atomically and return its path.

        ``path`` is the file to write, or an existing folder to write
        ``tokenizer.json`` into. The file reloads with :meth:`from_file` or
        ``tokenizers.Tokenizer.from_file`` and gives the same ids.
        """
        target = Path(path)
        if target.is_dir():
            target = target / TOKENIZER_JSON
        return write_atomic(target, self.to_json())

    # ----------------------------------------------------------------- encoding

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included (22,012 for the real SBV2 BERT)."""
        return len(self._vocab)

    @property
    def vocab(self) -> Mapping[str, int]:
        """Token -> id (read-only)."""
        return MappingProxyType(self._vocab)

    def encode(self, text: str) -> list[int]:
        """Ids of ``[CLS]`` + each character of ``text`` (NFKC, whitespace dropped) + ``[SEP]``."""
        ids = [self.cls_id]
        if self._special_re is None:
            self._encode_piece(text, ids)
        else:
            start = 0
            for match in self._special_re.finditer(text):
                self._encode_piece(text[start : match.start()], ids)
                ids.append(self._vocab[match.group()])
                start = match.end()
            self._encode_piece(text[start:], ids)
        ids.append(self.sep_id)
        return ids

    def encode_batch(
        self, texts: Sequence[str]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Encode several texts for one batched model call.

        Returns ``(input_ids, attention_mask)``, both int64 ``[B, L]`` with
        ``L`` the longest encoding; shorter rows are right-padded with the
        ``[PAD]`` id (0 for SBV2) and mask 0. Row ``i`` starts with exactly
        ``encode(texts[i])``. An empty batch gives two ``[0, 0]`` arrays.
        """
        return self.pad([self.encode(t) for t in texts])

    def pad(
        self, encoded: Sequence[Sequence[int]]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """:meth:`encode_batch` of texts already encoded."""
        length = max((len(e) for e in encoded), default=0)
        input_ids = np.full((len(encoded), length), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(encoded), length), dtype=np.int64)
        for row, ids in enumerate(encoded):
            input_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1
        return input_ids, mask

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size}, source={self._source})"

    def _encode_piece(self, text: str, ids: list[int]) -> None:
        """Append the ids of text between special tokens (normalised on its own)."""
        if not text:
            return
        if self._clean:
            text = clean_text(text)
        lookup, unk = self._vocab.get, self.unk_id
        ids.extend(lookup(c, unk) for c in nfkc(text) if c not in WHITESPACE)
