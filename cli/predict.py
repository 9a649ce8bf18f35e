"""`sapiens2 predict`: command-line arguments → a predict job (core.studio.jobs.job) → a summary on stderr, and with
`--progress json` a stream of JSON events on stdout (cli/progress.py `Events`, docs/cli.md "Progress stream")."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..core.studio.engines.dispatch import run_prepared
from ..core.studio.errors import StudioError
from ..core.studio.jobs.job import PredictJob
from ..core.studio.runtime.host import Host
from . import export_usd
from .arguments import UsageError, job_spec
from .progress import Events, FrameEvents, Progress


class EventHost(Host):
    """The plain host, plus a `model_loaded` event when a model first runs (the engine loads models lazily, only
    for the frames that need them, and activates them right before computing) and live `warning` events."""

    def __init__(self, events: Events) -> None:
        super().__init__(on_note=events.warning if events.enabled else None)  # else printed after the bar
        self.events = events
        self._announced: set[int] = set()

    def activate_all(self, models: dict[str, Any]) -> Any:
        for task, loaded in models.items():
            if id(loaded) not in self._announced:
                self._announced.add(id(loaded))
                plan = loaded.plan
                self.events.emit(
                    "model_loaded",
                    task=task,
                    checkpoint=loaded.checkpoint,
                    path=os.fspath(loaded.path) if loaded.path else None,
                    size=getattr(loaded.spec, "size", None),
                    device=str(plan.device),
                    dtype=plan.dtype_name,
                    runtime=loaded.runtime,  # "onnxruntime": with the execution provider that runs it
                    **({"provider": loaded.model.provider} if loaded.runtime == "onnxruntime" else {}),
                )
        return super().activate_all(models)


def _inputs(job: PredictJob) -> list[dict[str, Any]]:
    """The start event's inputs, as the engine collected them (names are the output names)."""
    out = []
    for item in job.jobs:
        if hasattr(item, "frames"):
            kind = "video" if item.video is not None else "sequence"
            frames = None if item.video is not None else len(item.frames)
            path = item.video if item.video is not None else (item.frames[0].parent if item.frames else None)
            out.append({"kind": kind, "name": item.name, "frames": frames, "path": os.fspath(path or "")})
        else:
            out.append({"kind": "image", "name": item.name, "frames": 1, "path": os.fspath(item.path)})
    return out


def _results(job: PredictJob) -> list[dict[str, Any]]:
    """What to open: each input's bundle JSON (an image's frame, a sequence's index) and whether it is there
    (a sequence stopped by a broken frame has no index, only its partial marker)."""
    out = []
    for item in job.jobs:
        if hasattr(item, "frames"):
            path = job.out / item.name / f"{item.name}.sequence.json"
            kind = "sequence"
        else:
            path, kind = job.out / f"{item.name}.json", "image"
        out.append({"kind": kind, "name": item.name, "path": os.fspath(path), "exists": path.is_file()})
    return out


def summary_line(report: Any, *, skipped: int = 0) -> str:
    """The run's last line: where the results are, and every count, zeros too, so a log shows that nothing went
    missing: written now, kept (verified earlier results), skipped (inputs not done: failed or stopped),
    orphaned (results kept although their input is gone; `--clean` removes them).
    `skipped`: inputs not done now (failed, or outside a chunk's --frames)."""
    where = f"{report.published} (staged in {report.out})" if report.published else str(report.out)
    removed = f", removed {len(report.removed)} orphaned (--clean)" if report.removed else ""
    return (
        f"sapiens2: wrote {report.written} result(s) to {where}, kept {report.skipped} verified result(s), "
        f"skipped {skipped}, orphaned {len(report.orphaned)}{removed}"
    )


def run_predict(args: argparse.Namespace, events: Events | None = None) -> int:
    events = events or Events(None)
    try:
        job = PredictJob(job_spec(args), host=EventHost(events))
    except StudioError as exc:  # the spec itself is wrong: a usage error
        raise UsageError(exc.message, hints=exc.hints) from None
    usd = getattr(args, "usd", None)
    problem = export_usd.beside_problem(usd, job.remote is not None)
    if problem is not None:
        raise UsageError(problem)
    total = job.prepare()
    events.emit(
        "start",
        schema=1,
        command="predict",
        run_id=job.run_info.id,
        out=os.fspath(job.out),
        url=os.fspath(job.spec.out) if job.remote is not None else None,
        tasks=list(job.tasks),
        engine=job.spec.engine,
        total=total,
        inputs=_inputs(job),
    )
    progress = Progress(total, quiet=events.enabled)
    frames = FrameEvents(events, job.report, total)

    def on_item(n: int, label: str) -> None:
        progress.update(n, label)
        frames(n, label)

    job.on_item = on_item
    status = "failed"  # what the progress's last line says if the run does not come back
    try:
        report = run_prepared(job)  # the engine the spec names
        status = "failed" if report.failures else "done"
    except BaseException as exc:
        if not isinstance(exc, Exception):  # Ctrl-C, SIGTERM (main.Terminated): stopped, not broken
            status = "stopped"
        raise
    finally:
        progress.close(status)
    for message in report.notes:
        events.warning(message)  # those not streamed live (a distributed engine's)
    for message in report.retried:
        events.warning(message, kind="retried")
    for message in report.notes:
        print(f"sapiens2 predict: note: {message}", file=sys.stderr)
    for message in report.retried:
        print(f"sapiens2 predict: retried: {message}", file=sys.stderr)
    for message in report.failures:
        print(f"sapiens2 predict: error: {message}", file=sys.stderr)
    for message in report.orphaned:
        print(f"sapiens2 predict: orphaned: {message}", file=sys.stderr)
    for message in report.removed:
        print(f"sapiens2 predict: removed (--clean): {message}", file=sys.stderr)
    done = (
        report.written + report.skipped
    )  # `skipped`: what no result stands for now (failed, outside --frames)
    not_done = max(0, total - done) if total else len(report.failures)
    print(summary_line(report, skipped=not_done), file=sys.stderr)
    if report.failures:
        print(f"sapiens2 predict: {len(report.failures)} input(s) failed (see above)", file=sys.stderr)
    code = 1 if report.failures else 0
    if usd is not None:
        stages, usd_errors = export_usd.write_beside(_results(job), usd)
        for path in stages:
            print(f"sapiens2 predict: USD stage {path}", file=sys.stderr)
        for message in usd_errors:
            print(f"sapiens2 predict: error: {message}", file=sys.stderr)
        code = 1 if usd_errors else code
    events.emit(
        "finished",
        status="failed" if report.failures else "ok",
        exit_code=code,
        written=report.written,
        kept=report.skipped,
        orphaned=list(report.orphaned),
        removed=list(report.removed),
        failed=len(report.failures),
        failures=list(report.failures),
        frames=frames.done,
        out=os.fspath(report.out),
        published=report.published,
        run_id=report.run_id,
        results=_results(job),
    )
    return code
