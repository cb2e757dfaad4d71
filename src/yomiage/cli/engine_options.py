"""Command-line options shared by ``yomiage generate`` and ``yomiage serve``.

Building the engine and turning flags into synthesis options live here so
both commands spell every flag the same way. Nothing heavy is imported at
module level: ``generate`` must start fast.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from yomiage.cli.setting_flags import add_flag
from yomiage.engine_spec import EngineSpec, VoiceSource, parse_voices
from yomiage.errors import OptionError
from yomiage.options import OptionFields, SynthesisOptions
from yomiage.settings import from_flags

if TYPE_CHECKING:
    from yomiage.engine import TTS
    from yomiage.limits import Limits
    from yomiage.speaker import Speaker

_DEFAULTS = SynthesisOptions()


def add_engine_arguments(parser: argparse.ArgumentParser, *, many: bool) -> None:
    """Voice selection and engine flags; ``many`` lets ``--voice``/``--model`` repeat."""
    voices = parser.add_argument_group("voice")
    action = "append" if many else "store"
    voices.add_argument(
        "--voice",
        action=action,
        metavar="NAME",
        help="a voice from `yomiage voices`" + (" (repeat for more)" if many else ""),
    )
    voices.add_argument(
        "--model",
        action=action,
        metavar="[NAME=]SOURCE" if many else "SOURCE",
        help="a voice folder, file://, hf://owner/repo[@rev][/sub] or s3://bucket/prefix"
        + (" (repeat for more; NAME defaults to the last path part)" if many else ""),
    )
    engine = parser.add_argument_group("engine")
    for name in ("bert_source", "device", "threads", "bert_precision", "decoder_precision",
                 "memory_budget_mb", "cache_dir", "offline", "user_dictionary",
                 "reading"):  # fmt: skip
        add_flag(engine, EngineSpec, name)


def add_reading_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--reading natural|sbv2`` (the g2p command and every engine)."""
    add_flag(parser, EngineSpec, "reading")


def add_encoding_argument(parser: argparse.ArgumentParser, reads: str) -> None:
    """``--encoding NAME`` for a command that reads text (``reads``: from where), checked
    as it is parsed (:mod:`yomiage.text_input` decodes with it)."""
    from yomiage.text_input import ENCODING_HELP

    parser.add_argument(
        "--encoding", type=_encoding, metavar="NAME", help=f"{ENCODING_HELP} (for {reads})"
    )


def _encoding(name: str) -> str:
    from yomiage.text_input import checked_encoding

    try:
        return checked_encoding(name)
    except ValueError as exc:  # argparse keeps the message of this type only
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_synthesis_arguments(parser: argparse.ArgumentParser) -> None:
    """Every field of :class:`SynthesisOptions` as a flag, with the API's meaning."""
    g = parser.add_argument_group("synthesis (defaults as in the Python API)")
    d = _DEFAULTS
    g.add_argument("--style", help=f"style name (default {d.style})")
    g.add_argument("--style-weight", type=float, metavar="X", help=f"default {d.style_weight}")
    g.add_argument("--speaker-id", metavar="ID", help="speaker number or name (default the first)")
    g.add_argument(
        "--speed",
        type=float,
        metavar="X",
        help="length scale, as in HayaKoe and SBV2: below 1 is faster, above 1 slower "
        f"(0.5 = twice as fast, 2 = half as fast; default {d.speed}); the OpenAI "
        "route's speed is the inverse (speed 2 there is twice as fast)",
    )
    g.add_argument("--sdp-ratio", type=float, metavar="X", help=f"0-1 (default {d.sdp_ratio})")
    g.add_argument("--noise", type=float, metavar="X", help=f"default {d.noise}")
    g.add_argument("--noise-w", type=float, metavar="X", help=f"default {d.noise_w}")
    g.add_argument(
        "--pitch-scale", type=float, metavar="X", help="F0 times X, by WORLD (default 1)"
    )
    g.add_argument(
        "--intonation-scale", type=float, metavar="X", help="F0 contour times X (default 1)"
    )
    g.add_argument("--seed", type=int, metavar="N", help="same seed, same audio")
    g.add_argument(
        "--quick-start",
        action="store_true",
        default=None,
        help="read a long first sentence's first clause alone: first audio sooner",
    )


def synthesis_options(args: argparse.Namespace, speaker: Speaker) -> SynthesisOptions:
    """The flags given (others keep the API's defaults) as one options object, checked
    for ``speaker``: OptionError names the flag's field."""
    fields = option_fields(args)
    fields.pop("speaker_id", None)  # a number or a name: resolved below
    if args.speaker_id is not None:
        fields["speaker_id"] = speaker_number(args.speaker_id, speaker)
    return speaker.options(SynthesisOptions.from_fields(fields))


def option_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The synthesis flags given, by SynthesisOptions field name (others left out)."""
    fields = {name: getattr(args, name, None) for name in OptionFields.__annotations__}
    return {name: value for name, value in fields.items() if value is not None}


def speaker_number(value: str, speaker: Speaker) -> int:
    if value in speaker.speaker_ids:
        return speaker.speaker_ids[value]
    try:
        return int(value)
    except ValueError:
        known = ", ".join(f"{n}={i}" for n, i in speaker.speaker_ids.items())
        raise OptionError("speaker_id", f"unknown speaker {value!r}; speakers: {known}") from None


def voice_sources(args: argparse.Namespace) -> tuple[VoiceSource, ...]:
    """``(name, source)`` pairs from ``--voice`` and ``--model`` (source None: catalog name)."""
    names = args.voice or []
    models = args.model or []
    names = [names] if isinstance(names, str) else names
    models = [models] if isinstance(models, str) else models
    return parse_voices(names, models)


def engine_spec(
    args: argparse.Namespace,
    *,
    threads: int | None = None,
    limits: Limits | None = None,
    voices: tuple[VoiceSource, ...] | None = None,
) -> EngineSpec:
    """The engine the flags describe (``threads`` overrides ``--threads``, ``voices`` the
    voice flags); without ``--user-dict``, the per-user dictionary of ``yomiage dict``."""
    from yomiage.text.frontend import default_user_dictionary_path

    return from_flags(
        EngineSpec,
        vars(args),
        voices=voice_sources(args) if voices is None else voices,
        threads=threads or args.threads,
        user_dictionary=str(args.user_dict or default_user_dictionary_path()),
        limits=limits,
    )


def make_tts(args: argparse.Namespace, *, limits: Limits | None = None) -> TTS:
    """An engine with the voices of the flags declared (not prepared yet)."""
    return engine_spec(args, limits=limits).declare()
