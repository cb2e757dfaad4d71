"""The decoder with another set of its stages as 2-D convolutions, made once per voice.

Which of the decoder's stages run faster as 2-D convolutions depends on the CPU
(:mod:`yomiage.export.decoder_layout`): ONNX Runtime's channel-blocked layout takes
8 channels a block with AVX2 and 16 with AVX-512, so on one CPU the stages from 64
channels gain and on another only those from 128 (measured:
benchmarks/history/issue-32.md, sixth and ninth passes).

A bundle is written with one layout (2-D from 64 channels, since the sixth pass
of issue 32), so the plan times the decoder in each layout of
:data:`LAYOUT_CHOICES` too, and a voice whose plan takes another layout runs a
graph made from its bundle's: the same weights and the same samples (within
float rounding, 4e-8), kept in ``<cache>/decoders/<the bundle's decoder
files' sha256>-2d<channels>/`` with the sha256 of its files as made
(:func:`~yomiage.runtime.integrity.record_made`): a kept graph whose files are no
longer so is made again before it is used (one with flipped weights loaded and
spoke noise on every start).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from yomiage.runtime.made_graphs import check_made, kept, make_in_child

log = logging.getLogger(__name__)

# The layouts a plan may choose among besides its bundle's own: the stages of at least
# this many channels run 2-D (each the fastest on one of the CPUs measured, above).
LAYOUT_CHOICES = (64, 128)
# The program that makes one (its arguments: DECODER FOLDER LAYOUT; its error on stderr).
LAYOUT_CHILD = "yomiage.plan_child.layout"
# What a graph made here consists of (its weights beside it, as in a bundle).
MADE_FILES = ("decoder.onnx", "decoder.onnx.data")


class LayoutError(RuntimeError):
    """A decoder in another layout could not be made or kept (the bundle's own runs)."""


class DecoderLayouts:
    """The decoder graphs made in other layouts, under one folder of the cache.

    A graph is made in a child process (:mod:`yomiage.plan_child.layout`;
    :mod:`yomiage.runtime.made_graphs` says why)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, key: str, layout: int) -> Path:
        return self.root / f"{key}-2d{layout}"

    def graph(self, decoder: Path, key: str, layout: int) -> Path:
        """``decoder`` (its bundle's files named by ``key``) with its stages of ``layout``
        channels or more 2-D, the rest 1-D: the kept graph, made now if it is not kept
        yet; ``decoder`` itself for layout 0 or where it has that layout already.
        LayoutError if it cannot be made or written."""
        if layout == 0:
            return decoder
        graph = self.folder(key, layout) / "decoder.onnx"
        if kept(graph, MADE_FILES):
            return graph
        started = time.perf_counter()
        what = f"making {decoder.name} with stages from {layout} channels 2-D"
        make_in_child(LAYOUT_CHILD, [str(decoder), str(graph.parent), str(layout)], what,
                      LayoutError)  # fmt: skip
        if not graph.is_file():
            return decoder  # it has that layout already
        check_made(graph, MADE_FILES, LayoutError)
        log.info("made %s (%.1f s)", graph, time.perf_counter() - started)
        return graph

    def discard(self, graph: Path) -> None:
        """Remove a graph :meth:`graph` made (its folder); anything else is left alone."""
        if graph.parent.parent == self.root:
            shutil.rmtree(graph.parent, ignore_errors=True)
