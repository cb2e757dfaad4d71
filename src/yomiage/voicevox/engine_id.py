"""What yomiage says it is as a VOICEVOX engine: its uuid and the features it supports.

The VOICEVOX editor tells engines apart by this uuid: the one a running server
reports at ``GET /engine_manifest`` and the one in a package built by
``yomiage vvpp`` must be the same, or the editor sees two engines (and installs
a newer package beside the old one instead of over it). So it never changes.
"""

ENGINE_UUID = "5b2f8e1a-3c4d-4e6f-9a7b-0c1d2e3f4a5b"

# What yomiage's VOICEVOX routes do, with a label for each: the server's GET
# /engine_manifest and the manifest in a `yomiage vvpp` package both say it from here.
SUPPORTED_FEATURES: dict[str, tuple[bool, str]] = {
    "adjust_mora_pitch": (False, "pitch of each mora"),
    "adjust_phoneme_length": (True, "length of each phoneme"),
    "adjust_speed_scale": (True, "overall speed"),
    "adjust_pitch_scale": (True, "overall pitch"),
    "adjust_intonation_scale": (True, "overall intonation"),
    "adjust_volume_scale": (True, "overall volume"),
    "adjust_pause_length": (True, "length of pauses at punctuation"),
    "interrogative_upspeak": (False, "rising tone at the end of questions"),
    "synthesis_morphing": (False, "morphing between two styles"),
    "sing": (False, "singing"),
    "manage_library": (False, "installing voice libraries"),
    "return_resource_url": (False, "speaker resources as URLs"),
    "apply_katakana_english": (True, "unknown English words read in katakana"),
    "streaming_synthesis": (True, "audio streamed as it is made"),
}
