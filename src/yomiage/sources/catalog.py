"""The public voices and the BERT that yomiage knows by name, as plain data.

Each entry says where its files come from in two forms: the SBV2 folder the
authors published (``sbv2_source``: PyTorch weights, run with ``[torch]``
or converted with ``yomiage convert``) and HayaKoe's ready ONNX export
(``onnx_source``: runs on a CPU without torch). Licenses are those of the
published files; check the linked model cards before redistributing audio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from yomiage.errors import UnknownVoiceError

JVNV_REPO = "litagin/style_bert_vits2_jvnv"
HAYAKOE_REPO = "lemondouble/hayakoe"
BERT_REPO = "ku-nlp/deberta-v2-large-japanese-char-wwm"
JVNV_STYLES = ("Neutral", "Happy", "Sad", "Angry", "Fear", "Surprise", "Disgust")
JVNV_LICENSE = "CC BY-SA 4.0 (JVNV corpus)"

Kind = Literal["voice", "bert"]
Format = Literal["onnx", "sbv2"]
FORMATS: tuple[Format, ...] = ("onnx", "sbv2")


@dataclass(frozen=True)
class CatalogEntry:
    """A named voice (or the BERT) and where its files come from.

    ``sbv2_source`` is the original SBV2 folder (for a BERT: the DeBERTa
    repository); ``onnx_source`` a ready ONNX export (HayaKoe layout);
    ``tokenizer_source`` the tokenizer folder that goes with an ONNX BERT.
    ``styles`` is empty for a BERT.
    """

    name: str
    kind: Kind
    sbv2_source: str
    onnx_source: str
    license: str
    styles: tuple[str, ...] = ()
    tokenizer_source: str = ""
    homepage: str = ""

    def source(self, format: Format) -> str:
        """The source of this entry in ``format`` ("onnx" or "sbv2")."""
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
        return self.onnx_source if format == "onnx" else self.sbv2_source

    def sources(self, format: Format) -> tuple[str, ...]:
        """Every source to fetch for ``format``: the folder, plus the tokenizer for an ONNX BERT."""
        main = self.source(format)
        if format == "onnx" and self.tokenizer_source:
            return (main, self.tokenizer_source)
        return (main,)


def _jvnv(name: str) -> CatalogEntry:
    return CatalogEntry(
        name=name,
        kind="voice",
        sbv2_source=f"hf://{JVNV_REPO}/{name}",
        onnx_source=f"hf://{HAYAKOE_REPO}/onnx/speakers/{name}",
        license=JVNV_LICENSE,
        styles=JVNV_STYLES,
        homepage=f"https://huggingface.co/{JVNV_REPO}",
    )


BERT = CatalogEntry(
    name="deberta-v2-large-japanese-char-wwm",
    kind="bert",
    sbv2_source=f"hf://{BERT_REPO}",
    onnx_source=f"hf://{HAYAKOE_REPO}/onnx/bert/q8",
    tokenizer_source=f"hf://{HAYAKOE_REPO}/bert/tokenizer",
    license="CC BY-SA 4.0 (see the model card)",
    homepage=f"https://huggingface.co/{BERT_REPO}",
)

ENTRIES: Mapping[str, CatalogEntry] = MappingProxyType(
    {
        e.name: e
        for e in (
            _jvnv("jvnv-F1-jp"),
            _jvnv("jvnv-F2-jp"),
            _jvnv("jvnv-M1-jp"),
            _jvnv("jvnv-M2-jp"),
            BERT,
        )
    }
)


def names() -> tuple[str, ...]:
    """The known names, voices first."""
    return tuple(sorted(ENTRIES, key=lambda n: (ENTRIES[n].kind != "voice", n)))


def lookup(name: str) -> CatalogEntry:
    """The entry called ``name``; UnknownVoiceError listing the known names otherwise."""
    entry = ENTRIES.get(name) if isinstance(name, str) else None
    if entry is None:
        voices = (n for n in names() if ENTRIES[n].kind == "voice")  # the BERT is no voice
        raise UnknownVoiceError(
            f"unknown voice {name!r}; known voices: {', '.join(voices)} "
            "(or pass a source: a folder, hf://owner/repo/folder or s3://bucket/prefix)",
            source=str(name),
        )
    return entry
