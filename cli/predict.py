"""`sapiens2 predict`: command-line arguments → a predict job (core.studio.job) → a summary on stderr."""

from __future__ import annotations

import argparse
import sys

from ..core.studio.engines.dispatch import run_prepared
from ..core.studio.errors import StudioError
from ..core.studio.host import Host
from ..core.studio.job import PredictJob
from .arguments import UsageError, job_spec
from .progress import Progress


def run_predict(args: argparse.Namespace) -> int:
    try:
        job = PredictJob(job_spec(args), host=Host(on_note=None))  # notes are printed after the progress bar
    except StudioError as exc:  # the spec itself is wrong: a usage error
        raise UsageError(exc.message, hints=exc.hints) from None
    progress = Progress(job.prepare())
    job.on_item = progress.update
    try:
        report = run_prepared(job)  # the engine the spec names
    finally:
        progress.close()
    for message in report.notes:
        print(f"sapiens2 predict: note: {message}", file=sys.stderr)
    for message in report.retried:
        print(f"sapiens2 predict: retried: {message}", file=sys.stderr)
    for message in report.failures:
        print(f"sapiens2 predict: error: {message}", file=sys.stderr)
    kept = f", kept {report.skipped} verified result(s)" if report.skipped else ""
    where = f"{report.published} (staged in {report.out})" if report.published else str(report.out)
    print(f"sapiens2: wrote {report.written} result(s) to {where}{kept}", file=sys.stderr)
    if report.failures:
        print(f"sapiens2 predict: {len(report.failures)} input(s) failed (see above)", file=sys.stderr)
        return 1
    return 0
