"""Developer tools: synthetic stand-ins for real voices and BERT models.

No trained SBV2 voice or DeBERTa weights can be shipped with the tests, yet the
loaders, runtimes and benchmarks need folders with exactly the real layout,
key names and (for benchmarks) the real sizes. :mod:`yomiage.devtools.synthetic`
writes such folders from a seed. Nothing here is imported by the library itself.
"""
