"""`sapiens2 finalize`: complete the sequences render-farm chunks wrote (core.studio.jobs.finalize) → a summary."""

from __future__ import annotations

import argparse
import sys

from ..core.studio.jobs.finalize import finalize
from ..core.studio.runtime.host import Host


def run_finalize(args: argparse.Namespace) -> int:
    report = finalize(args.out, smooth=args.smooth, host=Host(on_note=None), staging=args.staging)
    for message in report.notes:
        print(f"sapiens2 finalize: note: {message}", file=sys.stderr)
    names = ", ".join(report.sequences)
    kept = f" ({report.kept} already through the pass)" if report.kept else ""
    print(
        f"sapiens2: finalized {report.finalized} frame(s){kept}; indexed {len(report.sequences)} sequence(s): "
        f"{names}" + (f"; published to {report.published}" if report.published else ""),
        file=sys.stderr,
    )
    return 0
