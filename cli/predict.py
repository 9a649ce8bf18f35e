"""`sapiens2 predict`: inputs → models → capture bundles, previews and keypoint JSON.

Order of work: validate everything cheap first (tasks, inputs, boxes file, checkpoints) so that a typo fails in a
second, not after a 5B model has loaded; then load each model once and stream images through them in batches.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.formats.exr import require_openexr
from ..core.formats.sequence import SequenceWriter
from ..core.pipeline.boxes import normalize_box
from .inputs import ImageJob, InputError, SequenceJob, collect_inputs, load_image
from .main import UsageError, parse_checkpoint_overrides, parse_tasks
from .outputs import remove_stale_frames, write_frame_outputs
from .progress import Progress

# Task order matters: seg runs first so pose can take person boxes from it and the dense layers can be masked.
TASK_ORDER = ("seg", "pose", "normal", "albedo", "pointmap")


@dataclass
class LoadedModel:
    task: str
    model: Any
    path: Path
    info: dict[str, Any]  # bundle "models" entry: task, size, checkpoint, sha256


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    if name != "cpu" and not name.startswith("cuda") and name != "mps":
        raise UsageError(f"--device {name!r}: use cpu, cuda, cuda:N or auto")
    return name


def resolve_checkpoints(args: argparse.Namespace, tasks: list[str]) -> dict[str, Path]:
    """TASK → checkpoint file: explicit --checkpoint first, else the official file (downloaded unless forbidden)."""
    from ..core.checkpoints import hub

    overrides = parse_checkpoint_overrides(args.checkpoint)
    unused = sorted(set(overrides) - set(tasks))
    if unused:
        raise UsageError(
            f"--checkpoint given for {', '.join(unused)}, which is not in --tasks {','.join(tasks)}"
        )
    paths: dict[str, Path] = {}
    problems: list[str] = []
    for task in tasks:
        if task in overrides:
            path = Path(overrides[task]).expanduser()
            if not path.is_file():
                raise InputError(f"--checkpoint {task}={path}: file not found")
            paths[task] = path
            continue
        try:
            paths[task] = hub.ensure_checkpoint(
                task, args.size, args.checkpoint_dir, allow_download=not args.no_download
            )
        except hub.HubError as exc:  # keep going: the user should learn about every missing file at once
            problems.append(f"{task}: {exc}")
    if len(problems) == 1:
        raise hub.HubError(problems[0].split(": ", 1)[1])
    if problems:
        raise hub.HubError(f"{len(problems)} checkpoints are missing:\n  " + "\n  ".join(problems))
    return paths


def load_models(
    paths: dict[str, Path], device: str, dtype: str, home: str | None, *, compile_models: bool = False
) -> dict[str, LoadedModel]:
    from ..core import load_model
    from ..core.checkpoints.hub import file_sha256

    models: dict[str, LoadedModel] = {}
    for task in TASK_ORDER:
        if task not in paths:
            continue
        path = paths[task]
        model = load_model(path, device=device, dtype=dtype, task=task)
        if compile_models:
            import torch

            model = torch.compile(model, dynamic=False)  # attribute access (task, spec…) passes through
        info = {
            "task": task,
            "size": model.spec.size,
            "checkpoint": path.name,
            "sha256": file_sha256(path, home),
        }
        models[task] = LoadedModel(task, model, path, info)
    return models


def read_boxes(path: str | None) -> dict[str, list[list[float]]] | list[list[float]] | None:
    """Boxes file: a list of [x1, y1, x2, y2] for every image, or {image file name or stem: [[…], …]}."""
    if path is None:
        return None
    file = Path(path)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--boxes {file}: file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"--boxes {file}: not valid JSON ({exc})") from None

    def check(boxes: Any, where: str) -> list[list[float]]:
        if isinstance(boxes, dict) or (
            isinstance(boxes, list) and len(boxes) == 4 and all(isinstance(v, (int, float)) for v in boxes)
        ):
            boxes = [boxes]  # one box given without the surrounding list
        if not isinstance(boxes, list):
            raise InputError(
                f"--boxes {file}: {where} must be a list of boxes [x1, y1, x2, y2] or "
                '{"x": …, "y": …, "width": …, "height": …}'
            )
        out = []
        for box in boxes:
            try:
                out.append(list(normalize_box(box)))
            except ValueError as exc:
                raise InputError(f"--boxes {file}: {where}: {exc}") from None
        return out

    if isinstance(doc, list):
        return check(doc, "the top-level list")
    if isinstance(doc, dict):
        return {str(k): check(v, f"entry {k!r}") for k, v in doc.items()}
    raise InputError(f"--boxes {file}: expected a list of boxes or an object keyed by image name")


def boxes_for(
    boxes: Any, source_name: str, frame_number: int | None = None, *, image: np.ndarray | None = None
) -> list[list[float]] | None:
    """The boxes file's boxes for one image (None: none given); with `image`, checked against its size so
    a box entirely outside it fails that image, named, instead of the whole batch."""
    chosen = None
    if isinstance(boxes, list):
        chosen = boxes
    elif boxes is not None:
        keys = [source_name, Path(source_name).stem, "*"]
        if frame_number is not None:
            keys.insert(0, f"{source_name}#{frame_number}")
        chosen = next((boxes[key] for key in keys if key in boxes), None)
    if chosen is None or image is None:
        return chosen
    size = (int(image.shape[1]), int(image.shape[0]))
    where = source_name if frame_number is None else f"{source_name}#{frame_number}"
    try:
        return [list(normalize_box(box, size)) for box in chosen]
    except ValueError as exc:
        raise InputError(f"{where}: --boxes: {exc}") from None


def auto_batch_size_for(models: dict[str, LoadedModel]) -> int:
    """The smallest batch that every loaded model fits in free GPU memory (1 on CPU)."""
    from ..core.arch.batching import auto_batch_size

    sizes = [auto_batch_size(getattr(m.model, "_orig_mod", m.model)) for m in models.values()]
    return min(sizes) if sizes else 1


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def run_predict(args: argparse.Namespace) -> int:
    from . import engine

    tasks = parse_tasks(args.tasks)
    require_openexr()  # bundles need it: fail before any model runs
    if args.mesh and "pointmap" not in tasks:
        raise UsageError("--mesh needs the pointmap task; add pointmap to --tasks")
    if args.batch_size != "auto" and args.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    if args.fps is not None and not args.fps > 0:
        raise UsageError(f"--fps must be positive, got {args.fps}")
    jobs = collect_inputs(args.inputs)
    boxes = read_boxes(args.boxes)
    device = resolve_device(args.device)
    paths = resolve_checkpoints(args, tasks)
    models = load_models(paths, device, args.dtype, args.checkpoint_dir, compile_models=args.compile)
    if args.batch_size == "auto":
        args.batch_size = auto_batch_size_for(models)
    out_dir = Path(args.out).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    options = engine.RunOptions(
        flip_test=args.flip_test, with_previews=not args.no_previews, mesh_format=args.mesh
    )

    singles = [job for job in jobs if isinstance(job, ImageJob)]
    sequences = [job for job in jobs if isinstance(job, SequenceJob)]
    total = len(singles) + sum(len(s.frames) for s in sequences if s.video is None)
    progress = Progress(total if not any(s.video for s in sequences) else None)
    failures: list[str] = []
    warnings: list[str] = []
    written = 0
    try:
        for chunk in _chunks(singles, args.batch_size):
            loaded = []
            for job in chunk:
                try:
                    image = load_image(job.path)
                    loaded.append((job, image, boxes_for(boxes, job.path.name, image=image)))
                except InputError as exc:
                    failures.append(str(exc))
                    progress.update(1, job.name)
            if not loaded:
                continue
            frames = engine.predict_frames(
                models,
                [image for _, image, _ in loaded],
                [image_boxes for _, _, image_boxes in loaded],
                [job.path.name for job, _, _ in loaded],
                options,
                warn=warnings.append,
            )
            for (job, image, _), frame in zip(loaded, frames):
                write_frame_outputs(
                    out_dir,
                    job.name,
                    frame,
                    image,
                    with_previews=options.with_previews,
                    mesh_format=options.mesh_format,
                )
                written += 1
                progress.update(1, job.name)
        for sequence in sequences:
            count, error = _run_sequence(
                sequence, models, boxes, out_dir, args, options, progress, warnings.append
            )
            written += count
            if error is not None:  # a broken frame stops its sequence (no index), not the whole batch
                failures.append(
                    f"{error} (sequence {sequence.name!r} stopped after {count} frame(s); no index)"
                )
    finally:
        progress.close()
    for message in dict.fromkeys(warnings):
        print(f"sapiens2 predict: note: {message}", file=sys.stderr)
    for message in failures:
        print(f"sapiens2 predict: error: {message}", file=sys.stderr)
    print(f"sapiens2: wrote {written} result(s) to {out_dir}", file=sys.stderr)
    if failures:
        print(f"sapiens2 predict: {len(failures)} input(s) failed (see above)", file=sys.stderr)
        return 1
    return 0


def _run_sequence(
    sequence: SequenceJob,
    models: dict[str, LoadedModel],
    boxes: Any,
    out_dir: Path,
    args: argparse.Namespace,
    options: Any,
    progress: Progress,
    warn: Any,
) -> tuple[int, InputError | None]:
    """Process a sequence frame-chunk by frame-chunk; the index is written only when every frame succeeded.

    Returns (frames written, the input error that stopped the sequence or None).
    """
    from . import engine

    try:
        sequence.probe()  # a video's frame rate, before the writer and smoother use it
    except InputError as exc:
        return 0, exc
    folder = out_dir / sequence.name
    fps = args.fps or sequence.fps
    writer = SequenceWriter(folder, sequence.name, fps)
    smoother = engine.SequenceSmoother(fps, smooth=args.smooth)  # track ids always; smoothing on request
    buffer: list[tuple[str, np.ndarray]] = []
    count = 0
    numbering = sequence.frame_numbers()
    written: set[int] = set()

    def flush() -> None:
        nonlocal count
        if not buffer:
            return
        numbers = (
            numbering[count : count + len(buffer)]
            if numbering is not None
            else list(range(count + 1, count + len(buffer) + 1))
        )
        frames = engine.predict_frames(
            models,
            [image for _, image in buffer],
            [boxes_for(boxes, src, n, image=image) for (src, image), n in zip(buffer, numbers)],
            [src for src, _ in buffer],
            options,
            warn=warn,
            smoother=smoother,
        )
        for (_src, image), frame, number in zip(buffer, frames, numbers):
            frame.frame = number
            name = f"{sequence.name}_{number:04d}"
            write_frame_outputs(
                folder,
                name,
                frame,
                image,
                with_previews=options.with_previews,
                mesh_format=options.mesh_format,
            )
            writer.entries.append({"frame": number, "json": f"{name}.json"})
            written.add(number)
            progress.update(1, f"{sequence.name} #{number}")
        count += len(buffer)
        buffer.clear()

    try:
        for source, image in sequence.iter_frames():
            buffer.append((source, image))
            if len(buffer) >= args.batch_size:
                flush()
        flush()
    except InputError as exc:
        return count, exc
    if count == 0:
        return 0, InputError(f"{sequence.video or sequence.name}: no frames could be read")
    writer.close()
    remove_stale_frames(folder, sequence.name, written)
    return count, None
