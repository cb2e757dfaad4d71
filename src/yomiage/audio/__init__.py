"""Audio out of the synthesizer: results and stream chunks, containers, resampling,
timings and subtitles (numpy only; libsndfile through soundfile for the compressed
formats)."""

from yomiage.audio.formats import wav_header
from yomiage.audio.results import Audio, AudioChunk

__all__ = ["Audio", "AudioChunk", "wav_header"]
