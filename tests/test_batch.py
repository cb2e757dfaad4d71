"""``yomiage batch``: inputs, resuming, retries, and the same audio as the library."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import wave
import weakref
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TEST_VOICES
from yomiage import TTS
from yomiage.batch import (
    BatchInputError,
    BatchItem,
    BatchSpec,
    ItemProgress,
    Made,
    OutputFolder,
    ProcessItemPool,
    WorkerStartError,
    read_items,
    run_job,
)
from yomiage.cli.main import main
from yomiage.engine_spec import EngineSpec

TINY = str(TEST_VOICES / "tiny")
SPEC = BatchSpec(EngineSpec(voices=(("tiny", TINY),), threads=1), options={"seed": 7})


def _write(path: Path, text: str) -> Path:
    path.write_text(text, "utf-8")
    return path


def _samples(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


def test_inputs_are_text_files_and_jsonl_lines(tmp_path: Path) -> None:
    chapter = _write(tmp_path / "ch01.txt", "第一章。\n本文です。")
    corpus = _write(tmp_path / "c.jsonl", '{"id": "a", "text": "はい。"}\n\n'
                    '{"id": "b", "text": "いいえ。", "voice": "v2", "options": {"speed": 1.2}}\n')  # fmt: skip
    items = read_items([chapter, corpus])
    assert [i.id for i in items] == ["ch01", "a", "b"]
    assert items[0].text.startswith("第一章") and items[2].voice == "v2"
    assert items[2].options == {"speed": 1.2}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a"}', "has no text"),
        ('{"id": "../x", "text": "はい"}', "names the output file"),
        ('{"id": "a", "text": "はい", "options": {"speed": 99}}', "speed must be between"),
        ('{"id": "a", "text": "はい", "options": {"sped": 1}}', "unknown option 'sped'"),
        ('{"id": "a", "text": "はい", "colour": 1}', "unknown field 'colour'"),
        ("[1, 2]", "must be a JSON object"),
        ("{not json", "not JSON"),
    ],
)
def test_a_bad_line_is_named_with_its_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    corpus = _write(tmp_path / "c.jsonl", '{"id": "ok", "text": "はい。"}\n' + line + "\n")
    with pytest.raises(BatchInputError, match=message) as caught:
        read_items([corpus])
    assert f"{corpus}:2" in str(caught.value)


def test_duplicate_ids_and_missing_files_are_refused(tmp_path: Path) -> None:
    a = _write(tmp_path / "x.txt", "はい。")
    b = tmp_path / "sub"
    b.mkdir()
    with pytest.raises(BatchInputError, match="two items are called 'x'"):
        read_items([a, _write(b / "x.txt", "いいえ。")])
    with pytest.raises(BatchInputError, match="no such file"):
        read_items([tmp_path / "missing.txt"])


class FlakyPool:
    """Threads standing in for workers: each item fails ``failures[id]`` times first
    (``"crash"``: as if its worker process died)."""

    broken = (OSError,)

    def __init__(self, failures: dict[str, int], crash: str | None = None) -> None:
        self.workers = 2
        self.failures = dict(failures)
        self.crash = crash
        self.restarts = 0
        self._threads = ThreadPoolExecutor(2)

    def submit(self, item: BatchItem, into: Path) -> Future[Made]:
        def make() -> Made:
            if self.failures.get(item.id, 0) > 0:
                self.failures[item.id] -= 1
                if item.id == self.crash:
                    raise OSError("worker died")
                raise RuntimeError(f"cannot make {item.id}")
            return Made(item.id, b"RIFF" + item.text.encode(), 1.5)

        return self._threads.submit(make)

    def restart(self) -> None:
        self.restarts += 1

    def close(self, *, now: bool = False) -> None:
        self._threads.shutdown()


def test_failed_items_are_retried_then_reported_never_dropped(tmp_path: Path) -> None:
    items = [BatchItem(f"i{n}", f"text {n}") for n in range(5)]
    pool = FlakyPool({"i1": 1, "i2": 5, "i3": 1}, crash="i3")
    events: list[tuple[str, str]] = []
    summary = run_job(items, OutputFolder(tmp_path, "wav"), SPEC, pool, retries=1,
                      on_event=lambda e: events.append((e.item_id, e.status)))  # fmt: skip
    assert (summary.made, summary.skipped) == (4, 0)
    assert list(summary.failed) == ["i2"] and "cannot make i2" in summary.failed["i2"]
    assert ("i1", "retrying") in events and ("i3", "retrying") in events
    assert pool.restarts == 1  # the dead worker was replaced
    assert sorted(p.name for p in tmp_path.glob("*.wav")) == [
        "i0.wav",
        "i1.wav",
        "i3.wav",
        "i4.wav",
    ]
    assert summary.audio_seconds == pytest.approx(6.0)


def test_a_rerun_skips_what_is_done_and_remakes_what_changed(tmp_path: Path) -> None:
    items = [BatchItem(f"i{n}", f"text {n}") for n in range(3)]
    outputs = OutputFolder(tmp_path, "wav")
    run_job(items, outputs, SPEC, FlakyPool({}))
    (tmp_path / "i0.wav").unlink()
    changed = [items[0], BatchItem("i1", "new text"), items[2]]
    summary = run_job(changed, outputs, SPEC, FlakyPool({}))
    assert (summary.made, summary.skipped) == (2, 1)
    assert (tmp_path / "i1.wav").read_bytes() == b"RIFFnew text"
    other_options = BatchSpec(SPEC.engine, options={"seed": 8})
    assert run_job(changed, outputs, other_options, FlakyPool({})).made == 3


def test_a_remade_item_clears_the_temporary_files_a_killed_run_left(tmp_path: Path) -> None:
    outputs = OutputFolder(tmp_path, "wav")
    left = [tmp_path / ".i0.wav.k2j4x9", tmp_path / ".yomiage-batch" / ".i0.wav.json.a8c1"]
    other = tmp_path / ".i10.wav.zz"  # another item's: not this one's to remove
    for path in [*left, other]:
        path.write_bytes(b"half")
    run_job([BatchItem("i0", "text")], outputs, SPEC, FlakyPool({}))
    assert not any(p.exists() for p in left) and other.exists()
    assert (tmp_path / "i0.wav").read_bytes() == b"RIFFtext"


def test_an_unknown_voice_stops_the_job_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(BatchInputError, match="asks for voice 'nobody'"):
        run_job([BatchItem("a", "はい。", voice="nobody")], OutputFolder(tmp_path, "wav"),
                SPEC, FlakyPool({}))  # fmt: skip


@pytest.fixture(scope="module")
def library_audio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, np.ndarray]]:
    texts = {"ch1": "今日はいい天気ですね。散歩に行きましょう。", "ch2": "こんにちは。"}
    with TTS(threads=1).load("tiny", source=TINY) as tts:
        speaker = tts.prepare().speakers["tiny"]
        out = tmp_path_factory.mktemp("lib")
        audio = {}
        for key, text in texts.items():
            path = speaker.generate(text, seed=7).save(out / f"{key}.wav")
            audio[key] = _samples(path)
        yield audio


def test_worker_processes_give_the_librarys_audio(
    tmp_path: Path, library_audio: dict[str, np.ndarray]
) -> None:
    items = [BatchItem("ch1", "今日はいい天気ですね。散歩に行きましょう。"),
             BatchItem("ch2", "こんにちは。")]  # fmt: skip
    progress: list[ItemProgress] = []
    pool = ProcessItemPool(SPEC, 2, on_progress=progress.append)
    try:
        summary = run_job(items, OutputFolder(tmp_path, "wav"), SPEC, pool)
    finally:
        pool.close()
    assert (summary.made, summary.failed) == (2, {})
    # Workers say how far into an item they are, sentence by sentence.
    ch1 = [(p.characters, p.total) for p in progress if p.item_id == "ch1"]
    assert ch1[0] == (11, 21) and ch1[-1] == (21, 21)
    for key, expected in library_audio.items():
        got = _samples(tmp_path / f"{key}.wav")
        assert len(got) == len(expected)
        assert np.abs(got.astype(int) - expected).max() <= 1


def test_a_worker_that_cannot_load_stops_the_job_with_the_reason(tmp_path: Path) -> None:
    spec = BatchSpec(EngineSpec(voices=(("gone", str(tmp_path / "no-such-voice")),), threads=1))
    pool = ProcessItemPool(spec, 1)
    try:
        with pytest.raises(WorkerStartError, match="could not load the voices"):
            run_job([BatchItem("a", "はい。")], OutputFolder(tmp_path / "out", "wav"), spec, pool)
    finally:
        pool.close()


def test_cli_makes_resumes_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = [_write(tmp_path / f"ch{n}.txt", f"第{n}章。はい、そうです。") for n in (1, 2)]
    corpus = _write(tmp_path / "more.jsonl", '{"id": "x", "text": "いいえ。"}\n')
    args = [str(p) for p in (*inputs, corpus)] + ["--model", TINY, "-o", str(tmp_path / "out"),
                                                  "--seed", "3", "--threads", "1"]  # fmt: skip
    assert main(["batch", *args]) == 0
    err = capsys.readouterr().err
    assert "3 items: 3 made, 0 already done, 0 failed" in err and "[3/3]" in err
    assert main(["batch", *args, "--format", "flac"]) == 0  # another format: made again
    assert main(["batch", *args]) == 0
    assert "0 made, 3 already done" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "out").glob("*.wav")) == [
        "ch1.wav", "ch2.wav", "x.wav",
    ]  # fmt: skip
    bad = _write(tmp_path / "bad.jsonl", '{"id": "y"}\n')
    assert main(["batch", str(bad), "--model", TINY, "-o", str(tmp_path / "out")]) == 1
    assert f"{bad}:1: item 'y' has no text" in capsys.readouterr().err


@pytest.mark.slow
def test_an_interrupted_job_resumes_without_half_files(tmp_path: Path) -> None:
    """Killed mid-job (SIGKILL: no cleanup at all), the next run finishes it."""
    texts = [_write(tmp_path / f"ch{n:02d}.txt", "今日はいい天気ですね。" * 6) for n in range(8)]
    out = tmp_path / "out"
    command = [sys.executable, "-m", "yomiage", "batch", *map(str, texts), "--model", TINY,
               "-o", str(out), "--seed", "1", "--threads", "1"]  # fmt: skip
    job = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list((out / ".yomiage-batch").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    done_before = list((out / ".yomiage-batch").glob("*.json"))
    assert 0 < len(done_before) < 8
    for path in out.glob("*.wav"):  # whatever has its final name is whole
        assert len(_samples(path)) > 0
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert f"{len(done_before)} already done" in finished.stderr
    assert len(list(out.glob("*.wav"))) == 8
    records = [json.loads(p.read_text()) for p in (out / ".yomiage-batch").glob("*.json")]
    assert all(r["seconds"] > 0 for r in records)


def test_ray_without_the_extra_says_which_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    chapter = _write(tmp_path / "ch1.txt", "はい。")
    assert main(["batch", str(chapter), "--model", TINY, "-o", str(tmp_path), "--ray"]) == 1
    assert "pip install 'yomiage[ray]'" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.wav"))


def test_the_bar_counts_items_audio_and_names_failures() -> None:
    import io

    from yomiage.batch import BatchSummary, Event
    from yomiage.cli.batch_progress import BatchProgress

    out = io.StringIO()
    bar = BatchProgress(4, quiet=False, tty=True, out=out)
    summary = BatchSummary(items=4, made=1, audio_seconds=90.0)
    bar(Event("ch1", "made", 90.0, summary))
    summary.failed["ch2"] = "RuntimeError: boom"
    bar(Event("ch2", "failed", 0.0, summary, "RuntimeError: boom"))
    bar.close()
    bar.report(summary)
    text = out.getvalue()
    assert "[#######" in text and "1/4 items" in text and "1.5 min of audio" in text
    assert "ch2: failed: RuntimeError: boom" in text and "failed: ch2: RuntimeError: boom" in text


# --- issue 22: killed drivers, bounded items, ids, progress within an item ---------------

needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, ...], or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _children(pid: int) -> dict[int, str]:
    """Each child of ``pid``, with its start time (so a reused pid is not mistaken for it)."""
    out = {}
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and int(fields[1]) == pid:
            out[int(entry.name)] = fields[19]
    return out


def _alive(processes: dict[int, str]) -> list[int]:
    alive = []
    for pid, started in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == started and fields[0] not in "ZX":
            alive.append(pid)
    return alive


def _wait_for(condition: object, seconds: float = 120.0) -> None:
    """Poll ``condition`` (a callable) until it holds; a generous bound, not a timing test."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def _batch_command(inputs: list[Path], out: Path) -> list[str]:
    return [sys.executable, "-m", "yomiage", "batch", *map(str, inputs), "--model", TINY,
            "-o", str(out), "--seed", "1", "--threads", "1", "--jobs", "2"]  # fmt: skip


@needs_proc
def test_workers_die_with_a_killed_driver(tmp_path: Path) -> None:
    """SIGKILL of the driver (or the OOM killer) left its workers and the resource
    tracker running under PID 1, finishing items nobody would write."""
    texts = [_write(tmp_path / f"ch{n}.txt", "今日はいい天気ですね。" * 150) for n in (1, 2)]
    out = tmp_path / "out"
    with open(tmp_path / "stderr", "w") as err:
        job = subprocess.Popen(_batch_command(texts, out), stderr=err, start_new_session=True)
    try:
        # Both workers are mid-item once each has begun writing its item's audio.
        _wait_for(lambda: len(list(out.glob(".ch*.spool"))) == 2 or job.poll() is not None)
        children = _children(job.pid)
        assert job.poll() is None, (tmp_path / "stderr").read_text()
        assert len(children) >= 2  # the two workers (and multiprocessing's resource tracker)
        job.kill()
        job.wait()
        _wait_for(lambda: not _alive(children))
        assert _alive(children) == []
        assert not list(out.glob("*.wav"))  # nothing half-made took a final name
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)


@needs_proc
def test_sigterm_stops_a_batch_like_ctrl_c_and_a_rerun_resumes(tmp_path: Path) -> None:
    """SIGTERM left the workers running and printed nothing; now it stops the job as
    Ctrl-C does: workers gone, one line saying how to go on, exit status 143."""
    texts = [_write(tmp_path / "a.txt", "はい。")]
    texts += [_write(tmp_path / f"{n}.txt", "今日はいい天気ですね。" * 12) for n in "bc"]
    out = tmp_path / "out"
    command = _batch_command(texts, out)
    job = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        records = out / ".yomiage-batch"
        _wait_for(lambda: (records / "a.wav.json").exists() or job.poll() is not None)
        children = _children(job.pid)
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=120)
        assert job.returncode == 143, err
        assert "interrupted; run again to resume" in err and "Traceback" not in err
        _wait_for(lambda: not _alive(children))
        assert _alive(children) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    done = len(list(records.glob("*.json")))
    assert 1 <= done < 3
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{3 - done} made, {done} already done" in rerun.stderr
    assert sorted(p.name for p in out.glob("*.wav")) == ["a.wav", "b.wav", "c.wav"]
    assert not list(out.glob(".*.wav.*"))  # the killed workers' temporary files were cleared


def test_a_batch_id_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    """``re.match`` with ``$`` accepted "abc\\n" as an id (and as a --model NAME)."""
    corpus = _write(tmp_path / "c.jsonl", '{"id": "abc\\n", "text": "はい。"}\n')
    with pytest.raises(BatchInputError, match="names the output file"):
        read_items([corpus])
    from yomiage.engine_spec import parse_voices

    [(name, source)] = parse_voices(models=["abc\n=./voice"])
    assert name != "abc\n" and source == "abc\n=./voice"  # not read as NAME=SOURCE


def test_an_item_over_the_character_limit_is_refused_before_any_work(tmp_path: Path) -> None:
    """A 100 MB line was read, then synthesized until the worker held 23.6 GB."""
    from yomiage.batch.items import MAX_ITEM_CHARS

    long_line = json.dumps({"id": "big", "text": "あ" * (MAX_ITEM_CHARS + 1)}, ensure_ascii=False)
    corpus = _write(tmp_path / "c.jsonl", '{"id": "ok", "text": "はい。"}\n' + long_line + "\n")
    with pytest.raises(BatchInputError, match=r"item 'big' has more than 200,000 characters"):
        read_items([corpus])
    escaped = json.dumps({"id": "huge", "text": "あ" * (MAX_ITEM_CHARS + 1)})  # \\uXXXX each
    huge = _write(tmp_path / "h.jsonl", escaped * 2 + "\n")  # past what a line is read for
    with pytest.raises(BatchInputError, match=rf"{huge}:1: the line is longer than"):
        read_items([huge])
    book = _write(tmp_path / "book.txt", "今日はいい天気ですね。" * (MAX_ITEM_CHARS // 10))
    with pytest.raises(BatchInputError, match=rf"{book}: item 'book' has more than"):
        read_items([book])
    at_limit = _write(tmp_path / "fits.txt", "あ" * MAX_ITEM_CHARS)
    assert read_items([at_limit])[0].id == "fits"


def _chunks(n: int, alive: list[weakref.ref[np.ndarray]]) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(0)
    for k in range(n):
        samples = (rng.standard_normal(5000) * (0.1 + k / n)).astype(np.float32)
        alive.append(weakref.ref(samples))
        yield samples


@pytest.mark.parametrize("fmt", ["wav", "pcm", "flac"])
def test_an_items_audio_is_written_as_it_is_made_not_held(tmp_path: Path, fmt: str) -> None:
    """A worker held a whole item's audio (a 1.2 M-character item grew 2.5 MB/s): now
    each chunk goes to disk as it comes, and nothing keeps an earlier one."""
    from yomiage.audio import Audio
    from yomiage.batch.audio_file import AudioFileWriter

    refs: list[weakref.ref[np.ndarray]] = []
    kept = []
    with AudioFileWriter(tmp_path / f"x.{fmt}", fmt, 22050) as writer:
        for samples in _chunks(40, refs):
            writer.add(samples)
            kept.append(samples.copy())  # the test's own copy, to compare with
            del samples
            # The writer kept no chunk (the generator still holds the one it last made).
            assert all(ref() is None for ref in refs[:-1])
        path = writer.finish()
    assert path.parent == tmp_path and path.name.startswith(f".x.{fmt}.")
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # the spool is gone
    whole = Audio(np.concatenate(kept), 22050)
    if fmt == "flac":
        import soundfile

        decoded, rate = soundfile.read(path, dtype="int16")
        assert rate == 22050 and np.array_equal(decoded, whole.to_int16())
    else:  # the bytes Audio.save writes: scaled by the whole item's peak
        assert path.read_bytes() == whole.to_bytes(fmt)


def test_a_batch_writes_opus_as_audio_save_does(tmp_path: Path) -> None:
    """Issue 31, 18: ``--format opus`` was refused by ``batch`` (and its writer): the
    voice's 44.1 kHz is resampled to 48 kHz as it is made, then scaled by the whole
    resampled item's peak, as ``Audio.save`` does."""
    soundfile = pytest.importorskip("soundfile")
    from yomiage.audio import Audio
    from yomiage.batch.audio_file import AudioFileWriter

    kept = []
    with AudioFileWriter(tmp_path / "x.opus", "opus", 44100) as writer:
        for samples in _chunks(20, []):
            writer.add(samples)
            kept.append(samples.copy())
        path = writer.finish()
    whole = tmp_path / "whole.opus"
    Audio(np.concatenate(kept), 44100).save(whole)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, whole.name])
    assert writer.seconds == pytest.approx(20 * 5000 / 44100, abs=1e-3)
    ours, rate = soundfile.read(path, dtype="int16")
    theirs, _ = soundfile.read(whole, dtype="int16")
    assert rate == 48000 and np.array_equal(ours, theirs)


def test_a_failed_item_leaves_no_temporary_files(tmp_path: Path) -> None:
    from yomiage.batch.audio_file import AudioFileWriter

    def fail_mid_item() -> None:
        with AudioFileWriter(tmp_path / "x.wav", "wav", 22050) as writer:
            writer.add(np.ones(10, np.float32))
            raise RuntimeError("the voice failed mid-item")

    with pytest.raises(RuntimeError, match="mid-item"):
        fail_mid_item()
    assert list(tmp_path.iterdir()) == []


def test_progress_is_shown_within_an_item_not_only_when_it_is_done() -> None:
    """``batch`` showed nothing until a whole item was done: the bar now moves as a
    worker reads the item, and a log gets a line on a long item now and then."""
    import io

    from yomiage.batch import BatchSummary, Event, ItemProgress
    from yomiage.cli.batch_progress import BatchProgress

    out = io.StringIO()
    bar = BatchProgress(2, quiet=False, tty=True, out=out)
    bar.item_progress(ItemProgress("ch1", 500, 1000, 60.0))
    assert "0/2 items" in out.getvalue() and "(ch1 50%)" in out.getvalue()
    assert "[#######" in out.getvalue()  # a quarter of the job: half of one of two items
    summary = BatchSummary(items=2, made=1, audio_seconds=120.0)
    bar(Event("ch1", "made", 120.0, summary))
    assert out.getvalue().rsplit("\r", 1)[1].count("ch1") == 0  # done: no longer in hand
    log = io.StringIO()
    lines = BatchProgress(2, quiet=False, tty=False, out=log, line_seconds=0.0)
    lines.item_progress(ItemProgress("ch2", 250, 1000, 30.0))
    assert "[0/2] ch2: 250 of 1,000 characters read (25%), 30.0 s of audio so far" in log.getvalue()
    quiet = io.StringIO()
    BatchProgress(2, quiet=True, tty=False, out=quiet, line_seconds=0.0).item_progress(
        ItemProgress("ch2", 250, 1000, 30.0)
    )
    assert quiet.getvalue() == ""


_ORPHAN = """
import sys, time
sys.platform = "darwin"  # no prctl: the watchdog thread alone
from yomiage.batch.lifeline import die_with_parent
die_with_parent(int(sys.argv[1]), poll_seconds=0.05)
print("ready", flush=True)
time.sleep(600)
"""
_MIDDLE = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())],
                         stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print(child.pid, flush=True)
"""


@needs_proc
def test_a_worker_without_prctl_still_dies_with_its_parent(tmp_path: Path) -> None:
    """The portable fallback (a thread watching the parent) ends an orphaned worker."""
    middle = subprocess.run([sys.executable, "-c", _MIDDLE, _ORPHAN], capture_output=True,
                            text=True, timeout=120, start_new_session=True)  # fmt: skip
    pid = int(middle.stdout)
    fields = _stat(pid)
    child = {pid: fields[19]} if fields else {}
    try:
        _wait_for(lambda: not _alive(child))
        assert _alive(child) == []
    finally:
        for left in _alive(child):  # only the test's own child, never a reused pid
            os.kill(left, signal.SIGKILL)


@pytest.mark.parametrize(
    ("output", "jobs"),
    [("out/", 1), ("out", 1), ("./out/", 1), ("../x/out", 1), ("out/", 2)],
)
def test_batch_with_a_relative_output_folder_writes_the_audio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, jobs: int
) -> None:
    """Issue 31, 15: with a relative ``-o`` (the README's ``-o audio/``), each item was
    made, then its finished file was swept as a "leftover" (a relative glob compared
    with the worker's absolute path) and the rename failed: "0 made, N failed"."""
    cwd = tmp_path / "x"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    texts = [_write(cwd / f"ch{n}.txt", "こんにちは。") for n in range(jobs)]
    args = ["batch", *(t.name for t in texts), "--model", TINY, "-o", output, "--threads", "1"]
    assert main([*args, "--jobs", str(jobs), "--retries", "0"]) == 0
    folder = (cwd / output).resolve()
    assert sorted(p.name for p in folder.glob("*.wav")) == [f"ch{n}.wav" for n in range(jobs)]
    assert all(len(_samples(folder / f"ch{n}.wav")) > 0 for n in range(jobs))
    assert not list(folder.glob(".ch*"))  # no temporary file left beside them
