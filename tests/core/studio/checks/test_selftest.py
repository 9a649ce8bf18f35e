"""`sapiens2 selftest` (issue 33): an install proves itself offline and writes nothing outside a temporary folder.

The first test really makes the venv of README's CPU-only line, from this checkout, and runs `selftest` in it with
no network: HOME, the working folder and TMPDIR are fresh empty folders, proxies point at a closed port and the
Hub is told to stay offline. One substitution is made to the line: PyTorch's CPU index is not reachable from CI,
so `torch --index-url https://download.pytorch.org/whl/cpu` becomes `torch==2.13.0`, the same CPU build
(2.13.0+cpu) that the package registries here serve and the test venv uses.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
CPU_TORCH = "torch==2.13.0"


def readme_cpu_line() -> str:
    """README's CPU-only install line (the one naming PyTorch's CPU index), as a user would paste it."""
    lines = [
        line.strip().strip("`").rstrip("`.")
        for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
        if CPU_INDEX in line
    ]
    assert len(lines) == 1, lines
    return lines[0]


def offline_env(home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAPIENS2_", "PYTHON", "VIRTUAL_ENV"))}
    closed = "http://127.0.0.1:9"  # the discard port: any connection attempt fails at once
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        HF_HUB_OFFLINE="1",
        http_proxy=closed,
        https_proxy=closed,
        HTTP_PROXY=closed,
        HTTPS_PROXY=closed,
        no_proxy="",
        NO_PROXY="",
    )
    return env


def tree(folder: Path) -> dict[str, float]:
    """Every path under `folder` → its mtime (what a run could have added or changed)."""
    return {str(p.relative_to(folder)): p.lstat().st_mtime for p in folder.rglob("*")}


def test_readme_cpu_line_names_the_cpu_index_and_keeps_two_setup_commands():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    assert setup.count("```bash") == 2  # the main job and the tests; the CPU variant is a note
    line = readme_cpu_line()
    assert line.startswith("python3 -m venv .venv-studio && .venv-studio/bin/pip install torch " + CPU_INDEX)
    assert line.endswith('.venv-studio/bin/pip install ".[exr,hub]"')
    assert "VENV_CPU_SIZE" not in readme and ".openpose.json" in setup


@pytest.mark.timeout(1500)
def test_selftest_in_a_fresh_cpu_venv_offline_writes_only_to_a_temp_folder(tmp_path):
    # A copy of the checkout (tracked and untracked files git does not ignore): building it leaves nothing here.
    checkout = tmp_path / "checkout"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = REPO / name
        if source.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name)
    venv = tmp_path / "venv"
    command = readme_cpu_line().replace(f"torch {CPU_INDEX}", CPU_TORCH).replace(".venv-studio", str(venv))
    started = time.perf_counter()
    setup = subprocess.run(
        ["bash", "-c", f"set -e; {command}"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=1200,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    assert setup.returncode == 0, setup.stderr[-4000:]
    install_s = time.perf_counter() - started
    torch_version = subprocess.run(
        [str(venv / "bin/python"), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert torch_version.endswith("+cpu"), torch_version  # no CUDA build came in
    assert not list((venv / "lib").glob("python*/site-packages/nvidia"))
    size = sum(p.lstat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())

    home, cwd, tmp = tmp_path / "home", tmp_path / "cwd", tmp_path / "tmp"
    for folder in (home, cwd, tmp):
        folder.mkdir()
    before = tree(venv), tree(checkout)
    started = time.perf_counter()
    proc = subprocess.run(
        [str(venv / "bin/sapiens2"), "selftest"],
        cwd=cwd,
        env=offline_env(home, tmp),
        capture_output=True,
        text=True,
        timeout=900,
    )
    run_s = time.perf_counter() - started
    print(
        f"CPU venv: {size / 1e9:.2f} GB, torch {torch_version}, install {install_s:.0f} s, selftest {run_s:.0f} s"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    claimed = float(
        re.search(r"a ([0-9.]+) GB venv", (REPO / "README.md").read_text(encoding="utf-8")).group(1)
    )
    assert 0.8 < size / 1e9 / claimed < 1.25, (size, claimed)  # README's CPU venv size holds
    assert proc.stdout.rstrip().splitlines()[-1].startswith("selftest passed: this install runs every task")
    assert "FAILED" not in proc.stdout and "Traceback" not in proc.stderr
    assert re.search(r"models ran on device cpu, dtype fp32", proc.stdout), proc.stdout
    # Nothing written anywhere but the temporary folder, which is gone again.
    assert list(home.iterdir()) == [] and list(cwd.iterdir()) == [] and list(tmp.iterdir()) == []
    assert (tree(venv), tree(checkout)) == before


def test_selftest_names_each_failure_and_exits_1(tmp_path):
    """A broken install (here: an unknown device) is described on one line per failure, exit 1."""
    env = offline_env(tmp_path, tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "sapiens2_studio.cli", "selftest", "--device", "cuda:7"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "selftest FAILED: 1 problem(s), see above"
    assert lines[-2].startswith("sapiens2 selftest: error: the pipeline stopped: ") and "cuda" in lines[-2]
    assert "Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []


def test_the_cli_lists_selftest():
    from sapiens2_studio.cli.arguments import build_parser

    assert "selftest" in build_parser().format_help()
    assert shlex.split(readme_cpu_line())[0] == "python3"
