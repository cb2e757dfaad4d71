"""SBV2 voice folders: configuration and style vectors (numpy only, no torch)."""

from yomiage.sbv2.config import ModelHyperparameters, VoiceConfig, load_config
from yomiage.sbv2.styles import StyleTable, load_styles

__all__ = ["ModelHyperparameters", "StyleTable", "VoiceConfig", "load_config", "load_styles"]
