"""`sapiens2 export usd`: (being built)."""

from __future__ import annotations

import argparse

HELP = "usd export"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of `sapiens2 export usd`."""


def run(args: argparse.Namespace) -> int:
    from .arguments import UsageError

    raise UsageError("sapiens2 export usd is not available in this build")
