"""What a user asks of the plan."""

from __future__ import annotations

# The default budget: peak resident memory of one process with one voice and its BERT.
DEFAULT_MEMORY_BUDGET_MB = 1000
