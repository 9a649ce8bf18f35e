"""`sapiens2 export FORMAT …`: one subcommand per interchange format; each format's arguments and work live in
its own module (`export_usd`; ONNX, issue 30, joins here) so the parser stays light and the formats stay independent."""

from __future__ import annotations

import argparse

from . import export_onnx, export_usd

FORMATS = {"onnx": export_onnx, "usd": export_usd}


def add_export_parser(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("export", help="export a capture (USD) or a model (ONNX) for other tools")
    kinds = e.add_subparsers(dest="export_format", metavar="FORMAT", required=True)
    for name, module in FORMATS.items():
        module.add_arguments(kinds.add_parser(name, help=module.HELP, description=module.__doc__))


def run_export(args: argparse.Namespace) -> int:
    return FORMATS[args.export_format].run(args)
