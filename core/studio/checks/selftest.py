"""`sapiens2 selftest`: prove that an install works, offline, before anyone downloads gigabytes of weights.

Why: a new user (or a farm's image builder) needs one command that says yes or no for this Python, this torch and
this device without Hub access. It runs the real engine, not a mock: tiny checkpoints in the official layout are
generated into a temporary folder, every task runs on a generated photo and a 3-frame sequence, the bundles,
previews and sequence index are written there and read back, and the folder is removed. Nothing is written
anywhere else (no checkpoint cache, no hash cache, no staging). The weights are random, so the results are
noise, not a person: this checks the install, not the model quality.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ... import catalogue
from ...tasks import registry as tasks_registry

WIDTH, HEIGHT, FRAMES = 48, 64, 3


@dataclass
class SelftestReport:
    """What the self-test found: `lines` to show (facts, then one line per check), `failures` (empty: passed)."""

    facts: dict[str, Any] = field(default_factory=dict)
    passed: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and bool(self.passed)


def _versions() -> dict[str, Any]:
    import importlib.metadata

    from .... import __version__

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "sapiens2_studio": __version__,
        "python": platform.python_version(),
        "torch": version("torch"),
        "numpy": version("numpy"),
        "openexr": version("openexr"),
    }


def _write_inputs(root: Path) -> tuple[Path, Path, Path]:
    """A photo-like image, a numbered 3-frame sequence and a boxes file (one person box over the whole frame,
    so pose does not depend on what random segmentation weights find)."""
    from PIL import Image

    rng = np.random.default_rng(2024)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    base = np.stack([x * 255 / WIDTH, y * 255 / HEIGHT, np.full_like(x, 128.0)], axis=-1)
    photo = root / "inputs" / "person.png"
    photo.parent.mkdir(parents=True)
    Image.fromarray(base.astype(np.uint8)).save(photo)
    walk = root / "inputs" / "walk"
    walk.mkdir()
    for n in range(1, FRAMES + 1):
        noise = rng.integers(-20, 21, base.shape)
        Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8)).save(walk / f"walk_{n:04d}.png")
    boxes = root / "inputs" / "boxes.json"
    boxes.write_text(json.dumps([[0, 0, WIDTH, HEIGHT]]), encoding="utf-8")
    return photo, walk, boxes


def _check_frame(frame: Any, tasks: tuple[str, ...], where: str) -> list[str]:
    """What is missing or wrong in one read-back bundle (empty: complete)."""
    problems = []
    if (frame.width, frame.height) != (WIDTH, HEIGHT) or frame.image is None:
        problems.append(f"{where}: the image is {frame.width}x{frame.height}, expected {WIDTH}x{HEIGHT}")
    for task in tasks:  # each task says what is wrong with its own stored data
        problems += [f"{where}: {problem}" for problem in tasks_registry.get(task).check_stored(frame)]
    recorded = {m.get("task") for m in frame.models}
    if not set(tasks) <= recorded:
        problems.append(f"{where}: the models record lacks {', '.join(sorted(set(tasks) - recorded))}")
    return problems


def run_selftest(device: str = "auto", *, on_line: Callable[[str], Any] | None = None) -> SelftestReport:
    """Run the whole pipeline on generated weights and inputs in a temporary folder; never raises for a failed
    check (each becomes a line of `failures`), so a broken install is described, not a traceback."""
    say = on_line or (lambda line: None)
    report = SelftestReport(facts=_versions())
    started = time.perf_counter()
    tasks = tuple(catalogue.TASKS)
    with tempfile.TemporaryDirectory(prefix="sapiens2-selftest-") as tmp:
        root = Path(tmp)
        try:
            _run(root, device, tasks, report, say)
        except Exception as exc:  # a broken install shows here: say what, the caller exits non-zero
            from ...errors import Sapiens2Error

            text = exc.text("cli") if isinstance(exc, Sapiens2Error) else f"{type(exc).__name__}: {exc}"
            report.failures.append(f"the pipeline stopped: {text}")
            say(f"  FAILED  the pipeline stopped: {text}")
    report.seconds = time.perf_counter() - started
    return report


def _run(root: Path, device: str, tasks: tuple[str, ...], report: SelftestReport, say: Callable) -> None:
    from ...formats.bundle import read_bundle
    from ...formats.sequence import read_sequence
    from ...testing.synthetic import write_synthetic_checkpoint
    from ..jobs.job import JobSpec, PredictJob
    from ..runtime.host import Host

    def check(ok: bool, passed: str, failed: str) -> None:
        (report.passed if ok else report.failures).append(passed if ok else failed)
        say(f"  ok      {passed}" if ok else f"  FAILED  {failed}")

    home = root / "checkpoints"
    checkpoints = {
        task: write_synthetic_checkpoint(home / f"selftest_{task}.safetensors", task=task, seed=seed)
        for seed, task in enumerate(tasks)
    }
    check(True, f"generated tiny checkpoints for {', '.join(tasks)} (official layout, random weights)", "")
    photo, walk, boxes = _write_inputs(root)
    out = root / "out"
    spec = JobSpec(
        inputs=[photo, walk],
        out=out,
        tasks=tasks,
        checkpoints=dict(checkpoints),
        checkpoint_dir=home,  # the checkpoints' hash cache goes here, not into ~/.cache
        allow_download=False,
        device=device,
        boxes_file=boxes,
        flip_test=False,
        writers=0,
    )
    host = Host(on_note=None)
    t0 = time.perf_counter()
    job = PredictJob(spec, host=host)
    job_report = job.run()
    plans = [loaded.plan for loaded in job.models.values()]
    if plans:
        report.facts["device"] = str(plans[0].device)
        report.facts["dtype"] = plans[0].dtype_name
        report.facts["device_reason"] = plans[0].describe()
    report.notes.extend(job_report.notes)
    check(
        job_report.ok and job_report.written == 1 + FRAMES,
        f"the engine ran {len(tasks)} tasks on an image and a {FRAMES}-frame sequence "
        f"({time.perf_counter() - t0:.1f} s)",
        f"the engine wrote {job_report.written} of {1 + FRAMES} results: {'; '.join(job_report.failures)}",
    )
    frame = read_bundle(out / "person.json")
    problems = _check_frame(frame, tasks, "person.json")
    check(
        not problems,
        "the image's bundle (EXR + JSON) reads back with every task's layers",
        "; ".join(problems),
    )
    missing = [
        name
        for name in [f"person.{p.suffix}.png" for t in tasks for p in tasks_registry.get(t).previews]
        + ["person.keypoints.json", "person.openpose.json"]
        if not (out / name).is_file()
    ]
    check(
        not missing,
        "previews and keypoint JSONs (incl. OpenPose) are written",
        f"missing: {', '.join(missing)}",
    )
    sequence = read_sequence(out / "walk" / "walk.sequence.json")
    seq_problems = [] if len(sequence) == FRAMES else [f"the index lists {len(sequence)} of {FRAMES} frames"]
    for n in range(1, FRAMES + 1):
        seq_problems += _check_frame(
            read_bundle(out / "walk" / f"walk_{n:04d}.json", warn=False), tasks, f"frame {n}"
        )
    check(
        not seq_problems,
        f"the sequence index and its {FRAMES} frames read back",
        "; ".join(seq_problems),
    )
