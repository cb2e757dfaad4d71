"""The CPU runtime: converted bundles through ONNX Runtime, against the reference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import FIXTURES, reference_cases, reference_options, require_fixtures
from yomiage.errors import ModelLoadError
from yomiage.options import SynthesisOptions
from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.chunking import Windowing, clause_ends, flow_spans, windows
from yomiage.runtime.onnx_backend import OnnxBackend
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.voice import decode, encode
from yomiage.text import Frontend

TINY = FIXTURES / "sbv2_tiny"


@pytest.fixture(scope="module")
def bundle(test_voice: Path) -> Path:
    return test_voice


@pytest.fixture(scope="module")
def backend(bundle: Path) -> OnnxBackend:
    """float32 on ONNX Runtime, so any window schedule can be compared exactly (OpenVINO's
    fixed window lengths: tests/test_engines.py)."""
    return OnnxBackend(bundle / "bert", threads=2, plan_request=PlanRequest("fp32"), openvino=False)


@pytest.fixture(scope="module")
def voice(backend: OnnxBackend, bundle: Path) -> Any:
    return backend.load_voice(bundle)


@pytest.fixture(scope="module")
def reference_backend(reference_bundle: Path) -> OnnxBackend:
    """The reference fixture voice's BERT in float32, as the reference ran it."""
    return OnnxBackend(
        reference_bundle / "bert", precision="fp32", threads=2, plan_request=PlanRequest("fp32")
    )


@pytest.fixture(scope="module")
def reference_voice(reference_backend: OnnxBackend, reference_bundle: Path) -> Any:
    return reference_backend.load_voice(reference_bundle)


@pytest.mark.parametrize("case", reference_cases("sbv2_tiny/cases/cases.json"))
def test_text_to_audio_matches_reference(
    reference_backend: OnnxBackend, frontend: Frontend, case: dict[str, Any], reference_voice: Any
) -> None:
    backend, voice = reference_backend, reference_voice
    arrays = np.load(TINY / "cases" / f"{case['id']}.npz")
    for name, setting in case["settings"].items():
        options = reference_options(case, setting)
        rng = backend.new_rng(0)
        [encoded] = encode(backend, voice, [frontend.g2p(case["text"])], options, rng)
        assert encoded.durations.tolist() == setting["durations"], name
        if f"audio_{name}" in arrays:
            audio = decode(voice, encoded, options, rng)
            reference = arrays[f"audio_{name}"]
            assert audio.shape == reference.shape
            assert float(np.abs(audio - reference).max()) <= 1e-4


@pytest.mark.parametrize(
    ("first", "window"), [(1, 1), (7, 7), (16, 16), (64, 64), (10_000, 10_000), (1, 64), (5, 40),
                          (32, 512)]
)  # fmt: skip
def test_windowed_decoding_equals_whole(
    backend: OnnxBackend, frontend: Frontend, first: int, window: int, voice: Any
) -> None:
    """Fixed windows and windows that grow from a small first one: the same samples as
    decoding the sentence at once."""
    options = SynthesisOptions(seed=3)
    sentence = [frontend.g2p("駅前の小さな喫茶店で、古い友人と偶然再会しました。")]
    [encoded] = encode(backend, voice, sentence, options, backend.new_rng(3))
    voice = voice
    m_p, logs_p, speaker = encoded.state
    rng = backend.new_rng(5)
    mean = np.repeat(m_p, encoded.durations, axis=2)
    eps = rng.standard_normal(mean.shape, dtype=np.float32)
    z_p = mean + eps * np.exp(np.repeat(logs_p, encoded.durations, axis=2)) * np.float32(0.6)
    z = voice.flow.run({"z_p": z_p, **speaker})[0]
    whole = voice.decoder.run({"z": z, **speaker})[0][0, 0]
    saved = voice.windowing
    voice.windowing = Windowing(window, first)
    try:
        pieces = list(voice.decode_windows(encoded, options, backend.new_rng(5)))
    finally:
        voice.windowing = saved
    assert len(pieces) == len(list(windows(z.shape[2], window, 0, first)))
    stitched = np.concatenate(pieces)
    assert stitched.shape == whole.shape
    assert float(np.abs(stitched - whole).max()) <= 1e-5


@pytest.mark.parametrize(("flow_frames", "first_flow_frames"), [(24, 8), (40, 40), (10_000, 8)])
def test_long_sentence_goes_through_the_flow_in_spans(
    backend: OnnxBackend, frontend: Frontend, flow_frames: int, first_flow_frames: int, voice: Any
) -> None:
    """A 200-character sentence went through the flow at once: 18 s and 3 GB on a full voice."""
    options = SynthesisOptions(seed=3)
    sentence = [frontend.g2p("駅前の小さな喫茶店で、古い友人と偶然再会しました。")]
    [encoded] = encode(backend, voice, sentence, options, backend.new_rng(3))
    voice = voice
    m_p, logs_p, speaker = encoded.state
    rng = backend.new_rng(5)
    mean = np.repeat(m_p, encoded.durations, axis=2)
    eps = rng.standard_normal(mean.shape, dtype=np.float32)
    z_p = mean + eps * np.exp(np.repeat(logs_p, encoded.durations, axis=2)) * np.float32(0.6)
    spans = flow_spans(
        encoded.durations, clause_ends(encoded.inputs.phone_ids), flow_frames, first_flow_frames
    )
    assert (len(spans) > 1) == (z_p.shape[2] > flow_frames)
    z = np.concatenate(
        [voice.flow.run({"z_p": z_p[:, :, a:b], **speaker})[0] for a, b in spans], axis=2
    )
    whole = voice.decoder.run({"z": z, **speaker})[0][0, 0]
    saved = voice.windowing
    voice.windowing = Windowing(7, 5, flow_frames, first_flow_frames)
    try:
        pieces = list(voice.decode_windows(encoded, options, backend.new_rng(5)))
    finally:
        voice.windowing = saved
    stitched = np.concatenate(pieces)
    assert stitched.shape == whole.shape
    assert float(np.abs(stitched - whole).max()) <= 1e-5


def test_onnx_and_torch_backends_agree(
    reference_backend: OnnxBackend, frontend: Frontend, reference_voice: Any
) -> None:
    backend, voice = reference_backend, reference_voice
    pytest.importorskip("transformers")
    from yomiage.runtime.torch_backend import TorchBackend

    torch_backend = TorchBackend(TINY / "bert" / "model", tokenizer_dir=TINY / "bert" / "tokenizer")
    torch_voice = torch_backend.load_voice(TINY / "model")
    sentences = [frontend.g2p(t) for t in ("ねえ、聞いて！？", "昨日、先生に会ったの。")]
    options = SynthesisOptions(style="Happy", style_weight=0.5, speaker_id=1, noise=0, noise_w=0)
    ours = encode(backend, voice, sentences, options, backend.new_rng(0))
    theirs = encode(torch_backend, torch_voice, sentences, options, torch_backend.new_rng(0))
    for a, b in zip(ours, theirs, strict=True):
        assert a.durations.tolist() == b.durations.tolist()
        audio_a = decode(voice, a, options, backend.new_rng(0))
        audio_b = decode(torch_voice, b, options, torch_backend.new_rng(0))
        assert float(np.abs(audio_a - audio_b).max()) <= 1e-4


def test_seed_makes_noise_reproducible(
    backend: OnnxBackend, frontend: Frontend, voice: Any
) -> None:
    sentence = [frontend.g2p("今日はいい天気ですね。")]
    options = SynthesisOptions()

    def run(seed: int) -> Any:
        rng = backend.new_rng(seed)
        [enc] = encode(backend, voice, sentence, options, rng)
        return decode(voice, enc, options, rng)

    assert np.array_equal(run(1), run(1))
    a, b = run(1), run(2)
    assert a.shape != b.shape or not np.array_equal(a, b)


def test_synthesis_without_torch(bundle: Path, voice: Any) -> None:
    code = (
        "import sys\n"
        "from yomiage.options import SynthesisOptions\n"
        "from yomiage.runtime.onnx_backend import OnnxBackend\n"
        "from yomiage.runtime.voice import decode, encode\n"
        "from yomiage.text import Frontend, UserDictionary\n"
        f"b = OnnxBackend({str(bundle / 'bert')!r})\n"
        f"v = b.load_voice({str(bundle)!r})\n"
        "f = Frontend(UserDictionary(None))\n"
        "o = SynthesisOptions(seed=0)\n"
        "rng = b.new_rng(0)\n"
        "[e] = encode(b, v, [f.g2p('こんにちは。')], o, rng)\n"
        "assert len(decode(v, e, o, rng)) > 0\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_bundle_errors(bundle: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="yomiage convert"):
        read_manifest(tmp_path)
    manifest = read_manifest(bundle)
    manifest.verify()
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in bundle.iterdir():
        if f.is_file():
            (broken / f.name).write_bytes(f.read_bytes())
    (broken / "decoder.onnx").write_bytes(b"not onnx")
    with pytest.raises(ModelLoadError, match="corrupt"):
        read_manifest(broken).verify()
    (broken / "flow.onnx").unlink()
    with pytest.raises(ModelLoadError, match=r"flow\.onnx"):
        read_manifest(broken)
    with pytest.raises(ModelLoadError, match="BERT bundle"):
        OnnxBackend(tmp_path)


def test_convert_refuses_a_disagreeing_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, voice: Any
) -> None:
    pytest.importorskip("torch")
    require_fixtures()
    from yomiage.export import convert

    bad = convert.Parity(prior=0.5, durations_equal=False, flow=0.0, audio=0.0)
    monkeypatch.setattr(convert, "_probe", lambda voice, folder: bad)
    with pytest.raises(convert.ConversionError, match=r"prior 0\.5"):
        convert.convert_voice(TINY / "model", tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_convert_never_replaces_other_data(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    require_fixtures()
    from yomiage.export.convert import ConversionError, convert_voice

    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(ConversionError, match="not a yomiage bundle"):
        convert_voice(TINY / "model", tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


@pytest.mark.slow
def test_memory_does_not_grow_with_requests(bundle: Path, voice: Any) -> None:
    """RSS after 200 requests of varied lengths stays within 50 MB of RSS after 20."""
    code = (
        "import numpy as np\n"
        "from yomiage.options import SynthesisOptions\n"
        "from yomiage.runtime.onnx_backend import OnnxBackend\n"
        "from yomiage.runtime.voice import decode, encode\n"
        "from yomiage.text import Frontend, UserDictionary\n"
        "def rss():\n"
        "    return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) / 1024\n"
        f"b = OnnxBackend({str(bundle / 'bert')!r})\n"
        f"v = b.load_voice({str(bundle)!r})\n"
        "f = Frontend(UserDictionary(None))\n"
        "rng = np.random.default_rng(0)\n"
        "base = ['今日は', 'いい天気ですね', '散歩に行きましょう', '駅前の喫茶店で友人と会いました']\n"
        "after = {}\n"
        "for i in range(200):\n"
        "    n = int(rng.integers(1, 5))\n"
        "    text = '、'.join(base[int(k)] for k in rng.integers(0, 4, n)) + '。'\n"
        "    o = SynthesisOptions(seed=i)\n"
        "    r = b.new_rng(i)\n"
        "    [e] = encode(b, v, [f.g2p(text)], o, r)\n"
        "    decode(v, e, o, r)\n"
        "    if i + 1 in (20, 200):\n"
        "        after[i + 1] = rss()\n"
        "print(after[20], after[200])\n"
    )
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to read RSS")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rss_20, rss_200 = map(float, out.stdout.split())
    assert rss_200 - rss_20 <= 50, f"RSS grew from {rss_20:.0f} MB to {rss_200:.0f} MB"


def test_first_window_is_short_so_audio_starts_early(
    backend: OnnxBackend, frontend: Frontend, voice: Any
) -> None:
    options = SynthesisOptions(seed=1)
    rng = backend.new_rng(1)
    [encoded] = encode(
        backend, voice, [frontend.g2p("駅前の小さな喫茶店で古い友人と会った。")], options, rng
    )
    assert encoded.n_frames > 4 * voice.windowing.first_window_frames
    pieces = list(voice.decode_windows(encoded, options, rng))
    hop = voice.info.hop_length
    first, cap = voice.windowing.first_window_frames, voice.windowing.window_frames
    sizes = [len(p) // hop for p in pieces]
    assert sizes[0] == first
    # Each next window twice the one before, up to the cap: little context recomputed.
    assert sizes[:-1] == [min(cap, first * 2**i) for i in range(len(sizes) - 1)]
    assert sum(map(len, pieces)) == encoded.n_frames * hop
