"""The ``yomiage`` command. Each subcommand lives in a module of its own; nothing heavy
is imported until a subcommand runs."""

from yomiage.cli.main import main

__all__ = ["main"]
