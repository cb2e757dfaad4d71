"""The PyTorch backend on CUDA: it must sound like the CPU, and a wrong device must say so.

CI has no GPU. Every test here needs torch; those that need a CUDA device skip
without one, and the one for machines without CUDA skips where there is one. The
voice is the seeded tiny synthetic SBV2 voice and DeBERTa of
:mod:`yomiage.devtools.synthetic` (made once per module), so nothing from
``../shared`` is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

import torch

from tests.conftest import FIXTURES, reference_cases, reference_options, require_fixtures
from yomiage import TTS
from yomiage.devtools.synthetic import make_bert, make_voice
from yomiage.errors import ModelLoadError
from yomiage.runtime.voice import encode
from yomiage.text import Frontend

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

TEXT = "こんにちは、いい天気ですね。明日の会議では、この問題について詳しく話し合う予定です。"


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    noise = float(np.sum((reference.astype(np.float64) - other) ** 2))
    signal = float(np.sum(reference.astype(np.float64) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(signal / noise)


@pytest.fixture(scope="module")
def sbv2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny synthetic SBV2 voice folder and its BERT folder."""
    root = tmp_path_factory.mktemp("sbv2")
    return make_voice(root / "voice", "tiny", 0), make_bert(root / "bert", "tiny", 0)


def _engine(device: str, sbv2: tuple[Path, Path], *, compile: bool = False) -> TTS:
    voice, bert = sbv2
    tts = TTS(device=device, backend="torch", bert_source=bert, threads=2)
    return tts.load("v", source=voice).prepare(compile=compile)


@pytest.fixture(scope="module")
def cpu(sbv2: tuple[Path, Path]) -> Iterator[TTS]:
    with _engine("cpu", sbv2) as tts:
        yield tts


@pytest.fixture(scope="module")
def cuda(sbv2: tuple[Path, Path]) -> Iterator[TTS]:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with _engine("cuda", sbv2) as tts:
        yield tts


@needs_cuda
def test_cuda_sounds_like_the_cpu(cpu: TTS, cuda: TTS) -> None:
    """Without noise the two devices compute the same function: same durations (so
    the same length and timings) and audio equal to within float rounding."""
    quiet = {"seed": 0, "noise": 0.0, "noise_w": 0.0}
    on_cpu = cpu.speakers["v"].generate(TEXT, **quiet)
    on_cuda = cuda.speakers["v"].generate(TEXT, **quiet)
    assert cuda.speakers["v"].runtime == "fp32 on torch cuda"
    assert len(on_cuda.samples) == len(on_cpu.samples)
    assert on_cuda.timings == on_cpu.timings
    assert snr_db(on_cpu.samples, on_cuda.samples) >= 40


@pytest.fixture(scope="module")
def reference_voice() -> tuple[Any, Any]:
    """The reference fixture voice (../shared) on the GPU: its backend and voice."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    tiny = require_fixtures() / "sbv2_tiny"
    from yomiage.runtime.torch_backend import TorchBackend

    backend = TorchBackend(
        tiny / "bert" / "model", tokenizer_dir=tiny / "bert" / "tokenizer", device="cuda"
    )
    return backend, backend.load_voice(tiny / "model")


@needs_cuda
@pytest.mark.parametrize("case", reference_cases("sbv2_tiny/cases/cases.json"))
def test_cuda_matches_the_reference_outputs(
    reference_voice: tuple[Any, Any], frontend: Frontend, case: dict[str, Any]
) -> None:
    """The reference fixture voice on the GPU, held to the fixtures' own tolerances
    (durations exact, audio within 1e-4), as tests/test_torch_backend.py holds the CPU."""
    backend, voice = reference_voice
    arrays = np.load(FIXTURES / "sbv2_tiny" / "cases" / f"{case['id']}.npz")
    setting = case["settings"]["A"]
    options = reference_options(case, setting)
    rng = backend.new_rng(0)
    [encoded] = encode(backend, voice, [frontend.g2p(case["text"])], options, rng)
    assert encoded.durations.tolist() == setting["durations"]
    audio = voice.decode(encoded, options, rng)
    assert audio.shape == arrays["audio_A"].shape
    assert float(np.abs(audio - arrays["audio_A"]).max()) <= 1e-4


@needs_cuda
def test_cuda_seed_reproduces_and_differs(cuda: TTS) -> None:
    """With noise on, a seed gives the same audio on the same device (the noise is
    drawn on the GPU, so it is not the CPU's noise), and another seed other audio."""
    speaker = cuda.speakers["v"]
    first = speaker.generate(TEXT, seed=3)
    again = speaker.generate(TEXT, seed=3)
    other = speaker.generate(TEXT, seed=4)
    assert len(first.samples) == len(again.samples)
    assert snr_db(first.samples, again.samples) >= 60
    assert len(other.samples) != len(first.samples) or not np.allclose(
        other.samples, first.samples, atol=1e-3
    )


@needs_cuda
def test_cuda_streams_from_threads_like_alone(sbv2: tuple[Path, Path]) -> None:
    """Requests from several threads at once (the gate lets several through on a
    GPU engine with threads=2) give what each gives alone."""
    with _engine("cuda", sbv2) as tts:
        speaker = tts.speakers["v"]
        alone = [speaker.generate(TEXT, seed=i).samples for i in range(4)]
        with ThreadPoolExecutor(4) as pool:
            together = list(pool.map(lambda i: speaker.generate(TEXT, seed=i).samples, range(4)))
    for a, b in zip(alone, together, strict=True):
        assert len(a) == len(b)
        assert snr_db(a, b) >= 60


@needs_cuda
def test_a_missing_cuda_device_is_a_clear_error(sbv2: tuple[Path, Path]) -> None:
    """``cuda:N`` past the last GPU fails in prepare() with ModelLoadError naming the
    device, not with a CUDA runtime error from deep inside torch."""
    device = f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(ModelLoadError, match=device):
        _engine(device, sbv2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error(sbv2: tuple[Path, Path]) -> None:
    with pytest.raises(ModelLoadError, match="no CUDA device"):
        _engine("cuda", sbv2)


@pytest.mark.slow
@needs_cuda
def test_compiled_bert_sounds_like_the_eager_one(cuda: TTS, sbv2: tuple[Path, Path]) -> None:
    """``prepare(compile=True)`` (torch.compile of the BERT) changes nothing audible,
    on two text lengths (one compilation serves both: dynamic shapes)."""
    quiet = {"seed": 0, "noise": 0.0, "noise_w": 0.0}
    with _engine("cuda", sbv2, compile=True) as compiled:
        for text in ("こんにちは。", TEXT):
            eager = cuda.speakers["v"].generate(text, **quiet)
            fast = compiled.speakers["v"].generate(text, **quiet)
            assert len(fast.samples) == len(eager.samples)
            assert snr_db(eager.samples, fast.samples) >= 40
