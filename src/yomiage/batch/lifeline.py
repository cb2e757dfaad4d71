"""Batch workers die with their driver: :mod:`yomiage.lifeline`, where every child
process of yomiage finds it."""

from yomiage.lifeline import ORPHANED, PR_SET_PDEATHSIG, WATCH_SECONDS, die_with_parent

__all__ = ["ORPHANED", "PR_SET_PDEATHSIG", "WATCH_SECONDS", "die_with_parent"]
