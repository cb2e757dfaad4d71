"""Character-level BERT tokenizer that needs only the ``tokenizers`` library.

SBV2 JP-Extra feeds its text to ``ku-nlp/deberta-v2-large-japanese-char-wwm``,
whose reference tokenizer (transformers' ``BertJapaneseTokenizer``, "basic"
words + "character" sub-words, no lower-casing) gives ``[CLS]``, one id per
NFKC-normalised character (unknown characters -> ``[UNK]``, whitespace
dropped) and ``[SEP]`` (spec §3.1). The pipeline built here gives the same ids
without importing transformers or torch, and loads in about 10 ms for the real
22,012-entry vocabulary.

Note that the ``tokenizer.json`` shipped in SBV2's own BERT folder is a
WordPiece tokenizer that turns every multi-character word into ``[UNK]``;
:meth:`CharTokenizer.from_dir` detects such a file and falls back to
``vocab.txt``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel

from yomiage.atomic import write_atomic
from yomiage.errors import ModelLoadError

__all__ = ["SPECIAL_TOKENS", "CharTokenizer"]

_log = logging.getLogger(__name__)

PAD, CLS, SEP, UNK, MASK = "[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"
#: Special tokens of the SBV2 BERT vocabulary (ids 0-4 there, in this order).
SPECIAL_TOKENS: tuple[str, ...] = (PAD, CLS, SEP, UNK, MASK)
_REQUIRED = (PAD, CLS, SEP, UNK)

TOKENIZER_JSON = "tokenizer.json"
VOCAB_TXT = "vocab.txt"

# A tokenizer.json is accepted only if it splits this into [CLS] + 3 pieces + [SEP]
# (the space is dropped). A WordPiece tokenizer without "##" pieces gives fewer.
_PROBE = "アイ ウ"
_PROBE_PIECES = 3


class CharTokenizer:
    """``[CLS]`` + one id per character + ``[SEP]``, identical to SBV2's BERT tokenizer.

    Build one with :meth:`from_dir`, :meth:`from_vocab` or :meth:`from_file`.
    After construction the object is never mutated, so one instance may be
    shared by several threads; :meth:`encode` and :meth:`encode_batch` run in
    the calling thread (no tokenizers thread pool is used, so forking later is
    safe). No truncation is applied: the caller keeps texts within the model's
    512-token limit.
    """

    def __init__(self, tokenizer: Tokenizer, *, source: Path | None = None) -> None:
        """Wrap a ready ``tokenizers.Tokenizer``; prefer the ``from_*`` constructors.

        Raises :class:`~yomiage.errors.ModelLoadError` if a special token is
        missing from the vocabulary or the tokenizer is not character-level.
        """
        where = str(source) if source is not None else "tokenizer"
        ids: dict[str, int] = {}
        for token in _REQUIRED:
            token_id = tokenizer.token_to_id(token)
            if token_id is None:
                raise ModelLoadError(f"{where}: the vocabulary has no {token} token")
            ids[token] = token_id
        self._tokenizer = tokenizer
        self._source = source
        self.pad_id = ids[PAD]
        self.cls_id = ids[CLS]
        self.sep_id = ids[SEP]
        self.unk_id = ids[UNK]
        tokenizer.enable_padding(direction="right", pad_id=self.pad_id, pad_token=PAD)
        if not self._is_char_level():
            raise ModelLoadError(
                f"{where}: not a character-level tokenizer with a [CLS] ... [SEP] template"
            )

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_vocab(cls, vocab_path: str | os.PathLike[str]) -> CharTokenizer:
        """Build the pipeline from a BERT ``vocab.txt`` (one token per line, id = line number).

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

        tokenizer = Tokenizer(WordLevel(vocab, unk_token=UNK))
        tokenizer.normalizer = normalizers.Sequence(
            [
                normalizers.BertNormalizer(
                    clean_text=True,
                    handle_chinese_chars=False,
                    strip_accents=False,
                    lowercase=False,
                ),
                normalizers.NFKC(),
            ]
        )
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.WhitespaceSplit(),
                pre_tokenizers.Split(Regex("."), behavior="isolated"),
            ]
        )
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{CLS} $A {SEP}",
            pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
            special_tokens=[(CLS, vocab[CLS]), (SEP, vocab[SEP])],
        )
        # Registered as special so that a literal "[UNK]" in the text stays one
        # token, as with BertJapaneseTokenizer.
        tokenizer.add_special_tokens([t for t in SPECIAL_TOKENS if t in vocab])
        return cls(tokenizer, source=path)

    @classmethod
    def from_file(cls, json_path: str | os.PathLike[str]) -> CharTokenizer:
        """Load a ``tokenizer.json`` (as written by :meth:`save`).

        Raises :class:`~yomiage.errors.ModelLoadError` if the file is missing,
        unparsable, or not a character-level tokenizer.
        """
        path = Path(json_path)
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception for bad JSON
            raise ModelLoadError(f"cannot load tokenizer {path}: {exc}") from exc
        return cls(tokenizer, source=path)

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

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``tokenizer.json`` atomically and return its path.

        ``path`` is the file to write, or an existing folder to write
        ``tokenizer.json`` into. The file reloads with :meth:`from_file` or
        ``tokenizers.Tokenizer.from_file`` and gives the same ids.
        """
        target = Path(path)
        if target.is_dir():
            target = target / TOKENIZER_JSON
        return write_atomic(target, self._tokenizer.to_str())

    # ----------------------------------------------------------------- encoding

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included (22,012 for the real SBV2 BERT)."""
        return int(self._tokenizer.get_vocab_size(with_added_tokens=True))

    @property
    def backend(self) -> Tokenizer:
        """The wrapped ``tokenizers.Tokenizer`` (do not reconfigure it)."""
        return self._tokenizer

    def encode(self, text: str) -> list[int]:
        """Ids of ``[CLS]`` + each character of ``text`` (NFKC, whitespace dropped) + ``[SEP]``."""
        ids: list[int] = self._tokenizer.encode(text).ids
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

    def _is_char_level(self) -> bool:
        try:
            ids = self.encode(_PROBE)
        except Exception:
            return False
        return len(ids) == _PROBE_PIECES + 2 and ids[0] == self.cls_id and ids[-1] == self.sep_id
