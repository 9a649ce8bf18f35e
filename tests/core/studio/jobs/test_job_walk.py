"""A job is a descent, not a star (issue 27): `PredictJob` plans, hands a `FrameRun` to the runners and is never
called back by anything it runs. Measured on a real run by `scripts/job_walk.py` (a profiler over a tiny job of
two images and a three-frame sequence), and held on the import graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]


def test_nothing_a_job_runs_calls_back_into_the_job():
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "job_walk.py")], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    walk = json.loads(proc.stdout)
    assert walk["written"] == 5 and not walk["failures"], walk
    assert walk["files_visited"] > 40  # the profiler saw the run (engine, stages, store, formats, pipeline)
    assert walk["calls_into_the_job_module_from_below"] == 0, walk["by_caller"]


def test_the_job_module_is_imported_only_from_above():
    """Runners, stages and the output store never import `jobs/job.py`: only the engines, the checks, the
    `Studio` object and the front-ends do."""
    import ast

    allowed = ("core/studio/engines/", "core/studio/checks/", "core/studio/studio.py", "cli/", "comfy_nodes/")
    importers = []
    for package in ("core", "cli", "comfy_nodes"):
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[-1] == "job":
                    importers.append(rel)
    assert importers, "the check sees the job's importers"
    assert all(rel.startswith(allowed) for rel in importers), importers
