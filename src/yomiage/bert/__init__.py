"""BERT features for SBV2 JP-Extra: tokenizer and phone-level expansion.

Importing this package never imports torch or transformers; the PyTorch
DeBERTa runner lives in :mod:`yomiage.bert.torch_bert` and is imported only
by code that uses it.
"""

from yomiage.bert.features import expand_to_phones
from yomiage.bert.tokenizer import CharTokenizer

__all__ = ["CharTokenizer", "expand_to_phones"]
