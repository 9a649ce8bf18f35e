"""`sapiens2 export onnx`: (being built)."""

from __future__ import annotations

import argparse

HELP = "onnx export"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of `sapiens2 export onnx`."""


def run(args: argparse.Namespace) -> int:
    from .arguments import UsageError

    raise UsageError("sapiens2 export onnx is not available in this build")
