"""The `sapiens2` command line's arguments: the parser, and the checks argparse cannot do itself."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .. import __version__
from ..core.catalogue import (
    DEFAULT_SIZE,
    DEFAULT_TASKS,
    PRETRAIN,
    TASK_LABELS,
    TASK_SIZES_RELEASED,
    default_size,
)
from ..core.catalogue import TASKS as CATALOGUE_TASKS
from ..core.errors import Sapiens2Error
from ..core.formats.compressions import DEFAULT_EXR_COMPRESSION, EXR_COMPRESSIONS
from ..core.studio.engines import ENGINES
from ..core.studio.jobs.pipelining import DEFAULT_WRITERS

if TYPE_CHECKING:
    from ..core.studio.jobs.job import JobSpec

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


def _output_place(text: str) -> str:
    """`--out`: an empty or blank value would write into the current folder, where nobody looks for results."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "is empty, which would write into the current folder; give a folder name (e.g. --out results)"
        )
    return text


def _count(minimum: int, noun: str) -> Callable[[str], int]:
    """An argparse type for a whole number of `noun` of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number of {noun} ({minimum} or more), not {text!r}"
            ) from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a number of {noun} ({minimum} or more), not {value}")
        return value

    return parse


_writers = _count(0, "writers")
_workers = _count(1, "workers")


def _frame_range(text: str) -> tuple[int, int]:
    first, sep, last = text.partition("-")
    try:
        a, b = int(first), int(last if sep else first)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a frame range FIRST-LAST (e.g. 1001-1100), not {text!r}"
        ) from None
    return a, b


def add_trust_argument(p: argparse.ArgumentParser) -> None:
    """`--trust-task-code`: the opt-in before installed task plug-ins' code runs (docs/tasks.md)."""
    p.add_argument(
        "--trust-task-code",
        nargs="?",
        const="*",
        default=None,
        metavar="NAME[,NAME]",
        help="run the code of installed task plug-ins (entry points in sapiens2_studio.tasks, "
        "$SAPIENS2_TASK_MODULES): all of them, or only those named (default: $SAPIENS2_TRUST_TASKS, else none)",
    )


def load_task_plugins(args: argparse.Namespace) -> None:
    """Register the trusted plug-in tasks; untrusted ones are only remembered, and refused when asked for."""
    from ..core.tasks import registry

    registry.load_plugins(trust=getattr(args, "trust_task_code", None))


def _check_task_name(task: str, where: str) -> None:
    """A registered task (built-in or trusted plug-in); an untrusted plug-in's refusal says how to trust it."""
    from ..core.tasks import registry
    from ..core.tasks.errors import UntrustedTaskError

    if task in TASKS or registry.has(task):
        return
    try:
        registry.get(task)
    except UntrustedTaskError:
        raise
    except Sapiens2Error:
        choices = ", ".join(dict.fromkeys((*TASKS, *registry.names())))
        raise UsageError(f"unknown task {task!r} in {where}; choose from {choices}") from None


def parse_tasks(text: str) -> list[str]:
    tasks = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not tasks:
        raise UsageError("--tasks is empty; choose from " + ",".join(TASKS))
    for task in tasks:
        _check_task_name(task, "--tasks")
    return list(dict.fromkeys(tasks))


def parse_checkpoint_overrides(items: Sequence[str] | None) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for item in items or []:
        task, sep, path = item.partition("=")
        task = task.strip().lower()
        if not sep or not path:
            raise UsageError(f"--checkpoint expects TASK=PATH, got {item!r}")
        _check_task_name(task, f"--checkpoint {item!r}")
        overrides[task] = path
    return overrides


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """Which models run, where and how: shared by `predict` and `check`."""
    p.add_argument(
        "--tasks",
        default=",".join(DEFAULT_TASKS),
        help="comma list of: " + ",".join(TASKS) + f" (default {','.join(DEFAULT_TASKS)})",
    )
    own_sizes = ", ".join(f"{t} {default_size(t)}" for t in TASKS if default_size(t) != DEFAULT_SIZE)
    p.add_argument(
        "--size",
        default=None,
        choices=SIZES,
        help=f"model size of every official checkpoint (default: each task's own: {DEFAULT_SIZE}, {own_sizes})",
    )
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
    add_trust_argument(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sapiens2",
        description="Sapiens2 human-vision models: "
        + ", ".join(TASK_LABELS[t] for t in TASKS)
        + ". Writes capture bundles (EXR + JSON) for Blender/Nuke and PNG previews.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"sapiens2 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("predict", help="run models on images, folders, numbered frames or videos")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="image files, folders, numbered frames, videos")
    add_model_arguments(p)
    p.add_argument(
        "--out",
        required=True,
        type=_output_place,
        help="output folder, or a URL (s3://bucket/shot, gs://…; needs 'sapiens2-studio[remote]' and the "
        "protocol's package): staged in --staging, published as frames complete (docs/scale.md)",
    )
    add_staging_argument(p)
    p.add_argument(
        "--batch-size",
        type=_batch_size,
        default=1,
        help="images per forward pass (default 1), or 'auto': as many as fit in free GPU memory",
    )
    p.add_argument(
        "--compile", action="store_true", help="torch.compile the models (slow first batch, faster after)"
    )
    p.add_argument(
        "--runtime",
        choices=("torch", "onnxruntime"),
        default="torch",
        help="who runs the models: torch (default), or onnxruntime on .onnx files from 'sapiens2 export onnx' "
        "(a .safetensors is exported once; needs 'sapiens2-studio[onnx]'; docs/deploy.md)",
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
        "--no-space-check",
        dest="space_check",
        action="store_false",
        help="start even when the estimate of what the run writes exceeds the free space on --out's disk",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "json"),
        default="auto",
        help="auto: a bar on a terminal, a line every 30 s in logs (stderr); json: one JSON event per line on "
        "stdout for programs driving the CLI (docs/cli.md, 'Progress stream')",
    )
    p.add_argument(
        "--writers",
        type=_writers,
        default=DEFAULT_WRITERS,
        help=f"frames written in parallel while the models run on the next ones (default {DEFAULT_WRITERS}; "
        "0: write each frame before the next one starts)",
    )
    p.add_argument("--mesh", choices=("ply", "glb"), help="also export the pointmap as a coloured mesh")
    p.add_argument(
        "--usd",
        choices=("usda", "usdc", "usdz"),
        help="also write each input's capture as one USD stage next to its bundle at the end of the run "
        "(mesh, skeletons, camera; as 'sapiens2 export usd'; needs 'sapiens2-studio[usd]')",
    )
    p.add_argument(
        "--exr-compression",
        choices=EXR_COMPRESSIONS,
        default=DEFAULT_EXR_COMPRESSION,
        help="the bundle EXRs' compression, all lossless: zip (default, smallest), zips (one scanline per "
        "block, as Nuke writes), none (fastest to write and read, ~2.5x the bytes)",
    )
    p.add_argument(
        "--skip-existing",
        action="store_true",
        help="resume: keep frames and tasks whose outputs in --out are verified complete (same input, "
        "checkpoint and settings), do only the rest",
    )
    p.add_argument(
        "--clean",
        action="store_true",
        help="each frame holds only the tasks of this run (default: tasks not run now are kept from the "
        "earlier results), and results whose input is gone are deleted (default: kept, reported as orphaned)",
    )
    p.add_argument(
        "--nonfinite",
        choices=("warn", "error"),
        default="warn",
        help="model output with NaN/inf: warn and store it as invalid (default), or refuse the frame",
    )
    p.add_argument(
        "--run-id",
        help="the run's id (default: a new one); a render-farm job gives all its chunks the same one",
    )
    p.add_argument(
        "--frames",
        type=_frame_range,
        metavar="FIRST-LAST",
        help="sequences and videos (numbered from 1): only these frame numbers (a render-farm chunk, needs "
        "--run-id; a video's chunk decodes only its range); the frames are "
        "written with their temporal pass pending, `sapiens2 finalize` completes the sequence (docs/scale.md)",
    )
    p.add_argument(
        "--shot-frames",
        type=_frame_range,
        metavar="FIRST-LAST",
        help="with --frames: every frame of the shot, so finalize refuses until all are there (default: the "
        "frames the shot's first chunk sees, fixed from then on)",
    )
    p.add_argument(
        "--take-over",
        action="store_true",
        help="with --frames: a shot planned under another --run-id is planned anew under this one "
        "(default: refused)",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="local: this process (default); ray: frames split across Ray workers (pip install "
        "'sapiens2-studio[ray]', docs/scale.md)",
    )
    p.add_argument(
        "--ray-address", help="ray engine: auto or HOST:PORT of a running cluster (default: start one)"
    )
    p.add_argument(
        "--workers", type=_workers, help="ray engine: model workers (default: one per GPU, else 1)"
    )
    p.add_argument(
        "--gpus-per-worker", type=float, help="ray engine: GPUs per worker (default 1 on GPUs, else 0)"
    )

    f = sub.add_parser(
        "finalize",
        help="complete the sequences that render-farm chunks (--frames) wrote into a folder: temporal pass "
        "in frame order, then the index",
    )
    f.add_argument("out", metavar="OUT", help="the output folder (or URL) the chunks wrote into")
    add_staging_argument(f)
    smooth = f.add_mutually_exclusive_group()
    smooth.add_argument(
        "--smooth",
        action="store_true",
        default=None,
        help="smooth keypoints and scale (default: as the chunks)",
    )
    smooth.add_argument(
        "--no-smooth", dest="smooth", action="store_false", help="track ids only, no smoothing"
    )

    d = sub.add_parser("download", help="download an official checkpoint (verified sha256)")
    d.add_argument("--task", required=True, choices=(*TASKS, PRETRAIN))
    d.add_argument(
        "--size",
        help="0.1b (pretrain), 0.4b, 0.8b, 1b, 1b-4k (pretrain), 5b (default: the task's, as predict uses: "
        "0.4b, 1b for matting)",
    )
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

    v = sub.add_parser(
        "convert", help="convert a trusted pickled checkpoint (.pth/.bin/.pt) to .safetensors, once"
    )
    v.add_argument("source", help="the .pth/.bin/.pt file (read with torch.load(weights_only=True))")
    v.add_argument("destination", help="the .safetensors file to write")

    i = sub.add_parser(
        "info",
        help="print what a checkpoint is (size, task, architecture) from its header; without one, what this "
        "install is (version, device, checkpoints found)",
    )
    i.add_argument("checkpoint", nargs="?", help="path to a .safetensors file")
    i.add_argument(
        "--checkpoint-dir",
        help="without CHECKPOINT: the folder to list (default: $SAPIENS2_HOME or ~/.cache/sapiens2)",
    )
    i.add_argument(
        "--json", action="store_true", help="without CHECKPOINT: print the report as one JSON object"
    )
    i.add_argument("--sha256", action="store_true", help="also hash the file")
    add_trust_argument(i)

    from .export import add_export_parser
    from .selftest import add_selftest_parser

    add_export_parser(sub)
    add_selftest_parser(sub)
    return parser


def add_staging_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--staging",
        metavar="DIR",
        help="with an output URL: the local folder where frames are committed before they are published "
        "(default: one per URL under $SAPIENS2_STAGING or ~/.cache/sapiens2/staging; keep it to resume fast)",
    )


def job_spec(args: argparse.Namespace) -> JobSpec:
    """The job the arguments describe (no file is read here); `check` has only the model arguments, so the
    predict-only ones fall back to the job's defaults."""
    from ..core.studio.jobs.job import (
        JobSpec,  # torch comes with it: not at import time, so --help stays instant
    )

    defaults = JobSpec(inputs=[], out=".")
    load_task_plugins(args)
    return JobSpec(
        inputs=list(args.inputs),
        out=getattr(args, "out", defaults.out),
        tasks=tuple(parse_tasks(args.tasks)),
        size=args.size,
        checkpoints=dict(parse_checkpoint_overrides(args.checkpoint)),
        checkpoint_dir=args.checkpoint_dir,
        allow_download=not args.no_download,
        device=args.device,
        dtype=args.dtype,
        compile=getattr(args, "compile", defaults.compile),
        runtime=getattr(args, "runtime", defaults.runtime),
        batch_size=getattr(args, "batch_size", defaults.batch_size),
        flip_test=args.flip_test,
        boxes_file=getattr(args, "boxes", defaults.boxes_file),
        smooth=getattr(args, "smooth", defaults.smooth),
        fps=getattr(args, "fps", defaults.fps),
        previews=not getattr(args, "no_previews", not defaults.previews),
        mesh=getattr(args, "mesh", defaults.mesh),
        exr_compression=getattr(args, "exr_compression", defaults.exr_compression),
        skip_existing=getattr(args, "skip_existing", defaults.skip_existing),
        clean=getattr(args, "clean", defaults.clean),
        nonfinite=getattr(args, "nonfinite", defaults.nonfinite),
        writers=getattr(args, "writers", defaults.writers),
        run_id=getattr(args, "run_id", defaults.run_id),
        frames=getattr(args, "frames", defaults.frames),
        engine=getattr(args, "engine", defaults.engine),
        ray_address=getattr(args, "ray_address", defaults.ray_address),
        workers=getattr(args, "workers", defaults.workers),
        gpus_per_worker=getattr(args, "gpus_per_worker", defaults.gpus_per_worker),
        staging=getattr(args, "staging", defaults.staging),
        shot_frames=getattr(args, "shot_frames", defaults.shot_frames),
        take_over=getattr(args, "take_over", defaults.take_over),
        space_check=getattr(args, "space_check", defaults.space_check),
    )
