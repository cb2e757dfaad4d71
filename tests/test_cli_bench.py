"""``yomiage bench`` with the tiny fixture voice: its JSON, its table, its progress
on stderr, its errors, and the recommendation's rules (never a measured speed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from yomiage.cli import main
from yomiage.cli.bench import BenchError, _events, thread_counts
from yomiage.cli.bench_report import Row, recommend, table


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A load average of 0: the shared machine's own load would add a busy warning to
    the notes (tests/test_bench_summary.py checks that warning)."""
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))


def _bench(bundle: Path, *extra: str) -> list[str]:
    return ["bench", "--model", str(bundle), "--quick", *extra]


def test_json_shape_configs_once_and_progress_on_stderr(
    test_voice: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "all" is 1 or 2 cores on a small machine, and auto loads fp32 for the tiny voice:
    # each configuration is measured once.
    args = _bench(test_voice, "--threads", "2,1,all,2", "--decoder", "auto,fp32", "--json")
    assert main(args) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)  # stdout is the JSON object and nothing else
    assert set(report) >= {"yomiage", "machine", "voice", "texts", "rows", "recommendation"}
    assert set(report["machine"]) >= {"cpu", "logical_cores", "physical_cores", "python"}
    assert report["voice"] == "tiny" and list(report["texts"]) == ["short"]
    assert report["decoders"] == ["auto"] and "fp32 is what auto loads" in report["notes"][0]
    threads = report["threads"]
    assert threads == sorted(set(threads)) and {1, 2} <= set(threads)
    assert [(r["threads"], r["text"]) for r in report["rows"]] == [(n, "short") for n in threads]
    # Each configuration with its plan (the committed voice's decoder is small: nothing
    # to measure), and a quiet machine (the load is patched) is not called busy.
    configs = report["configurations"]
    assert [c["threads"] for c in configs] == threads and report["busy"] is None
    for config in configs:
        assert config["plan_decoder"].startswith("onnxruntime fp32, windows")
        assert config["plan_measure_s"] == 0 and config["load"]["before"] == 0.0
    for row in report["rows"]:
        assert row["decoder"] == "auto" and row["precision"] == "fp32"
        assert row["speed"] > 0 and row["audio_s"] > 0 and row["first_audio_s"] > 0
        assert row["load_s"] > 0 and row["peak_mb"] > 0
    rec = report["recommendation"]
    assert rec["threads"] in threads and rec["decoder"] == "auto"
    assert rec["lines"][-1] == f"recommended: --threads {rec['threads']} --decoder auto"
    # One line as each configuration starts and as each step ends, all on stderr.
    assert f"[1/{len(threads)}] 1 thread, decoder auto: loading…" in err
    assert "short text:" in err and "peak memory" in err


def test_quick_with_one_thread_prints_a_table(
    test_voice: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_bench(test_voice, "--threads", "1", "--text", "今日は晴れ。")) == 0
    out, err = capsys.readouterr()
    assert "threads  decoder" in out and "given" in out
    assert out.rstrip().endswith("recommended: --threads 1 --decoder auto")
    assert "[1/1] 1 thread, decoder auto: loading…" in err and "[1/1]" not in out
    # The plan auto runs by, and why: the committed voice's decoder is small.
    assert "  1 thread, decoder auto: decoder onnxruntime fp32" in out and "small decoder" in out


def test_the_plan_and_its_alternatives_are_shown(tmp_path: Path) -> None:
    from yomiage.cli.bench_plans import plan_table

    lines = plan_table([
        {"decoder": "openvino bf16, windows 32-256 frames", "predicted_decode_s": 1.5,
         "peak_mb": 990, "refused": None},
        {"decoder": "openvino bf16, windows 32-512 frames", "predicted_decode_s": 1.4,
         "peak_mb": 1300, "refused": "~1300 MB peak is over the 1000 MB budget"},
    ]).splitlines()[2:]  # fmt: skip
    assert lines[0].split() == ["*", "1.50", "990", "openvino", "bf16,", "windows", "32-256",
                                "frames"]  # fmt: skip
    assert "over the 1000 MB budget" in lines[1] and not lines[1].startswith("  *")


def test_a_plan_chosen_for_its_memory_over_a_slightly_faster_one_says_why() -> None:
    from yomiage.cli.bench_plans import plan_table

    lines = plan_table([
        {"decoder": "onnxruntime fp32, windows 8-128 frames", "predicted_decode_s": 13.05,
         "peak_mb": 855, "refused": None},
        {"decoder": "onnxruntime fp32, windows 32-256 frames", "predicted_decode_s": 12.94,
         "peak_mb": 929, "refused": None},
    ]).splitlines()[2:]  # fmt: skip
    assert "the lightest of those within 3% of the fastest" in lines[0]
    assert "within" not in lines[1]
    nothing_fits = plan_table([
        {"decoder": "onnxruntime fp32, windows 8-128 frames", "predicted_decode_s": 13.0,
         "peak_mb": 1100, "refused": "~1100 MB peak is over the 1000 MB budget"},
    ])  # fmt: skip
    assert "over the 1000 MB budget" in nothing_fits


def test_the_thread_counts_the_plan_chose_among_are_shown() -> None:
    from yomiage.cli.bench_plans import plan_threads

    assert plan_threads([[1, 612.4], [2, 351.0]]) == (
        "  threads, one full decoder window each: 1: 612 ms, 2: 351 ms"
    )


def test_bench_quick_recommends_from_three_runs_not_one(
    test_voice: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31, 18: ``--quick`` timed one run per configuration and recommended from it
    (on a busy machine the 2-thread speed varied 4x between runs); it now times
    ``--repeat`` runs (3) of the short text, and fewer, asked for, are called rough."""
    assert main(_bench(test_voice, "--threads", "1", "--json")) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["repeat"] == 3 and list(report["texts"]) == ["short"]
    assert "1 text, 3 timed runs each after a warm-up" in err
    assert not any("rough" in note for note in report["notes"])
    assert main(_bench(test_voice, "--threads", "1", "--repeat", "1")) == 0
    out = capsys.readouterr().out
    assert "median of 1 run" in out and "from 1 timed run per configuration: rough" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--threads", "0"], "argument --threads: thread counts are positive"),
        (["--threads", "1,x"], "not 'x'"),
        (["--decoder", "fp16"], "argument --decoder: decoder precisions are auto"),
        (["--repeat", "0"], "argument --repeat: a positive number"),
        (["--text", "a", "--text-file", "b"], "not allowed with argument"),
    ],
)
def test_bad_arguments_exit_1_with_one_line(
    test_voice: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(_bench(test_voice, *extra))
    assert exited.value.code == 1
    assert message in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--voice", "no-such-voice"], "no-such-voice"),
        (["bench", "--model", "/no/such/voice"], "/no/such/voice"),
        (["bench", "--model", "x", "--text-file", "/no/such.txt"], "cannot read /no/such.txt"),
        (["bench", "--model", "x", "--text", " "], "the text is empty"),
    ],
)
def test_a_missing_voice_or_text_is_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(args) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("yomiage bench: ") and message in last


def test_a_configuration_the_voice_lacks_is_named(
    test_voice: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_bench(test_voice, "--threads", "1", "--decoder", "int8")) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("yomiage bench: 1 thread, decoder int8: ") and "int8" in last[30:]


def test_a_crashing_worker_is_named_not_a_traceback() -> None:
    with pytest.raises(BenchError, match=r"^3 threads, decoder fp32: the worker exited") as err:
        list(_events("not a job", "3 threads, decoder fp32"))
    assert "TypeError: expected a BenchJob" in str(err.value)


def test_thread_counts_are_measured_once_smallest_first() -> None:
    assert thread_counts((2, "all", 1, 4), cores=4) == (1, 2, 4)
    assert thread_counts(("all", 2, 1), cores=1) == (1, 2)


def _row(threads: int, speed: float, *, decoder: str = "auto", text: str = "long",
         runtime: str = "decoder fp32 on onnxruntime", first: float = 0.3,
         plan: str = "") -> Row:  # fmt: skip
    return Row(threads, decoder, runtime, text, 10.0, 10.0 / speed, speed, first, 300.0, 1.0,
               plan)  # fmt: skip


def test_fewest_threads_within_five_percent_of_the_fastest() -> None:
    rows = [_row(1, 1.0, first=0.5), _row(2, 1.9, first=0.3), _row(4, 1.95, first=0.25)]
    rec = recommend(rows)
    assert (rec.threads, rec.decoder, rec.first_audio_threads) == (2, "auto", 4)
    assert "2 threads: 1.9x real time; 4 add only 3%" in "\n".join(rec.lines)
    assert rec.lines[-1] == "recommended: --threads 2 --decoder auto"


def test_more_threads_that_help_are_recommended_and_precisions_compared() -> None:
    bf16 = "decoder bf16 on openvino"
    rows = [_row(1, 1.0), _row(2, 2.0), _row(1, 1.8, runtime=bf16), _row(2, 3.6, runtime=bf16)]
    rec = recommend(rows)
    assert (rec.threads, rec.decoder) == (2, "auto")
    lines = "\n".join(rec.lines)
    assert "fastest: --threads 2 --decoder auto (bf16)" in lines
    assert "decoder bf16: 1.80x the speed of fp32 at 2 threads" in lines


def test_slower_with_more_threads_and_slower_than_real_time_are_said() -> None:
    rec = recommend([_row(1, 0.8), _row(2, 0.6), _row(1, 0.8, text="short", first=0.9)])
    lines = "\n".join(rec.lines)
    assert rec.threads == 1 and "2 are 25% slower" in lines and "slower than real time" in lines
    assert "first audio soonest: --threads 1 --decoder auto, 0.90 s on the short text" in lines


def test_table_has_a_row_per_measurement() -> None:
    text = table([_row(1, 1.0), _row(2, 2.0, decoder="fp32")])
    header, one, two = text.splitlines()
    assert header.split()[:3] == ["threads", "decoder", "text"]
    assert "auto (fp32)" in one and "1.00x" in one and "fp32 " in two and "2.00x" in two


def test_bench_says_what_a_larger_budget_would_buy() -> None:
    """The plan's table as the Xeon with AMX measured it: under 1,000 MB the plan is
    float32; bench names the cheapest faster option and the fastest, each with the
    budget that admits it. Options that are slower, or within the budget, are not offered."""
    from yomiage.cli.bench_report import faster_over_budget, faster_over_budget_lines

    options = [
        {"decoder": "onnxruntime fp32, windows 16-256 frames", "predicted_decode_s": 11.70,
         "peak_mb": 981, "refused": None},
        {"decoder": "openvino bf16, windows 32-256 frames", "predicted_decode_s": 3.90,
         "peak_mb": 1789, "refused": "over"},
        {"decoder": "openvino bf16, windows 32-128 frames", "predicted_decode_s": 4.41,
         "peak_mb": 1430, "refused": "over"},
        {"decoder": "openvino bf16, windows of 32 frames", "predicted_decode_s": 5.37,
         "peak_mb": 1054, "refused": "over"},
        {"decoder": "onnxruntime fp32, windows 32-512 frames", "predicted_decode_s": 11.65,
         "peak_mb": 1098, "refused": "over"},
        {"decoder": "onnxruntime fp32, windows 32-128 frames", "predicted_decode_s": 11.89,
         "peak_mb": 912, "refused": None},
    ]  # fmt: skip
    offers = faster_over_budget(options, 1000)
    assert [o["memory_budget_mb"] for o in offers] == [1060, 1790]
    assert [o["decoding_speedup"] for o in offers] == [2.18, 3.0]
    lines = faster_over_budget_lines(offers)
    assert lines[0] == (
        "  a larger budget decodes faster: --memory-budget-mb 1060 runs openvino bf16, windows "
        "of 32 frames (2.2x the decoding speed, ~1054 MB peak)"
    )
    assert faster_over_budget(options, 2000) == []  # everything fits: nothing to offer
    assert faster_over_budget(options[:1] + options[4:], 1000) == []  # only 0.4% faster


def test_thread_counts_that_ran_one_plan_are_still_compared() -> None:
    plan = "onnxruntime fp32, windows 8-128 frames"
    rec = recommend([_row(1, 1.0, plan=plan), _row(2, 0.8, plan=plan)])
    lines = "\n".join(rec.lines)
    assert "2 are 20% slower: more threads do not help here" in lines
    assert not rec.plans_differ and "plans differ" not in lines


def test_plans_that_differ_in_windows_only_are_said_without_a_precision_to_try() -> None:
    """One precision, other windows: the thread count is still not judged alone, and
    there is no other --decoder to suggest."""
    rows = [_row(1, 1.0, plan="onnxruntime fp32, windows 8-128 frames"),
            _row(2, 0.8, plan="onnxruntime fp32, windows 16-256 frames"),
            _row(4, 0.9, plan="onnxruntime fp32, windows 16-256 frames")]  # fmt: skip
    rec = recommend(rows)
    lines = "\n".join(rec.lines)
    assert rec.plans_differ and "more threads do not help" not in lines
    assert "(1 thread: onnxruntime fp32, windows 8-128 frames; 2, 4 threads: onnxruntime fp32, " \
           "windows 16-256 frames)" in lines  # fmt: skip
    assert "to compare thread counts at one precision" not in lines
    assert rec.lines[-1] == "recommended: --threads 1 --decoder auto"
