"""`sapiens2 predict`: command-line arguments → a predict job (core.studio.job) → a summary on stderr."""

from __future__ import annotations

import argparse
import sys

from ..core.studio.errors import StudioError
from ..core.studio.host import Host
from ..core.studio.job import JobSpec, PredictJob
from .arguments import UsageError, parse_checkpoint_overrides, parse_tasks
from .progress import Progress


def job_spec(args: argparse.Namespace) -> JobSpec:
    """The job the arguments describe (no file is read here)."""
    return JobSpec(
        inputs=list(args.inputs),
        out=args.out,
        tasks=tuple(parse_tasks(args.tasks)),
        size=args.size,
        checkpoints=dict(parse_checkpoint_overrides(args.checkpoint)),
        checkpoint_dir=args.checkpoint_dir,
        allow_download=not args.no_download,
        device=args.device,
        dtype=args.dtype,
        compile=args.compile,
        batch_size=args.batch_size,
        flip_test=args.flip_test,
        boxes_file=args.boxes,
        smooth=args.smooth,
        fps=args.fps,
        previews=not args.no_previews,
        mesh=args.mesh,
        writers=args.writers,
    )


def run_predict(args: argparse.Namespace) -> int:
    try:
        job = PredictJob(job_spec(args), host=Host(on_note=None))  # notes are printed after the progress bar
    except StudioError as exc:  # the spec itself is wrong: a usage error
        raise UsageError(exc.message, hints=exc.hints) from None
    progress = Progress(job.prepare())
    job.on_item = progress.update
    try:
        report = job.run()
    finally:
        progress.close()
    for message in report.notes:
        print(f"sapiens2 predict: note: {message}", file=sys.stderr)
    for message in report.failures:
        print(f"sapiens2 predict: error: {message}", file=sys.stderr)
    print(f"sapiens2: wrote {report.written} result(s) to {report.out}", file=sys.stderr)
    if report.failures:
        print(f"sapiens2 predict: {len(report.failures)} input(s) failed (see above)", file=sys.stderr)
        return 1
    return 0
