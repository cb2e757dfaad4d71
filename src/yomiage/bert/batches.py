"""Which texts share a BERT call: a bound on the padded tokens of any one call.

DeBERTa's working set grows with rows x longest row (and its attention with
the square of the row), and ONNX Runtime's arena keeps the largest working set
for the life of the process. So eight long sentences in one batch cost more
memory than the whole rest of the engine, and gave no speed for it; only short
rows gain from sharing a call (measured on the full-size q8 BERT:
benchmarks/history/issue-32.md, second pass). Rows are therefore sorted by
length and packed while rows x longest stays within :data:`BATCH_TOKENS`, which
is what lets the memory budget hold whatever the text.
"""

from __future__ import annotations

from collections.abc import Sequence

# One sentence alone may reach this many tokens (reading.MAX_READING_CHARS + [CLS] and
# [SEP]), so no batch is allowed a larger working set than the longest sentence has.
BATCH_TOKENS = 302
BATCH_ROWS = 8


def token_batches(
    lengths: Sequence[int], *, budget: int = BATCH_TOKENS, most: int = BATCH_ROWS
) -> list[list[int]]:
    """Indices of ``lengths`` grouped into calls, shortest rows first, each group's
    rows x longest row within ``budget`` and at most ``most`` rows (a row longer
    than the budget goes alone)."""
    if budget < 1 or most < 1:
        raise ValueError("a BERT call needs room for at least one token and one row")
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        # Sorted ascending, so the row being added is the group's longest.
        if current and (len(current) == most or (len(current) + 1) * lengths[index] > budget):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
