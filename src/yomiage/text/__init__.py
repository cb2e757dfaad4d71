"""Japanese text frontend: normalization, sentence splitting, g2p, user dictionary."""

from yomiage.text.frontend import Frontend, default_user_dictionary_path
from yomiage.text.g2p import Phonemes
from yomiage.text.sentences import split_sentences
from yomiage.text.symbols import ModelInputs, to_model_inputs
from yomiage.text.user_dict import UserDictionary
from yomiage.text.user_word import UserWord

__all__ = [
    "Frontend",
    "ModelInputs",
    "Phonemes",
    "UserDictionary",
    "UserWord",
    "default_user_dictionary_path",
    "split_sentences",
    "to_model_inputs",
]
