"""The Blender add-on's engine driver outside Blender (``blender_addon/engine``: no bpy in its bpy-free modules):
finding the engine, the command for a request, which files a picked input means, and the runner against the real
CLI (a child process in this environment), stopped with SIGINT mid-sequence.

The modules are loaded by file path as their own package, as Blender would load them: never through
``sapiens2_studio`` (the add-on ships without it).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ENGINE_DIR = Path(__file__).resolve().parents[2] / "blender_addon" / "engine"
PACKAGE = "sapiens2_blender_engine_under_test"


def _engine():
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, ENGINE_DIR / "__init__.py", submodule_search_locations=[str(ENGINE_DIR)]
        )
        sys.modules[PACKAGE] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[PACKAGE])
    names = ("events", "inputs", "locate", "request", "runner")
    return {n: importlib.import_module(f"{PACKAGE}.{n}") for n in names}


@pytest.fixture(scope="module")
def eng():
    return _engine()


def _png(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (32, 24, 3), dtype=np.uint8)).save(path)
    return path


def test_engine_locations(eng, tmp_path):
    locate = eng["locate"]
    venv = tmp_path / "env"
    (venv / locate.BIN).mkdir(parents=True)
    exe = venv / locate.BIN / locate.EXE
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert locate.engine_argv(venv) == (str(exe),)  # a venv folder: its sapiens2
    python = venv / locate.BIN / "python3.11"
    python.write_text("")
    assert locate.engine_argv(python) == (
        str(python),
        "-m",
        "sapiens2_studio.cli",
    )  # a Python runs the module
    assert locate.engine_argv(tmp_path / "missing") is None
    found = locate.candidates("", environ={"PATH": str(venv / locate.BIN), locate.ENGINE_ENV: ""})
    assert found[0] == locate.Engine((str(exe),), "PATH")
    env = locate.child_environment({"PYTHONPATH": "/blender/scripts", "PYTHONHOME": "/x", "KEEP": "1"})
    assert env == {"KEEP": "1", "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"}


def test_inputs_a_numbered_file_is_its_sequence_and_a_range_its_files(eng, tmp_path):
    inputs = eng["inputs"]
    for n in (9, 10, 11, 12, 100):  # number order, not name order; other names left out
        _png(tmp_path / f"plate.{n:03d}.png", n)
    _png(tmp_path / "plate.notes.png", 0)
    _png(tmp_path / "other_010.png", 1)
    whole = inputs.resolve(tmp_path / "plate.010.png")
    assert whole.kind == "sequence" and whole.frames == 5
    assert [Path(p).name for p in whole.paths][:2] == ["plate.009.png", "plate.010.png"]
    part = inputs.resolve(tmp_path / "plate.010.png", first=10, last=12)
    assert [Path(p).name for p in part.paths] == ["plate.010.png", "plate.011.png", "plate.012.png"]
    assert inputs.resolve(tmp_path / "plate.010.png", sequence=False).kind == "image"
    assert inputs.resolve(tmp_path / "other_010.png").kind == "image"  # a lone numbered file
    assert inputs.resolve(tmp_path).kind == "folder"
    with pytest.raises(inputs.InputChoiceError, match="in 200-300; it has 9-100"):
        inputs.resolve(tmp_path / "plate.010.png", first=200, last=300)
    (tmp_path / "clip.mp4").write_bytes(b"")
    assert inputs.resolve(tmp_path / "clip.mp4").kind == "video"
    with pytest.raises(inputs.InputChoiceError, match="frame range of a video"):
        inputs.resolve(tmp_path / "clip.mp4", first=1, last=5)
    with pytest.raises(inputs.InputChoiceError, match="does not exist"):
        inputs.resolve(tmp_path / "gone.png")


def test_request_command_line(eng):
    request = eng["request"].PredictRequest
    argv = request(inputs=["a.png"], out="o", tasks=["pose", "seg"], size="1b", device="cpu").argv()
    assert argv == ["predict", "a.png", "--out", "o", "--tasks", "pose,seg", "--size", "1b", "--no-download",
                    "--device", "cpu", "--no-previews", "--progress", "json"]  # fmt: skip
    argv = request(inputs=["s"], out="o", tasks=["pose"], download=True, flip_test=False, skip_existing=True,
                   previews=True, checkpoint_dir="/ck").argv()  # fmt: skip
    assert "--no-download" not in argv and {"--no-flip-test", "--skip-existing"} <= set(argv)
    assert argv[argv.index("--checkpoint-dir") + 1] == "/ck"
    with pytest.raises(ValueError, match="unknown task"):
        request(inputs=["a"], out="o", tasks=["depth"]).argv()
    with pytest.raises(ValueError, match="at least one task"):
        request(inputs=["a"], out="o", tasks=[]).argv()


def test_events_progress_and_odd_lines(eng):
    events = eng["events"]
    assert events.parse_line("sapiens2: wrote 1 result(s)") is None
    assert events.parse_line('{"no_event": 1}') is None and events.parse_line("{broken") is None
    progress = events.RunProgress()
    assert progress.status_text() == "Sapiens2: starting the engine…"
    progress.feed({"event": "start", "total": 4, "out": "/o", "run_id": "r"})
    assert progress.status_text() == "Sapiens2: loading models…"
    progress.feed({"event": "frame", "done": 3, "total": 4, "name": "walk #3", "status": "written"})
    assert progress.fraction == 0.75 and progress.status_text() == "Sapiens2: 3/4 frames — walk #3"
    progress.feed({"event": "finished", "written": 4, "kept": 0, "results": [
        {"path": "/o/walk/walk.sequence.json", "exists": True}, {"path": "/o/x.json", "exists": False}]})  # fmt: skip
    assert progress.results() == ["/o/walk/walk.sequence.json"]
    assert events.log_line({"event": "frame", "done": 3, "total": 4, "name": "walk #3"}) == (
        "Sapiens2: 3/4 frames — walk #3"
    )
    assert events.log_line({"event": "frame", "done": 7, "total": None, "name": "clip #7"}) == (
        "Sapiens2: 7 frames — clip #7"
    )
    assert events.log_line({"event": "start", "total": 4}) is None


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    home = tmp_path_factory.mktemp("home")
    write_synthetic_checkpoint(home / "seg" / "sapiens2_0.4b_seg.safetensors", task="seg", seed=1)
    return home


def _this_engine(eng):
    return eng["locate"].Engine((sys.executable, "-m", "sapiens2_studio.cli"), "test")


def test_runner_streams_a_run_and_a_missing_checkpoint_with_its_hint(eng, home, tmp_path):
    runner, request = eng["runner"], eng["request"].PredictRequest
    images = [str(_png(tmp_path / f"shot_{n}.png", n)) for n in (1, 2, 3)]
    args = request(inputs=images, out=str(tmp_path / "out"), tasks=["seg"], device="cpu",
                   checkpoint_dir=str(home)).argv()  # fmt: skip
    outcome = runner.run_blocking(runner.EngineRun(_this_engine(eng), args))
    assert outcome.ok and outcome.exit_code == 0 and outcome.progress.done == 3
    assert outcome.progress.results() == [str(tmp_path / "out" / "shot" / "shot.sequence.json")]
    args = request(inputs=images, out=str(tmp_path / "out2"), tasks=["seg"], device="cpu",
                   checkpoint_dir=str(tmp_path / "none")).argv()  # fmt: skip
    outcome = runner.run_blocking(runner.EngineRun(_this_engine(eng), args))
    assert not outcome.ok and outcome.exit_code == 4 and not outcome.stopped
    assert (
        outcome.hint == "or pass --checkpoint seg=PATH" and "sapiens2_0.4b_seg.safetensors" in outcome.message
    )
    assert outcome.report_text() == f"{outcome.message}; {outcome.hint}"


def test_runner_cancel_stops_within_a_frame_and_skip_existing_completes(eng, home, tmp_path):
    runner, request = eng["runner"], eng["request"].PredictRequest
    frames = [str(_png(tmp_path / f"walk_{n:04d}.png", n)) for n in range(1, 9)]
    out = tmp_path / "out"
    args = request(inputs=frames, out=str(out), tasks=["seg"], device="cpu", checkpoint_dir=str(home)).argv()
    run = runner.EngineRun(_this_engine(eng), args)
    seen_at_cancel = cancel_at = None
    poll_times = []
    deadline = time.monotonic() + 120
    while not run.done:
        assert time.monotonic() < deadline
        t0 = time.perf_counter()
        run.poll()
        poll_times.append(time.perf_counter() - t0)
        if seen_at_cancel is None and run.progress.done >= 2:
            run.cancel()
            seen_at_cancel, cancel_at = run.progress.done, time.time()
        time.sleep(0.01)
    run.wait()
    # A poll never waits for the engine: a blocking read would wait a whole frame on most polls. Judged by the
    # median and a loose maximum, since one poll may be descheduled for a while on a loaded machine.
    assert statistics.median(poll_times) < 0.005 and max(poll_times) < 1.0, sorted(poll_times)[-5:]
    outcome = run.outcome()
    assert outcome.stopped and outcome.exit_code == 128 + signal.SIGINT == 130
    committed = sorted(p.name for p in (out / "walk").glob("walk_[0-9][0-9][0-9][0-9].json"))
    # Every frame on disk has its event, in order (the one being written when the stop came too), then the stop.
    assert [e["name"] for e in run.progress.frames] == [f"walk #{int(c[5:9])}" for c in committed]
    error = run.progress.error
    assert error["kind"] == "interrupted" and error.get("frames") == len(committed), (
        error,
        run.progress.events,
    )
    # Stopped within one frame: at most one frame event is stamped (by the engine's clock, not by when this side's
    # reader thread got round to it) after the stop was sent.
    assert seen_at_cancel <= len(committed)
    assert sum(e["t"] > cancel_at for e in run.progress.frames) <= 1, (cancel_at, run.progress.frames)
    assert (out / "walk" / "walk.partial.json").is_file()
    resume = request(inputs=frames, out=str(out), tasks=["seg"], device="cpu", checkpoint_dir=str(home),
                     skip_existing=True).argv()  # fmt: skip
    outcome = runner.run_blocking(runner.EngineRun(_this_engine(eng), resume))
    assert outcome.ok and (outcome.progress.finished["kept"], outcome.progress.finished["written"]) == (
        len(committed), 8 - len(committed))  # fmt: skip
    assert (out / "walk" / "walk.sequence.json").is_file()


@pytest.mark.skipif(os.name == "nt", reason="the probe runs the POSIX test engine")
def test_probe_reports_the_install(eng, home):
    report = eng["runner"].probe(_this_engine(eng), str(home))
    assert report["checkpoint_dir"] == str(home) and [c["task"] for c in report["checkpoints"]] == ["seg"]
    assert report["python"] == sys.executable


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_an_engine_stops_when_blender_dies(tmp_path):
    """A Blender that crashes or is killed mid-run leaves no engine running on: the child gets the same stop as
    Ctrl-C (SIGINT), so it ends cleanly (a sequence stays marked partial). A stand-in engine records the stop."""
    engine = tmp_path / "engine.py"
    flag = tmp_path / "stopped"
    engine.write_text(
        "import pathlib, sys, time\n"
        "try:\n"  # the start event inside: a stop may come as soon as Blender has read it
        '    print(\'{"event": "start", "t": 0}\', flush=True)\n'
        "    time.sleep(60)\nexcept KeyboardInterrupt:\n"
        f"    pathlib.Path({str(flag)!r}).write_text('SIGINT')\n    sys.exit(130)\n"
    )
    blender = (
        "import importlib.util, os, signal, sys, time\n"
        f"spec = importlib.util.spec_from_file_location('eng', {str(ENGINE_DIR / '__init__.py')!r}, "
        f"submodule_search_locations=[{str(ENGINE_DIR)!r}])\n"
        "sys.modules['eng'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(sys.modules['eng'])\n"
        "from eng import locate, runner\n"
        f"run = runner.EngineRun(locate.Engine((sys.executable, {str(engine)!r}), 'test'), [])\n"
        "while not run.poll(): time.sleep(0.01)\n"
        "print(run.process.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)  # Blender crashes\n"
    )
    proc = subprocess.run([sys.executable, "-c", blender], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 60  # generous: a loaded CI machine may take a while to schedule the child
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    status = Path(f"/proc/{child}/status")
    state = status.read_text() if status.exists() else "the child is gone"
    assert flag.exists() and flag.read_text() == "SIGINT", (proc.stdout, proc.stderr, state)
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()


def test_the_add_on_imports_nothing_of_the_engine_or_torch():
    """The add-on ships alone (docs/architecture.md): no module of it imports torch or the project (absolute, or
    relative past its own folder), and the engine driver's modules but its preferences import no bpy either, so
    they run in any Python (these tests)."""
    import ast

    addon = ENGINE_DIR.parent
    forbidden = {"torch", "torchvision", "safetensors", "sapiens2_studio", "core", "cli", "comfy_nodes"}
    for path in addon.rglob("*.py"):
        depth = len(path.relative_to(addon).parts) - 1  # levels a relative import may go up, minus one
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = {(node.module or "").split(".")[0]}
            elif isinstance(node, ast.ImportFrom):
                assert node.level <= depth + 1, f"{path}: a relative import leaves the add-on"
                continue
            else:
                continue
            assert not names & forbidden, f"{path.relative_to(addon)} imports {names & forbidden}"
            if path.parent == ENGINE_DIR and path.name != "preferences.py":
                assert "bpy" not in names, f"{path.name} imports bpy"
