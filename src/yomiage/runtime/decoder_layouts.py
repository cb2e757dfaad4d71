"""The decoder with another set of its stages as 2-D convolutions, made once per voice.

Which of the decoder's stages run faster as 2-D convolutions depends on the CPU
(:mod:`yomiage.export.decoder_layout`): ONNX Runtime float32, 2 threads, against
the all-1-D graph, the full-size decoder called at 23 / 62 / 286 frames:

- AVX2-only Zen 3: 2-D from 64 channels 1.04-1.29x, from 128 channels 1.00-1.21x;
- AVX-512 Zen 5: from 64 channels 0.97-1.03x, from 128 channels 1.07-1.19x
  (1.14-1.16x hayakoe's speed end to end against 1.06-1.16x).

A bundle is written with one layout (2-D from 64 channels, since the fifth pass
of issue 32), so the plan times the decoder in each layout of
:data:`LAYOUT_CHOICES` too, and a voice whose plan takes another layout runs a
graph made from its bundle's: the same weights and the same samples (within
float rounding, 4e-8), kept in ``<cache>/decoders/<the bundle's decoder
files' sha256>-2d<channels>/``.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# The layouts a plan may choose among besides its bundle's own: the stages of at least
# this many channels run 2-D (the fastest on Zen 3 and on Zen 5 respectively, above).
LAYOUT_CHOICES = (64, 128)


class LayoutError(RuntimeError):
    """A decoder in another layout could not be made or kept (the bundle's own runs)."""


def bundle_layout(decoder: Path) -> int:
    """The channels from which ``decoder``'s stages are 2-D; 0 where none is (read from
    the graph alone, without its weights)."""
    import onnx

    from yomiage.export.decoder_layout import two_d_from

    return two_d_from(onnx.load(str(decoder), load_external_data=False)) or 0


class DecoderLayouts:
    """The decoder graphs made in other layouts, under one folder of the cache."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, key: str, layout: int) -> Path:
        return self.root / f"{key}-2d{layout}"

    def graph(self, decoder: Path, key: str, layout: int) -> Path:
        """``decoder`` (its bundle's files named by ``key``) with its stages of ``layout``
        channels or more 2-D, the rest 1-D: ``decoder`` itself for layout 0 (the
        bundle's own), else the kept graph, made now if it is not kept yet. Its weights
        lie beside it in ``decoder.onnx.data``, as in a bundle, so ONNX Runtime maps
        them rather than copying them (+50 MB resident on the full-size voice when
        they were inside the graph's file). Made whole or not at all: in a temporary
        folder, then renamed. LayoutError if it cannot be made or written."""
        if layout == 0:
            return decoder
        folder = self.folder(key, layout)
        graph = folder / "decoder.onnx"
        if graph.is_file():
            return graph
        started = time.perf_counter()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            made = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=self.root))
        except OSError as exc:
            raise LayoutError(f"cannot keep decoders in {self.root}: {exc}") from exc
        try:
            import onnx

            from yomiage.export.decoder_layout import relayout

            model = onnx.load(str(decoder))
            relayout(model, layout)
            _save(model, made / "decoder.onnx")
            for path in (made, *made.iterdir()):  # as the rest of the cache: not private
                path.chmod(0o755 if path.is_dir() else 0o644)
            try:
                made.rename(folder)
            except OSError:
                if not graph.is_file():  # not another process that made it first
                    raise
        except Exception as exc:  # onnx's and protobuf's own errors, OSError, ValueError
            raise LayoutError(
                f"cannot make {decoder.name} with stages from {layout} channels 2-D in "
                f"{self.root}: {exc}"
            ) from exc
        finally:
            shutil.rmtree(made, ignore_errors=True)
        log.info("made %s (%.1f s)", graph, time.perf_counter() - started)
        return graph


def _save(model: Any, path: Path) -> None:
    import onnx

    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=f"{path.name}.data", size_threshold=1024)  # fmt: skip
