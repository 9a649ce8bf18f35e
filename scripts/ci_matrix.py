"""The whole test matrix on one machine: set up every host, run every leg, print what ran where.

    python3 scripts/ci_matrix.py          (what ``bash scripts/test.sh`` runs with no arguments; CI via .ci/run)

Hosts come from ``../shared/hosts`` (ComfyUI and comfyui_controlnet_aux source snapshots) and the package
registries (frontends, bpy wheels, playwright; Debian's chromium), cached in ``.hosts/`` (ignored by git), so a
second run only re-runs the tests.  Independent steps run in parallel (setups are mostly disk-bound, so they
overlap the CPU-bound test legs); each step logs to ``.ci-logs/<step>.log`` and each test leg writes JUnit XML
there, from which the summary counts the tests per host.  Stdlib only: it runs before any venv exists.

Environment: ``SAPIENS2_CI_JOBS`` (test legs at once; default one per core), ``SAPIENS2_REQUIRE_HOSTS`` (set by
.ci/run: a missing host fails instead of skipping), ``SAPIENS2_SHARED`` (default ../shared).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOSTS = REPO / ".hosts"
LOGS = REPO / ".ci-logs"
SHARED = Path(os.environ.get("SAPIENS2_SHARED") or REPO.parent / "shared").resolve()
VENV_PY = REPO / ".venv" / "bin" / "python"

COMFYUI = ("0.3.64", "0.33.0")  # oldest supported and newest available (../shared/hosts/comfyui-*.tar.gz)
NEWEST_FRONTEND = "1.58.1"  # the newest comfyui-frontend-package on the registry, served by every backend
CONTROLNET_AUX = "1.1.5"
# Blender as a Python module: (bpy wheel, the Python minor it is built for). 4.2 LTS, 4.5 LTS, 5.0, 5.3.
BLENDER = (("4.2.23", "3.11"), ("4.5.15", "3.11"), ("5.0.1", "3.11"), ("5.3.0", "3.13"))
# The full add-on checks run on the oldest and the newest Blender; the versions between get a smoke leg of the
# checks whose code paths depend on the version (mesh + custom normals, actions/sequences, armature + camera), to
# keep a cold run on 2 cores within CI's budget. SAPIENS2_CI_FULL_BLENDER=1 runs every check on every version.
BLENDER_SMOKE = ("check_mesh", "check_sequence", "check_armature_camera")


@dataclass
class Step:
    """One process of the matrix: a set-up or a test leg."""

    name: str
    cmd: list[str]
    deps: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    junit: bool = False  # a pytest leg: its counts go into the summary
    cpu: bool = False  # CPU-bound (tests, lint): shares the one-per-core slots; set-ups have their own
    manifest: bool = False  # reads .hosts/hosts.json: written (again) just before it starts
    label: str = ""
    skip: str = ""  # why this step cannot run on this machine (reported, never silent)
    # filled in while running
    started: float = 0.0
    seconds: float = 0.0
    rc: int | None = None
    process: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return LOGS / f"{self.name}.log"

    @property
    def xml(self) -> Path:
        return LOGS / f"{self.name}.xml"


def find_python(minor: str) -> str | None:
    """A working Python of that minor version: python3 itself, one under pyenv, or pythonX.Y on PATH (pyenv's
    shims are on PATH too but fail for a version that is not selected, so every candidate is tried)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == minor:
        return sys.executable
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")]
    if shutil.which("pyenv"):
        roots.insert(0, subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip())
    candidates = [
        c
        for root in filter(None, roots)
        for c in sorted(glob.glob(f"{root}/versions/{minor}.*/bin/python{minor}"))[::-1]
    ]
    candidates.append(shutil.which(f"python{minor}") or "")
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv; print(sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(int(x) for x in minor.split("."))):
            return candidate
    return None


def pytest(*args: str) -> list[str]:
    return [str(VENV_PY), "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]


def steps() -> list[Step]:
    """The matrix, longest chains first (the scheduler starts steps in this order when their inputs are ready)."""
    hosts = ["bash", "scripts/ci_hosts.sh"]
    out = [
        Step("venv", ["bash", "scripts/ci_hosts.sh", "venv"], label="main venv"),
        *(Step(f"setup-comfyui-{v}", [*hosts, "comfy", v], label=f"ComfyUI {v} + venv") for v in COMFYUI),
        Step("setup-chromium", [*hosts, "chromium"], label="Debian chromium"),
        Step("setup-aux", [*hosts, "aux", CONTROLNET_AUX], label=f"comfyui_controlnet_aux {CONTROLNET_AUX}"),
        Step("setup-frontend", [*hosts, "frontend", NEWEST_FRONTEND], deps=("venv",),
             env={"PIP_PYTHON": str(VENV_PY)}, label=f"frontend {NEWEST_FRONTEND}"),
    ]  # fmt: skip
    ruff = str(REPO / ".venv/bin/ruff")
    out.append(Step("lint", [ruff, "check", "."], deps=("venv",), cpu=True, label="ruff check"))
    out.append(
        Step("format", [ruff, "format", "--check", "."], deps=("venv",), cpu=True, label="ruff format")
    )
    for version, minor in BLENDER:
        python = find_python(minor)
        skip = "" if python else f"no Python {minor} on this machine (bpy {version} wheels need it)"
        out.append(Step(f"setup-bpy-{version}", [*hosts, "bpy", version, python or "python3"], skip=skip,
                        label=f"bpy {version} (Python {minor})"))  # fmt: skip
    # The longest leg first (~25 min of one core on a busy 2-core machine): it needs only the venv, so it runs
    # beside the ComfyUI set-ups and legs instead of after them.
    out.append(Step("unit", pytest("tests", "--ignore=tests/comfy", "--ignore=tests/blender"), deps=("venv",),
                    junit=True, cpu=True, label="core, CLI, formats, nodes without ComfyUI"))  # fmt: skip
    comfy_setup = ("venv", "setup-chromium", "setup-aux", "setup-frontend")
    for version in COMFYUI:
        out.append(
            Step(f"comfyui-{version}", pytest("tests/comfy"), deps=(*comfy_setup, f"setup-comfyui-{version}"),
                 env={"SAPIENS2_COMFY_HOSTS": version}, junit=True, cpu=True, manifest=True, label=f"ComfyUI {version}")
        )  # fmt: skip
    full_everywhere = os.environ.get("SAPIENS2_CI_FULL_BLENDER", "") not in ("", "0")
    for version, minor in BLENDER:
        full = full_everywhere or version in (BLENDER[0][0], BLENDER[-1][0])
        args = ["tests/blender"] if full else ["tests/blender", "-k", " or ".join(BLENDER_SMOKE)]
        out.append(
            Step(f"blender-{version}", pytest(*args), deps=("venv", f"setup-bpy-{version}"),
                 env={"SAPIENS2_BLENDER_PYTHON": str(HOSTS / f"bpy-{version}/bin/python"),
                      "SAPIENS2_BLENDER_JUNIT_DIR": str(LOGS / f"bpy-{version}")},
                 junit=True, cpu=True, label=f"Blender {version} (Python {minor}){'' if full else ', smoke'}")
        )  # fmt: skip
    return out


def write_manifest(done: dict[str, Step]) -> Path:
    """.hosts/hosts.json: what the tests run on (tests/comfy/hosts.py and tests/blender/conftest.py read it)."""
    comfy = []
    for version in COMFYUI:
        checkout = HOSTS / f"comfyui-{version}"
        requirements = checkout / "requirements.txt"
        lines = requirements.read_text(encoding="utf-8").splitlines() if requirements.is_file() else []
        pins = [
            line.split("==")[1].strip() for line in lines if line.startswith("comfyui-frontend-package==")
        ]
        pinned = pins[0] if pins else "unknown"
        comfy.append({"version": version, "path": str(checkout), "python": str(HOSTS / f"comfyui-{version}-venv/bin/python"),
                      "frontend": pinned})  # fmt: skip
    blender = [
        {"version": v, "python": str(HOSTS / f"bpy-{v}/bin/python")}
        for v, _ in BLENDER
        if done[f"setup-bpy-{v}"].rc == 0 or (HOSTS / f"bpy-{v}.stamp").is_file()
    ]
    manifest = {
        "comfyui": comfy,
        "frontends": {
            NEWEST_FRONTEND: str(HOSTS / f"frontend-{NEWEST_FRONTEND}/comfyui_frontend_package/static")
        },
        "controlnet_aux": {
            "version": CONTROLNET_AUX,
            "path": str(HOSTS / f"controlnet_aux-{CONTROLNET_AUX}/comfyui_controlnet_aux"),
        },
        "chromium": shutil.which("chromium") or shutil.which("chromium-browser"),
        "blender": blender,
    }
    path = HOSTS / "hosts.json"
    path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return path


def run(all_steps: list[Step], jobs: int, env: dict[str, str], setup_jobs: int = 3) -> None:
    """Start each step once its inputs succeeded: at most ``jobs`` test legs (CPU-bound: one per core) and
    ``setup_jobs`` set-ups (mostly unpacking wheels to disk) at a time; a step whose input failed or was
    skipped is skipped with that reason."""
    by_name = {s.name: s for s in all_steps}
    pending = list(all_steps)
    running: list[Step] = []
    while pending or running:
        for step in list(running):
            if step.process.poll() is not None:
                step.rc, step.seconds = step.process.returncode, time.time() - step.started
                running.remove(step)
                state = "ok" if step.rc == 0 or (step.junit and step.rc == 5) else f"FAILED (rc {step.rc})"
                print(
                    f"[{time.strftime('%H:%M:%S')}] {step.name}: {state} in {step.seconds:.0f} s", flush=True
                )
        for step in list(pending):
            broken = [d for d in step.deps if by_name[d].skip or (by_name[d].rc not in (None, 0))]
            if step.skip or broken:
                step.skip = step.skip or f"needs {', '.join(broken)}, which did not succeed"
                pending.remove(step)
                print(f"[{time.strftime('%H:%M:%S')}] {step.name}: skipped ({step.skip})", flush=True)
                continue
            busy = sum(1 for r in running if r.cpu == step.cpu)
            if busy >= (jobs if step.cpu else setup_jobs) or any(by_name[d].rc is None for d in step.deps):
                continue
            if step.manifest:
                write_manifest(by_name)  # its own hosts are set up (they are its inputs)
            cmd = [*step.cmd, f"--junitxml={step.xml}"] if step.junit else step.cmd
            step.started = time.time()
            with open(step.log, "wb") as log:
                step.process = subprocess.Popen(
                    cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env={**env, **step.env},
                )  # fmt: skip
            pending.remove(step)
            running.append(step)
            print(f"[{time.strftime('%H:%M:%S')}] {step.name}: started", flush=True)
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--manifest-only", action="store_true", help="write .hosts/hosts.json from what is set up"
    )
    args = parser.parse_args(argv)
    if args.manifest_only:
        done = steps()
        for step in done:
            step.rc = 0
        print(write_manifest({s.name: s for s in done}))
        return 0
    start = time.time()
    LOGS.mkdir(exist_ok=True)
    for old in LOGS.glob("*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    env = dict(os.environ, SAPIENS2_SHARED=str(SHARED), PYTHONUNBUFFERED="1")
    jobs = int(os.environ.get("SAPIENS2_CI_JOBS") or os.cpu_count() or 2)
    all_steps = steps()
    print(
        f"test matrix: {len(all_steps)} steps, {jobs} at a time; logs in {LOGS.relative_to(REPO)}/",
        flush=True,
    )
    free_at_start = _free_gb()
    print(disk_note(free_at_start), flush=True)
    run(all_steps, jobs, env)
    print(f"disk: {free_at_start:.1f} GB free at the start, {_free_gb():.1f} GB at the end", flush=True)
    manifest = json.loads(
        write_manifest({s.name: s for s in all_steps}).read_text()
    )  # complete, for later runs
    pinned = {h["version"]: h["frontend"] for h in manifest["comfyui"]}
    summary = _load_summary()
    ok = summary.print_summary(all_steps, time.time() - start, NEWEST_FRONTEND, CONTROLNET_AUX, pinned)
    missing = [s for s in all_steps if s.skip]
    if missing and os.environ.get("SAPIENS2_REQUIRE_HOSTS", "") not in ("", "0"):
        # CI (.ci/run): a host that could not be set up hides a whole row of the support table.
        print(f"FAILED: SAPIENS2_REQUIRE_HOSTS is set and {len(missing)} step(s) could not run: "
              + "; ".join(f"{s.name} ({s.skip})" for s in missing))  # fmt: skip
        ok = False
    return 0 if ok else 1


# What a cold run writes: .venv (CPU torch) ~2.5 GB, the two ComfyUI venvs ~3.5 GB plus the torch they share
# ~5.5 GB, four bpy venvs ~4 GB, frontends and chromium ~0.5 GB, pip's unpacking and the tests' temporary files
# a few GB more (measured on a fresh clone, docs/testing.md).
COLD_RUN_GB = 20


def _free_gb() -> float:
    return shutil.disk_usage(REPO).free / 1e9


def disk_note(free_gb: float) -> str:
    """One line on the disk: a run that dies of a full disk half-way says nothing useful, so say it up front."""
    if free_gb >= COLD_RUN_GB or (HOSTS / "hosts.json").is_file():
        return f"disk: {free_gb:.1f} GB free"
    return (
        f"disk: WARNING only {free_gb:.1f} GB free where a cold run (nothing in .hosts/) needs about "
        f"{COLD_RUN_GB} GB; set-ups may fail with 'No space left on device'"
    )


def _load_summary():
    """scripts/ci_summary.py, by path (scripts/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ci_summary", Path(__file__).with_name("ci_summary.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    raise SystemExit(main())
