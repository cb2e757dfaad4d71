"""The decoder drops its windows' padding between stages and still makes the same samples."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yomiage import TTS
from yomiage.errors import ModelLoadError
from yomiage.options import SynthesisOptions
from yomiage.runtime.bundle import read_manifest
from yomiage.runtime.chunking import (
    Windowing,
    receptive_field_frames,
    upsampler_margins,
    windows,
)
from yomiage.runtime.engines.onnx_session import session_options
from yomiage.runtime.engines.sessions import OrtGraph
from yomiage.runtime.onnx_backend import OnnxBackend
from yomiage.runtime.plan.request import PlanRequest
from yomiage.runtime.stage_trims import TRIM_INPUT, StageTrims
from yomiage.runtime.voice import encode
from yomiage.sbv2.config import ModelHyperparameters
from yomiage.text import Frontend

SBV2 = ModelHyperparameters()


def test_the_margins_of_sbv2s_generator() -> None:
    """Worked by hand from the generator (spec §5.9): 3 samples for conv_post, 60 per
    resblock stage, then back through each upsampler's stride and kernel."""
    assert upsampler_margins(SBV2) == (12, 17, 58, 48, 33)
    assert receptive_field_frames(SBV2) == 15
    trims = StageTrims.of_model(SBV2)
    assert trims.rates == (8, 64, 128, 256)
    assert trims.margins == (17, 58, 48, 33)


@pytest.mark.parametrize("frames", range(0, 20))
def test_each_upsampler_drops_all_it_may_and_no_more(frames: int) -> None:
    trims = StageTrims.of_model(SBV2)
    amounts, lost_left, lost_right = trims.amounts(frames, 15 - min(frames, 15))
    dropped = 0  # at the current upsampler's rate
    previous = 1
    for (rate, margin), row in zip(zip(trims.rates, trims.margins, strict=True), amounts,
                                   strict=True):  # fmt: skip
        dropped = dropped * (rate // previous) + int(row[0])
        previous = rate
        assert dropped == max(0, frames * rate - margin)  # all but the margin, once there
    assert lost_left == dropped * (trims.hop // trims.rates[-1])
    assert lost_right == trims.amounts(15 - min(frames, 15), 0)[1]
    assert (amounts >= 0).all()


@pytest.mark.parametrize(
    ("rates", "margins", "hop"),
    [((), (), 512), ((8, 64), (17,), 512), ((8, 60), (17, 58), 480), ((0,), (1,), 512),
     ((8,), (-1,), 512)],
)  # fmt: skip
def test_inconsistent_stages_are_refused(rates: Any, margins: Any, hop: int) -> None:
    with pytest.raises(ValueError, match=r"margin|rate"):
        StageTrims(rates, margins, hop)


def _graph(bundle: Path) -> OrtGraph:
    return OrtGraph(bundle / "decoder.onnx", session_options(2))


def test_trimmed_windows_make_the_whole_decodes_samples(test_voice: Path) -> None:
    """Every kind of window: at the sentence's start (no padding before), inside it,
    with part of a padding (near an edge) and at its end: the same samples as the
    whole sentence decoded at once, and less audio computed for each."""
    decoder = _graph(test_voice)
    trims = read_manifest(test_voice).stage_trims
    assert trims is not None and TRIM_INPUT in decoder.input_names
    rng = np.random.default_rng(0)
    z = rng.standard_normal((1, 16, 75), dtype=np.float32)
    sid = np.array([1], np.int64)
    whole = decoder.run({"z": z, "sid": sid})[0][0, 0]
    hop, pieces, saved = trims.hop, [], 0
    for w in windows(75, 24, 15, 3):
        feeds = {"z": z[:, :, w.pad_start : w.pad_stop], "sid": sid}
        feeds[TRIM_INPUT], lost, lost_after = trims.amounts(w.start - w.pad_start,
                                                            w.pad_stop - w.stop)  # fmt: skip
        audio = decoder.run(feeds)[0][0, 0]
        assert len(audio) == (w.pad_stop - w.pad_start) * hop - lost - lost_after
        pieces.append(audio[w.crop(hop, lost)])
        saved += lost + lost_after
    assert saved > 0
    np.testing.assert_allclose(np.concatenate(pieces), whole, rtol=0, atol=1e-6)


def test_the_graph_runs_whole_when_no_trims_are_fed(test_voice: Path) -> None:
    decoder = _graph(test_voice)
    z = np.random.default_rng(1).standard_normal((1, 16, 20), dtype=np.float32)
    sid = np.array([0], np.int64)
    plain = decoder.run({"z": z, "sid": sid})[0]
    zeros = np.zeros((4, 2), np.int64)
    assert plain.shape == (1, 1, 20 * 512)
    np.testing.assert_array_equal(plain, decoder.run({"z": z, "sid": sid, TRIM_INPUT: zeros})[0])


def _copy(test_voice: Path, tmp_path: Path, edit: Any) -> Path:
    folder = tmp_path / "voice"
    shutil.copytree(test_voice, folder)
    manifest = json.loads((folder / "voice.json").read_text("utf-8"))
    edit(manifest)
    (folder / "voice.json").write_text(json.dumps(manifest), "utf-8")
    return folder


def test_a_bundle_from_before_trims_speaks_the_same(test_voice: Path, tmp_path: Path) -> None:
    """A bundle whose manifest has no stages (converted before them) decodes whole
    windows, and its audio is what the trimmed decoding makes."""
    older = _copy(test_voice, tmp_path, lambda m: m.pop("decoder_stages"))
    assert read_manifest(older).stage_trims is None
    with TTS(threads=2, decoder_precision="fp32") as tts:
        tts.load("now", source=test_voice).load("before", source=older).prepare()
        text = "駅前の小さな喫茶店で、古い友人と偶然再会しました。今日は晴れ。"
        now = tts.speakers["now"].generate(text, seed=4)
        before = tts.speakers["before"].generate(text, seed=4)
    np.testing.assert_allclose(now.samples, before.samples, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "stages",
    [{"rates": [8, 64], "margins": [17]}, {"rates": "8", "margins": [17]}, {"rates": [8]},
     {"rates": [8.5], "margins": [1]}, {"rates": [7], "margins": [1]}, [8, 17]],
)  # fmt: skip
def test_a_bundle_with_wrong_stages_is_refused(
    test_voice: Path, tmp_path: Path, stages: Any
) -> None:
    """Wrong trims would decode wrong audio, so the bundle is refused, naming the entry."""
    folder = _copy(test_voice, tmp_path, lambda m: m.update(decoder_stages=stages))
    with pytest.raises(ModelLoadError, match="decoder_stages"):
        read_manifest(folder)


class _FewShapes:
    """A decoder on an engine that keeps a kernel per input shape (OpenVINO's kind)."""

    few_shapes = True

    def __init__(self, real: Any) -> None:
        self.real = real
        self.fed: list[dict[str, Any]] = []

    @property
    def input_names(self) -> frozenset[str]:
        return self.real.input_names

    def input_shape(self, name: str) -> Any:
        return self.real.input_shape(name)

    def run(self, feeds: Any) -> Any:
        self.fed.append(dict(feeds))
        return self.real.run(feeds)


def test_balanced_trims_meet_each_stage_at_one_size_whatever_the_split() -> None:
    """Two windows of one length padded differently must show every stage the same
    sizes (an engine keeps state per set of sizes), each side trimmed no more than
    its own padding allows (so the samples stay exact)."""
    trims = StageTrims.of_model(SBV2)
    reference, lost_left, lost_right = trims.amounts(15, 15)
    for left in range(0, 120):
        for right in range(0, 120):
            balanced = trims.balanced(left, right, 15)
            if left + right < 30:
                assert balanced is None
                continue
            assert balanced is not None, (left, right)
            out, lost, lost_after = balanced
            np.testing.assert_array_equal(out.sum(axis=1), reference.sum(axis=1))
            assert (out >= 0).all()
            assert lost + lost_after == lost_left + lost_right
            assert lost <= trims.amounts(left, right)[1]
            assert lost_after <= trims.amounts(left, right)[2]


def test_a_side_with_too_little_padding_gets_no_balanced_trims() -> None:
    trims = StageTrims.of_model(SBV2)
    assert trims.balanced(14, 15, 15) is None
    assert trims.balanced(0, 0, 15) is None
    assert trims.balanced(0, 30, 15) is not None


def test_an_engine_that_keeps_shapes_gets_one_set_of_trims_per_length(
    test_voice: Path, frontend: Frontend
) -> None:
    """Balanced trims: one set of stage sizes per window length, whatever text and
    window schedule; the samples those windows make are the whole decode's."""
    backend = OnnxBackend(test_voice / "bert", threads=2, plan_request=PlanRequest("fp32"),
                          openvino=False)  # fmt: skip
    voice = backend.load_voice(test_voice)
    voice.decoder = _FewShapes(voice.decoder)
    options = SynthesisOptions(seed=1, noise=0.0)
    sizes: dict[tuple[int, ...], set[tuple[int, ...]]] = {}
    reach = voice.manifest.receptive_field_frames * voice.info.hop_length
    for sentence in (
        "駅前の小さな喫茶店で、古い友人と偶然再会しました。",
        "はい。",
        "今日は晴れ。",
    ):
        [encoded] = encode(backend, voice, [frontend.g2p(sentence)], options,
                           backend.new_rng(1))  # fmt: skip
        whole = _whole(voice, encoded, options, backend)
        for (window, first), lead in itertools.product(((16, 4), (32, 8), (8, 8)), (0, 2**31)):
            voice.windowing = Windowing(window, first)
            voice.decoder.fed.clear()
            pieces = list(voice.decode_windows(encoded, options, backend.new_rng(2),
                                               lead_frames=lead))  # fmt: skip
            for fed in voice.decoder.fed:
                key = (window, first, fed["z"].shape[2])
                sizes.setdefault(key, set()).add(tuple(fed[TRIM_INPUT].sum(axis=1)))
            stitched = np.concatenate(pieces)
            assert stitched.shape == whole.shape
            # Exact but for a sentence's last frames where zeros pad it (fixed_windows).
            np.testing.assert_allclose(stitched[:-reach], whole[:-reach], rtol=0, atol=1e-5)
    assert sizes and all(len(found) == 1 for found in sizes.values()), sizes


def _whole(voice: Any, encoded: Any, options: SynthesisOptions, backend: Any) -> np.ndarray:
    """The sentence decoded in one call with no trims, on the real graph."""
    few, windowing = voice.decoder, voice.windowing
    voice.decoder, voice.windowing = few.real, Windowing(100_000, 100_000)
    try:
        return np.concatenate(list(voice.decode_windows(encoded, options, backend.new_rng(2))))
    finally:
        voice.decoder, voice.windowing = few, windowing
