"""The `sapiens2` command line's arguments: the parser, and the checks argparse cannot do itself."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..core.catalogue import PRETRAIN, TASK_SIZES_RELEASED
from ..core.catalogue import TASKS as CATALOGUE_TASKS
from ..core.errors import Sapiens2Error
from ..core.studio.pipelining import DEFAULT_WRITERS

TASKS = CATALOGUE_TASKS
SIZES = TASK_SIZES_RELEASED


class UsageError(Sapiens2Error, ValueError):
    """The command line itself is wrong (unknown task, malformed --checkpoint, …)."""


def _batch_size(text: str) -> int | str:
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', not {text!r}") from None


def _writers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of writers (0 or more), not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of writers (0 or more), not {value}")
    return value


def parse_tasks(text: str) -> list[str]:
    tasks = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not tasks:
        raise UsageError("--tasks is empty; choose from " + ",".join(TASKS))
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise UsageError(f"unknown task {unknown[0]!r} in --tasks; choose from {', '.join(TASKS)}")
    return list(dict.fromkeys(tasks))


def parse_checkpoint_overrides(items: Sequence[str] | None) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for item in items or []:
        task, sep, path = item.partition("=")
        task = task.strip().lower()
        if not sep or not path:
            raise UsageError(f"--checkpoint expects TASK=PATH, got {item!r}")
        if task not in TASKS:
            raise UsageError(f"--checkpoint {item!r}: unknown task {task!r}; choose from {', '.join(TASKS)}")
        overrides[task] = path
    return overrides


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """Which models run, where and how: shared by `predict` and `check`."""
    p.add_argument("--tasks", default="pose,seg,normal,pointmap", help="comma list of: " + ",".join(TASKS))
    p.add_argument("--size", default="0.4b", choices=SIZES, help="model size of the official checkpoints")
    p.add_argument(
        "--checkpoint",
        action="append",
        metavar="TASK=PATH",
        help="use this .safetensors file for TASK (any size, inferred from its shapes; overrides --size)",
    )
    p.add_argument(
        "--checkpoint-dir", help="checkpoint folder (default: $SAPIENS2_HOME or ~/.cache/sapiens2)"
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument(
        "--dtype", default="auto", choices=("auto", "fp32", "bf16", "fp16"), help="auto: bf16 on CUDA"
    )
    p.add_argument(
        "--flip-test",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pose: average with the mirrored image, as the official pipeline does (default on; "
        "--no-flip-test is ~2x faster)",
    )
    p.add_argument(
        "--no-download", action="store_true", help="never download; fail if a checkpoint is missing"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sapiens2",
        description="Sapiens2 human-vision models: 308-keypoint pose, body-part segmentation, normals, albedo, "
        "pointmap. Writes capture bundles (EXR + JSON) for Blender/Nuke and PNG previews.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("predict", help="run models on images, folders, numbered frames or videos")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="image files, folders, numbered frames, videos")
    add_model_arguments(p)
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--batch-size",
        type=_batch_size,
        default=1,
        help="images per forward pass (default 1), or 'auto': as many as fit in free GPU memory",
    )
    p.add_argument(
        "--compile", action="store_true", help="torch.compile the models (slow first batch, faster after)"
    )
    p.add_argument("--boxes", metavar="FILE.json", help="person boxes per image (see docs/cli.md)")
    p.add_argument(
        "--smooth", action="store_true", help="sequences: temporal smoothing of keypoints and scale"
    )
    p.add_argument(
        "--fps", type=float, default=None, help="sequences: frame rate to record (default 24 or video)"
    )
    p.add_argument("--no-previews", action="store_true", help="write only bundles and keypoint JSON")
    p.add_argument(
        "--writers",
        type=_writers,
        default=DEFAULT_WRITERS,
        help=f"frames written in parallel while the models run on the next ones (default {DEFAULT_WRITERS}; "
        "0: write each frame before the next one starts)",
    )
    p.add_argument("--mesh", choices=("ply", "glb"), help="also export the pointmap as a coloured mesh")

    d = sub.add_parser("download", help="download an official checkpoint (verified sha256)")
    d.add_argument("--task", required=True, choices=(*TASKS, PRETRAIN))
    d.add_argument("--size", required=True, help="0.1b (pretrain), 0.4b, 0.8b, 1b, 1b-4k (pretrain), 5b")
    d.add_argument(
        "--checkpoint-dir", help="checkpoint folder (default: $SAPIENS2_HOME or ~/.cache/sapiens2)"
    )
    d.add_argument("--force", action="store_true", help="download again even if the file exists")

    c = sub.add_parser(
        "check",
        help="run the tasks on images and report the geometry self-checks (normals vs pointmap, keypoints vs "
        "segmentation); writes nothing",
    )
    c.add_argument("inputs", nargs="+", metavar="INPUT", help="image files, folders, numbered frames, videos")
    add_model_arguments(c)

    i = sub.add_parser("info", help="print what a checkpoint is (size, task, architecture) from its header")
    i.add_argument("checkpoint", help="path to a .safetensors file")
    i.add_argument("--sha256", action="store_true", help="also hash the file")
    return parser
