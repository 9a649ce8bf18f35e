"""The walk of one predict job from its entry point: which project files it visits, and how often code the job
runs calls back up into the job's own module (issue 27: "the walk of a job is a descent, not a star").

Runs a tiny job (two images and a 3-frame sequence, pose + normal on generated checkpoints, CPU) through
`engines.dispatch.run_job` under a profiler and prints JSON: files visited, calls between files, and the calls
into the job module (`PredictJob`'s file) made from files other than the engine entry. A descent has none:
the job hands its plan to the runners, the runners to the per-frame stages, and nothing below calls back up.

    python scripts/job_walk.py            # this checkout
    python scripts/job_walk.py --root DIR # another checkout (a worktree of an older commit), for before/after
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path


def _use_checkout(root: Path) -> None:
    """Import `sapiens2_studio` from `root` (a checkout) instead of the installed one."""
    shim = Path(tempfile.mkdtemp(prefix="walk_shim_"))
    (shim / "sapiens2_studio").symlink_to(root.resolve(), target_is_directory=True)
    sys.path.insert(0, str(shim))


def _inputs(folder: Path) -> list[str]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    images = []
    for name in ("a.png", "b.png"):
        Image.fromarray(rng.integers(0, 256, (40, 32, 3), dtype=np.uint8)).save(folder / name)
        images.append(str(folder / name))
    shot = folder / "shot"
    shot.mkdir()
    for n in range(1, 4):
        Image.fromarray(rng.integers(0, 256, (40, 32, 3), dtype=np.uint8)).save(shot / f"shot_{n:04d}.png")
    return [*images, str(shot)]


def _direct_imports(root: Path) -> dict[str, set[str]]:
    """File -> the project files it imports (relative imports, any depth): a call from an imported file back
    into its importer is an upcall (a callback handed down, or a lower module reaching up)."""
    import ast

    out: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] not in ("core", "cli", "comfy_nodes"):
            continue
        package = list(rel.parts[:-1])
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - node.level + 1] + (
                    node.module.split(".") if node.module else []
                )
                for tail in ([], *([a.name] for a in node.names)):
                    parts = base + tail
                    for candidate in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
                        if (root / candidate).is_file():
                            found.add(candidate)
        out[rel.as_posix()] = found
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="a checkout to import instead of the installed package")
    args = parser.parse_args()
    if args.root is not None:
        _use_checkout(args.root)
    import sapiens2_studio
    from sapiens2_studio.core.studio import JobSpec, run_job
    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    root = Path(sapiens2_studio.__file__).resolve().parent
    work = Path(tempfile.mkdtemp(prefix="walk_"))
    checkpoints = {}
    for seed, task in enumerate(("pose", "normal")):
        checkpoints[task] = str(
            write_synthetic_checkpoint(work / f"{task}.safetensors", task=task, seed=seed)
        )
    spec = JobSpec(
        inputs=_inputs(work),
        out=str(work / "out"),
        tasks=("pose", "normal"),
        checkpoints=checkpoints,
        device="cpu",
        flip_test=False,
        allow_download=False,
        writers=1,
    )
    job_file = next(str(p) for p in root.rglob("job.py") if "studio" in p.parts)
    entry = {p for p in root.rglob("*.py") if p.parent.name == "engines"}
    calls: Counter[tuple[str, str]] = Counter()
    files: set[str] = set()
    lock = threading.Lock()

    resolved: dict[str, str] = {}
    project = tuple(
        f"{root}/{part}/" for part in ("core", "cli", "comfy_nodes")
    )  # not a venv inside the checkout

    def real(name: str) -> str:  # a file as found through the shim or the install -> its real path
        if name not in resolved:
            resolved[name] = str(Path(name).resolve()) if name.endswith(".py") else name
        return resolved[name]

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = real(frame.f_code.co_filename)
        caller = real(frame.f_back.f_code.co_filename) if frame.f_back is not None else ""
        if not callee.startswith(project) or not caller.startswith(project) or callee == caller:
            return
        with lock:
            calls[(caller, callee)] += 1
            files.add(callee)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        report = run_job(spec)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def rel(path: str) -> str:
        return Path(path).resolve().relative_to(root).as_posix()

    up = {
        f"{rel(a)} -> {rel(b)}": n
        for (a, b), n in calls.items()
        if b == job_file and Path(a) not in entry and "tests" not in Path(a).parts
    }
    imports = _direct_imports(root)
    upcalls = {
        f"{rel(a)} -> {rel(b)}": n for (a, b), n in calls.items() if rel(a) in imports.get(rel(b), set())
    }
    print(
        json.dumps(
            {
                "written": report.written,
                "failures": report.failures,
                "files_visited": len(files),
                "calls_between_files": sum(calls.values()),
                "calls_into_the_job_module_from_below": sum(up.values()),
                "files_calling_into_the_job_module": len(up),
                "by_caller": dict(sorted(up.items())),
                "upcalls": sum(upcalls.values()),
                "upcalls_by_pair": dict(sorted(upcalls.items())),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
