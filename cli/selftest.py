"""`sapiens2 selftest`: does this install work? Runs every task offline on generated weights (core/studio/checks/selftest.py)
and says so in one last line; exit 0 when every check passed, 1 with one line per failure otherwise."""

from __future__ import annotations

import argparse
import sys


def add_selftest_parser(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "selftest",
        help="check this install offline: every task on generated tiny weights and images in a temporary "
        "folder (bundles written and read back); writes nothing else",
    )
    s.add_argument(
        "--device", default="auto", help="auto (default: CUDA, else MPS, else CPU), cpu, cuda, cuda:1, mps"
    )


def run_selftest(args: argparse.Namespace) -> int:
    from ..core.studio.checks.selftest import run_selftest as selftest

    print("sapiens2 selftest: offline, on generated tiny weights (their results are noise, not a person)")
    report = selftest(args.device, on_line=print)
    facts = report.facts
    print(
        f"  sapiens2-studio {facts['sapiens2_studio']}, Python {facts['python']}, torch {facts['torch']}, "
        f"numpy {facts['numpy']}, OpenEXR {facts['openexr'] or 'not installed'}"
    )
    print(f"  models ran on {facts.get('device_reason', 'no device: no model ran')}")
    if report.notes:  # random weights fail the geometry checks by design: not the install's fault
        print(f"  {len(report.notes)} note(s) from the geometry checks, expected on random weights")
    if report.ok:
        print(
            f"selftest passed: this install runs every task end to end ({report.seconds:.1f} s); nothing was "
            "downloaded and nothing written outside a temporary folder"
        )
        return 0
    for failure in report.failures:
        print(f"sapiens2 selftest: error: {failure}", file=sys.stderr)
    print(f"selftest FAILED: {len(report.failures)} problem(s), see above", file=sys.stderr)
    return 1
