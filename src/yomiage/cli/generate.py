"""``yomiage generate``: text to an audio file, or to stdout as it is decoded."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from yomiage.audio.formats import FORMATS
from yomiage.cli.engine_options import (
    add_engine_arguments,
    add_synthesis_arguments,
    synthesis_options,
)

if TYPE_CHECKING:
    from yomiage.audio import AudioChunk

EXAMPLES = """examples:
  yomiage generate "こんにちは。" --voice jvnv-F1-jp -o hello.wav
  yomiage generate "今日はいい天気ですね！" --model ./my-voice --style Happy --speed 1.1 -o out.mp3
  yomiage generate --file chapter1.txt --model hf://owner/repo/voice -o ch1.flac --timings ch1.srt
  echo "速報です。" | yomiage generate - --voice jvnv-M1-jp -o - | aplay
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "generate",
        help="read text aloud into an audio file (or stdout)",
        description="Read text aloud with a Style-Bert-VITS2 voice.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("text", nargs="?", help="the text; '-' reads it from stdin")
    p.add_argument("--file", "-f", metavar="PATH", help="read the text from a file ('-': stdin)")
    p.add_argument(
        "-o",
        "--output",
        default="out.wav",
        metavar="PATH",
        help="audio file (format from its suffix), or '-' for stdout (default out.wav)",
    )
    p.add_argument(
        "--format", choices=FORMATS, help="audio format (default: from -o's suffix; wav on stdout)"
    )
    p.add_argument(
        "--timings", metavar="PATH", help="also write timings: sentences as .srt/.vtt, all as .json"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    p.add_argument(
        "-v", "--verbose", action="count", default=argparse.SUPPRESS, help="more logging"
    )
    add_engine_arguments(p, many=False)
    add_synthesis_arguments(p)
    p.set_defaults(func=run)


def read_text(args: argparse.Namespace) -> str:
    if args.file is not None and args.text is not None:
        raise ValueError("give the text or --file, not both")
    if args.file == "-" or (args.file is None and args.text == "-"):
        return sys.stdin.read()
    if args.file is not None:
        try:
            return Path(args.file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"cannot read {args.file}: no such file") from None
    if args.text is None:
        raise ValueError("give the text to read, '-' for stdin, or --file PATH")
    return str(args.text)


def run(args: argparse.Namespace) -> int:
    from yomiage.audio import Audio, wav_header
    from yomiage.audio.formats import format_for

    text = read_text(args)
    if not text.strip():
        raise ValueError("the text is empty")
    to_stdout = args.output == "-"
    fmt = args.format or ("wav" if to_stdout else format_for(args.output))
    if args.timings is not None:
        from yomiage.audio.subtitles import TIMINGS_FORMATS

        if Path(args.timings).suffix.lower() not in TIMINGS_FORMATS:
            raise ValueError(f"--timings takes a .json, .srt or .vtt file, not {args.timings!r}")

    started = time.perf_counter()
    from yomiage.cli.engine_options import make_tts

    with make_tts(args) as tts:
        tts.prepare()
        [speaker] = tts.speakers.values()
        from yomiage.cli.runtime_info import log_voice_runtimes

        bert = tts.bert_precision if tts.backend_name == "onnx" else None
        log_voice_runtimes({n: s.runtime for n, s in tts.speakers.items()}, tts.threads, bert)
        options = synthesis_options(args, speaker)
        loaded = time.perf_counter()
        progress = Progress(len(text.strip()), enabled=not args.quiet and sys.stderr.isatty())
        streaming = to_stdout and fmt in ("wav", "pcm")
        chunks = progress.track(speaker.stream(text, options, early_audio=streaming))
        kept: list[AudioChunk] = []
        out: IO[bytes] = sys.stdout.buffer
        if streaming:
            # Played as it arrives, so chunks are written as decoded (not normalized).
            try:
                if fmt == "wav":
                    out.write(wav_header(speaker.sample_rate))
                for chunk in chunks:
                    out.write(chunk.to_pcm_bytes())
                    out.flush()
                    kept.append(_without_samples(chunk))
            except BrokenPipeError:
                # The reader left (`| head`, a player closed): not an error.
                _silence_stdout()
                progress.close()
                return 0
        else:
            kept = list(chunks)
        progress.close()
        audio = Audio.from_chunks(kept, speaker.sample_rate)
        duration = sum(len(c.samples) for c in kept) / speaker.sample_rate
        if not streaming:
            # mp3 and the like take seconds to encode a long text, after the bar is full.
            with progress.stage(f"encoding {fmt}" if fmt not in ("wav", "pcm") else None):
                if to_stdout:
                    out.write(audio.to_bytes(fmt))
                    out.flush()
                else:
                    audio.save(args.output, fmt)
        if args.timings is not None:
            from yomiage.audio.subtitles import write_timings

            firsts = [c for c in kept if c.timings.phonemes]  # each sentence's first chunk
            write_timings(args.timings, [c.timings for c in firsts], duration,
                          [c.text for c in firsts])  # fmt: skip
    if not args.quiet:
        spent = time.perf_counter() - loaded
        where = "stdout" if to_stdout else args.output
        print(
            f"wrote {where}: {duration:.2f} s of audio in {spent:.2f} s "
            f"({duration / max(spent, 1e-9):.1f}x real time; loading took "
            f"{loaded - started:.2f} s)",
            file=sys.stderr,
        )
    return 0


def _silence_stdout() -> None:
    """Point stdout at devnull so the interpreter's final flush does not fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _without_samples(chunk: AudioChunk) -> AudioChunk:
    """The chunk's length and timings without keeping its audio (already written)."""
    from dataclasses import replace

    import numpy as np

    return replace(chunk, samples=np.zeros(len(chunk.samples), np.float32))


class Progress:
    """A one-line bar on stderr, by characters read; off when not a terminal or for
    a text of one sentence."""

    def __init__(self, characters: int, *, enabled: bool) -> None:
        self.total = max(1, characters)
        self.enabled = enabled
        self.started = time.perf_counter()
        self.audio = 0.0
        self.read = 0  # characters of the sentences begun so far
        self.sentences = 0

    def track(self, chunks: Iterator[AudioChunk]) -> Iterator[AudioChunk]:
        for chunk in chunks:
            self.audio += chunk.duration
            if chunk.timings.phonemes:  # a sentence's first chunk
                self.read += len(chunk.text)
                self.sentences += 1
            if self.sentences > 1 or self.read < self.total:
                self._draw()
            yield chunk

    def _draw(self) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * min(self.read, self.total) / self.total)
        spent = time.perf_counter() - self.started
        speed = self.audio / spent if spent > 0 else 0.0
        line = (
            f"\r[{'#' * filled}{'.' * (width - filled)}] sentence {self.sentences}"
            f"  {self.audio:6.1f} s audio  {speed:4.1f}x"
        )
        sys.stderr.write(line)
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.sentences:
            sys.stderr.write("\r" + " " * 72 + "\r")
            sys.stderr.flush()

    @contextlib.contextmanager
    def stage(self, what: str | None) -> Iterator[None]:
        """Say ``what…`` while a step after the synthesis runs (the whole-file encoding:
        mp3 cannot be encoded as the chunks come, as the audio is normalized as a
        whole), then ``what… done``; the line is cleared for the summary."""
        if not self.enabled or what is None:
            yield
            return
        sys.stderr.write(f"\r{what}…")
        sys.stderr.flush()
        started = time.perf_counter()
        yield
        sys.stderr.write(f"\r{what}… done in {time.perf_counter() - started:.1f} s\n")
        sys.stderr.flush()
