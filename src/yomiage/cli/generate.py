"""``yomiage generate``: text to an audio file, or to stdout as it is decoded.

The text is read as it is spoken and the audio goes to disk as it is decoded
(a spool beside the file, encoded at the end), so a long text shows progress
at once and its audio is never held whole; one file is made from at most
:data:`yomiage.text_input.MAX_TEXT_CHARS` characters (``yomiage batch`` reads
more, one file per chapter), and a stream to stdout from any number.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

from yomiage.audio.formats import FORMATS
from yomiage.cli.engine_options import (
    add_encoding_argument,
    add_engine_arguments,
    add_synthesis_arguments,
    synthesis_options,
)

if TYPE_CHECKING:
    from yomiage.audio import AudioChunk
    from yomiage.audio.timings import Timings

EXAMPLES = """examples:
  yomiage generate "こんにちは。" --voice jvnv-F1-jp -o hello.wav
  yomiage generate "今日はいい天気ですね！" --model ./my-voice --style Happy --speed 0.9 -o out.mp3
      # --speed 0.9: faster, 10% shorter (a length scale: below 1 faster, above 1 slower)
  yomiage generate --file chapter1.txt --model hf://owner/repo/voice -o ch1.flac --timings ch1.srt
  yomiage generate --file aozora.txt --encoding cp932 --voice jvnv-F1-jp -o book.flac
  echo "速報です。" | yomiage generate - --voice jvnv-M1-jp -o - | aplay

A file (or a whole-file format on stdout) is made from at most 200,000 characters
(about 8 hours of speech): read a longer text in parts with `yomiage batch`
(one .txt file per chapter), or stream it with -o - (wav or pcm).
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
    add_encoding_argument(p, "stdin and --file")
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


def read_text(args: argparse.Namespace, *, max_chars: int | None = None) -> str:
    """The text to read, decoded strictly (``--encoding``, default UTF-8); with
    ``max_chars``, a longer text is refused, naming ``yomiage batch``."""
    from yomiage import text_input

    if args.file is not None and args.text is not None:
        raise ValueError("give the text or --file, not both")
    encoding = args.encoding
    try:
        if args.file == "-" or (args.file is None and args.text == "-"):
            return text_input.read_stream(sys.stdin.buffer, encoding, max_chars=max_chars)
        if args.file is not None:
            try:
                return text_input.read_file(args.file, encoding, max_chars=max_chars)
            except FileNotFoundError:
                raise ValueError(f"cannot read {args.file}: no such file") from None
        if args.text is None:
            raise ValueError("give the text to read, '-' for stdin, or --file PATH")
        if max_chars is not None and len(args.text) > max_chars:
            raise text_input.TextTooLongError("the text", max_chars)
    except text_input.TextTooLongError as exc:
        raise ValueError(
            f"{exc.where} has more than {exc.limit:,} characters, the most one audio file is "
            "made from (about 8 hours of speech): read it in parts with `yomiage batch` (one "
            ".txt file per chapter), or stream it with -o - (wav or pcm)"
        ) from None
    return str(args.text)


def run(args: argparse.Namespace) -> int:
    from yomiage import text_input
    from yomiage.audio import wav_header
    from yomiage.audio.formats import format_for

    to_stdout = args.output == "-"
    fmt = args.format or ("wav" if to_stdout else format_for(args.output))
    # Played as it arrives: any length. Anything else ends in one file, which must hold it.
    streaming = to_stdout and fmt in ("wav", "pcm")
    text = read_text(args, max_chars=None if streaming else text_input.MAX_TEXT_CHARS)
    if not text.strip():
        raise ValueError("the text is empty")
    if args.timings is not None:
        from yomiage.audio.subtitles import TIMINGS_FORMATS

        if Path(args.timings).suffix.lower() not in TIMINGS_FORMATS:
            raise ValueError(f"--timings takes a .json, .srt or .vtt file, not {args.timings!r}")
    target = None if to_stdout else Path(args.output)
    if target is not None and not target.parent.is_dir():
        raise FileNotFoundError(f"the folder {target.parent} does not exist (for {target.name})")

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
        sentences = Sentences(speaker.sample_rate, keep=args.timings is not None)
        chunks = sentences.track(
            progress.track(speaker.stream(text, options, early_audio=streaming))
        )
        out: IO[bytes] = sys.stdout.buffer
        if streaming:
            # Played as it arrives, so chunks are written as decoded (not normalized).
            try:
                if fmt == "wav":
                    out.write(wav_header(speaker.sample_rate))
                for chunk in chunks:
                    out.write(chunk.to_pcm_bytes())
                    out.flush()
            except BrokenPipeError:
                # The reader left (`| head`, a player closed): not an error.
                _silence_stdout()
                progress.close()
                return 0
            progress.close()
        elif target is not None:
            write_file(chunks, target, fmt, speaker.sample_rate, progress)
        else:
            with tempfile.TemporaryDirectory(prefix="yomiage-generate-") as folder:
                made = Path(folder) / f"audio.{fmt}"
                write_file(chunks, made, fmt, speaker.sample_rate, progress)
                with open(made, "rb") as data:
                    shutil.copyfileobj(data, out)
                out.flush()
        if args.timings is not None:
            from yomiage.audio.subtitles import write_timings

            write_timings(args.timings, sentences.timings, sentences.seconds, sentences.texts)
    if not args.quiet:
        spent = time.perf_counter() - loaded
        where = "stdout" if to_stdout else args.output
        duration = sentences.seconds
        print(
            f"wrote {where}: {duration:.2f} s of audio in {spent:.2f} s "
            f"({duration / max(spent, 1e-9):.1f}x real time; loading took "
            f"{loaded - started:.2f} s)",
            file=sys.stderr,
        )
    return 0


def write_file(
    chunks: Iterable[AudioChunk], target: Path, fmt: str, sample_rate: int, progress: Progress
) -> None:
    """The chunks into the file ``target``, as they are decoded: each goes to a spool
    beside it at once (the whole audio is never held), and at the end the spool is
    normalized to the peak and encoded into a temporary file renamed over ``target``
    (the bytes ``Audio.save`` writes). A failure or Ctrl-C on the way leaves ``target``
    as it was and no temporary file."""
    from yomiage.batch.audio_file import AudioFileWriter

    with AudioFileWriter(target, fmt, sample_rate) as writer:
        for chunk in chunks:
            writer.add(chunk.samples)
        progress.close()
        # mp3 and the like take seconds to encode a long text, after the bar is full.
        with progress.stage(f"encoding {fmt}" if fmt not in ("wav", "pcm") else None):
            made = writer.finish()
    try:
        os.replace(made, target)
    except BaseException:
        made.unlink(missing_ok=True)
        raise


class Sentences:
    """What the summary and ``--timings`` need of a stream, without its audio: its
    length, and (``keep``) each sentence's timings and text, from its first chunk."""

    def __init__(self, sample_rate: int, *, keep: bool) -> None:
        self.sample_rate = sample_rate
        self.keep = keep
        self.samples = 0
        self.timings: list[Timings] = []
        self.texts: list[str] = []

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate

    def track(self, chunks: Iterable[AudioChunk]) -> Iterator[AudioChunk]:
        for chunk in chunks:
            self.samples += len(chunk.samples)
            if self.keep and chunk.timings.phonemes:  # a sentence's first chunk
                self.timings.append(chunk.timings)
                self.texts.append(chunk.text)
            yield chunk


def _silence_stdout() -> None:
    """Point stdout at devnull so the interpreter's final flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


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

    def track(self, chunks: Iterable[AudioChunk]) -> Iterator[AudioChunk]:
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
