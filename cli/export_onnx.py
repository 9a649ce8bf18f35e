"""`sapiens2 export onnx OUT.onnx (--task TASK [--size SIZE] | --checkpoint PATH)`: a model (an official task and
size, or any checkpoint file) as one ONNX file — backbone + head, dynamic batch, fp32 or fp16 weights,
self-describing metadata (docs/deploy.md). Needs the `onnx` extra. The work is `core.onnx.export_onnx`; this module
only translates the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "a model (backbone + head) as an ONNX file for ONNX Runtime, TensorRT, OpenVINO, DirectML, CoreML"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of `sapiens2 export onnx`."""
    from ..core.catalogue import ALL_TASKS, SIZES

    p.add_argument(
        "out", metavar="OUT.onnx", help="the file to write (weights over 2 GB go to OUT.onnx.data)"
    )
    p.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="a .safetensors file of any size and task (inferred from its shapes); else --task and --size",
    )
    p.add_argument(
        "--task", choices=ALL_TASKS, help="the official file's task (with --checkpoint: must match)"
    )
    p.add_argument("--size", choices=SIZES, help="the official file's size (default: the task's own)")
    p.add_argument(
        "--dtype",
        choices=("fp32", "fp16"),
        default="fp32",
        help="weights and compute of the graph (inputs/outputs stay float32): fp32 is within ~1e-5 of PyTorch "
        "fp32, fp16 within 3 %% (docs/deploy.md)",
    )
    p.add_argument(
        "--checkpoint-dir", help="checkpoint folder (default: $SAPIENS2_HOME or ~/.cache/sapiens2)"
    )
    p.add_argument("--no-download", action="store_true", help="never download; fail if the file is missing")
    p.add_argument("--overwrite", action="store_true", help="replace OUT.onnx if it exists")
    p.add_argument("--json", action="store_true", help="print what was written as JSON on stdout")


def run(args: argparse.Namespace) -> int:
    from ..core import catalogue
    from ..core.checkpoints import hub
    from ..core.onnx import OnnxExportError, export_onnx
    from ..core.onnx.export import check_size_exportable

    # argument problems are OnnxExportError (a Sapiens2Error): importing cli.arguments here would close the
    # cycle cli.arguments -> cli.export -> cli.export_onnx -> cli.arguments
    if args.checkpoint is None and args.task is None:
        raise OnnxExportError("say what to export: --checkpoint PATH, or --task TASK (and --size SIZE)")
    if args.checkpoint is not None and args.size is not None:
        raise OnnxExportError(
            "--size picks an official file; drop it with --checkpoint (the size is in the shapes)"
        )
    if args.checkpoint is not None:
        source = Path(args.checkpoint).expanduser()
        if not source.is_file():
            raise OnnxExportError(f"checkpoint not found: {source}")
    else:
        size = args.size or catalogue.default_size(args.task)
        check_size_exportable(size)  # before a 4+ GB download that could not be exported
        source = hub.ensure_checkpoint(
            args.task, size, args.checkpoint_dir, allow_download=not args.no_download
        )
    sha = hub.file_sha256(source, args.checkpoint_dir)
    report = export_onnx(
        source, args.out, task=args.task, dtype=args.dtype, source_sha256=sha, overwrite=args.overwrite
    )
    if args.json:
        meta = report.metadata
        print(
            json.dumps(
                {
                    "path": str(report.path),
                    "bytes": report.size_bytes,
                    "seconds": round(report.seconds, 2),
                    "task": meta.task,
                    "size": meta.size,
                    "dtype": meta.weights_dtype,
                    "input_size": list(meta.input_size),
                    "outputs": list(meta.outputs),
                }
            )
        )
    else:
        print(report.path)
    print(f"sapiens2 export onnx: {report.describe()}", file=sys.stderr)
    return 0
