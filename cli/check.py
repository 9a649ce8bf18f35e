"""`sapiens2 check`: arguments → core.studio.checks.selfcheck → the report on stdout.

Exit status: 0 when every check passes, 3 when any check warns (so scripts can gate on it), 1/2 for errors.
"""

from __future__ import annotations

import argparse

from ..core.studio.checks.selfcheck import check_images
from ..core.studio.errors import StudioError
from .arguments import UsageError, job_spec

EXIT_WARNINGS = 3


def run_check(args: argparse.Namespace) -> int:
    try:
        spec = job_spec(args)
        spec.validate()
    except StudioError as exc:
        raise UsageError(exc.message, hints=exc.hints) from None
    warned = False
    for checked in check_images(spec):
        print(f"{checked.name}:")
        if checked.report is None:
            print("  no check can run with these tasks (add normal, or pose/pointmap with seg)")
            continue
        for line in checked.report.lines():
            print(f"  {line}")
        print("  OK" if checked.report.ok else "  POOR: see the warnings above and docs/conventions.md")
        warned |= not checked.report.ok
    return EXIT_WARNINGS if warned else 0
