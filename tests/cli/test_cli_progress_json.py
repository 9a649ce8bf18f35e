"""`sapiens2 predict --progress json`: the event stream programs drive the CLI by (docs/cli.md, "Progress stream"),
the exit statuses, and the human progress's last line saying `stopped` / `failed` when so.

Real runs on tiny official-layout checkpoints (`<home>/<task>/sapiens2_0.4b_<task>.safetensors`), seg only (the
cheapest task); the signal tests run the CLI as a subprocess held at a pause point of the engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("OpenEXR")
import itertools

from sapiens2_studio.cli.main import EXIT_CHECKPOINT, EXIT_TERMINATED, EXIT_USAGE, main
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

EVENTS = {"start", "model_loaded", "frame", "warning", "finished", "error"}
RUN_TIMEOUT = 120


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    write_synthetic_checkpoint(home / "seg" / "sapiens2_0.4b_seg.safetensors", task="seg", seed=1)
    return home


def _image(path: Path, seed: int = 0, size: tuple[int, int] = (24, 32)) -> Path:
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path)
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    src = tmp_path_factory.mktemp("src")
    photos = src / "photos"
    photos.mkdir()
    _image(photos / "alpha.png", 1)
    _image(photos / "beta.png", 2)
    walk = src / "walk"
    walk.mkdir()
    for n in (1, 2, 3):
        _image(walk / f"walk_{n:04d}.png", 10 + n)
    return {"photos": photos, "walk": walk}


def _argv(home: Path, out: Path, *inputs: Path | str, extra: tuple[str, ...] = ()) -> list[str]:
    return [
        "predict",
        *map(str, inputs),
        "--tasks",
        "seg",
        "--out",
        str(out),
        "--checkpoint-dir",
        str(home),
        "--no-download",
        "--device",
        "cpu",
        "--no-previews",
        "--progress",
        "json",
        *extra,
    ]


def _events(stdout: str) -> list[dict]:
    lines = stdout.splitlines()
    events = [json.loads(line) for line in lines]  # every line of stdout is one JSON object: nothing else
    for event in events:
        assert event["event"] in EVENTS and isinstance(event["t"], float), event
    return events


def _run(capsys, argv: list[str]) -> tuple[int, list[dict], str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, _events(captured.out), captured.err


def test_a_run_streams_start_models_one_line_per_frame_and_finished(capsys, home, inputs, tmp_path):
    out = tmp_path / "out"
    rc, events, err = _run(capsys, _argv(home, out, inputs["photos"], inputs["walk"]))
    assert rc == 0, err
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "finished"
    start, finished = events[0], events[-1]
    assert start["schema"] == 1 and start["command"] == "predict" and start["tasks"] == ["seg"]
    assert start["total"] == 5 and start["out"] == str(out) and start["run_id"]
    assert [(i["kind"], i["name"], i["frames"]) for i in start["inputs"]] == [
        ("image", "alpha", 1),
        ("image", "beta", 1),
        ("sequence", "walk", 3),
    ]
    loaded = [e for e in events if e["event"] == "model_loaded"]
    assert [(m["task"], m["checkpoint"], m["device"], m["dtype"]) for m in loaded] == [
        ("seg", "sapiens2_0.4b_seg.safetensors", "cpu", "fp32")
    ]
    frames = [e for e in events if e["event"] == "frame"]
    assert kinds.index("model_loaded") < kinds.index("frame")
    assert [f["done"] for f in frames] == [1, 2, 3, 4, 5] and {f["total"] for f in frames} == {5}
    assert [f["name"] for f in frames] == ["alpha.png", "beta.png", "walk #1", "walk #2", "walk #3"]
    assert {f["status"] for f in frames} == {"written"}
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(events))  # in the order they happened
    assert finished["status"] == "ok" and finished["exit_code"] == 0
    assert (finished["written"], finished["kept"], finished["failed"], finished["frames"]) == (5, 0, 0, 5)
    results = {r["name"]: r for r in finished["results"]}
    assert results["alpha"]["path"] == str(out / "alpha.json") and results["alpha"]["exists"]
    assert results["walk"]["path"] == str(out / "walk" / "walk.sequence.json") and results["walk"]["exists"]
    assert "sapiens2: wrote 5 result(s)" in err  # the human summary stays on stderr

    # A resume: every frame verified and kept, no model loaded at all.
    rc, events, _ = _run(
        capsys, _argv(home, out, inputs["photos"], inputs["walk"], extra=("--skip-existing",))
    )
    assert rc == 0
    assert "model_loaded" not in [e["event"] for e in events]
    assert [e["status"] for e in events if e["event"] == "frame"] == ["kept"] * 5
    assert (events[-1]["written"], events[-1]["kept"]) == (0, 5)


def test_a_broken_input_is_a_failed_frame_and_a_failed_finish(capsys, home, tmp_path):
    _image(tmp_path / "good.png")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    rc, events, _err = _run(
        capsys, _argv(home, tmp_path / "out", tmp_path / "bad.png", tmp_path / "good.png")
    )
    assert rc == 1
    frames = {e["name"]: e["status"] for e in events if e["event"] == "frame"}
    assert frames == {
        "bad": "failed",
        "good.png": "written",
    }  # the engine's labels: a failed image by its name
    finished = events[-1]
    assert finished["event"] == "finished" and finished["status"] == "failed" and finished["exit_code"] == 1
    assert finished["failed"] == 1 and "bad.png: cannot read image" in finished["failures"][0]


def test_a_missing_checkpoint_is_one_error_event_with_the_cli_hint(capsys, tmp_path):
    _image(tmp_path / "a.png")
    argv = _argv(tmp_path / "nohome", tmp_path / "out", tmp_path / "a.png")
    rc, events, err = _run(capsys, argv)
    assert rc == EXIT_CHECKPOINT == 4
    assert [e["event"] for e in events] == ["error"]  # it fails before the run starts
    error = events[0]
    assert error["kind"] == "checkpoint" and error["exit_code"] == 4
    assert str(tmp_path / "nohome" / "seg" / "sapiens2_0.4b_seg.safetensors") in error["message"]
    assert error["hint"] == "or pass --checkpoint seg=PATH"
    assert f"{error['message']}" in err  # the same words as the human line


def test_usage_errors_are_error_events_too(capsys, home, tmp_path):
    _image(tmp_path / "a.png")
    argv = _argv(home, tmp_path / "out", tmp_path / "a.png")
    bad_task = [*argv[:3], "depth", *argv[4:]]  # our own check of --tasks
    rc, events, _ = _run(capsys, bad_task)
    assert rc == EXIT_USAGE and [(e["event"], e["kind"], e["exit_code"]) for e in events] == [
        ("error", "usage", 2)
    ]
    assert "unknown task 'depth'" in events[0]["message"]
    with pytest.raises(SystemExit) as exc:  # argparse's own check
        main([*argv, "--size", "9b"])
    captured = capsys.readouterr()
    assert exc.value.code == 2 and "invalid choice: '9b'" in captured.err
    (event,) = _events(captured.out)
    assert (
        event["event"] == "error" and event["kind"] == "usage" and "invalid choice: '9b'" in event["message"]
    )


def _start(home: Path, out: Path, frames: Path, gate: Path, *extra: str) -> subprocess.Popen:
    argv = _argv(home, out, frames, extra=("--writers", "0"))
    argv = [a for a in argv if a not in ("--progress", "json")] + list(extra)
    env = {**os.environ, "SAPIENS2_TEST_PAUSE_AT": f"staged:2:wait:{gate}"}  # staging the 2nd frame's files
    return subprocess.Popen(
        [sys.executable, "-m", "sapiens2_studio.cli", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _stop_at_gate(proc: subprocess.Popen, gate: Path, sig: int) -> tuple[str, str]:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not Path(f"{gate}.reached").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached its pause point"
        time.sleep(0.05)
    proc.send_signal(sig)
    gate.touch()  # the held commit completes, then the signal lands
    return proc.communicate(timeout=RUN_TIMEOUT)


@pytest.mark.parametrize("mode", ["json", "log"])
def test_sigterm_mid_sequence_ends_stopped_not_done(home, inputs, tmp_path, mode):
    """Issue 33: after a scheduler's cancel the log's last progress line says `stopped` (it said `… done`); the
    JSON stream ends with an `error` event of kind `terminated` after exactly the frames committed."""
    gate = tmp_path / "gate"
    extra = ("--progress", "json") if mode == "json" else ()
    proc = _start(home, tmp_path / "out", inputs["walk"], gate, *extra)
    stdout, stderr = _stop_at_gate(proc, gate, signal.SIGTERM)
    assert proc.returncode == EXIT_TERMINATED == 143, stderr
    assert "sapiens2: terminated" in stderr
    folder = tmp_path / "out" / "walk"
    committed = sorted(p.name for p in folder.glob("walk_*.json"))
    assert committed == ["walk_0001.json"] and (folder / "walk.partial.json").is_file()  # frame 2 dropped
    if mode == "log":
        lines = [line for line in stderr.splitlines() if line.startswith("predict: ")]
        assert lines[-1].startswith("predict: 1/3 images") and lines[-1].endswith("stopped"), stderr
        assert "done" not in lines[-1]
        return
    events = _events(stdout)
    assert [e["event"] for e in events if e["event"] != "warning"] == [
        "start",
        "model_loaded",
        "frame",
        "error",
    ]
    assert events[-1]["kind"] == "terminated" and events[-1]["exit_code"] == 143
    assert "--skip-existing" in events[-1]["hint"]


@pytest.mark.parametrize("writers", ["0", "2"])
def test_a_stop_during_a_commit_reports_every_committed_frame_then_the_stop(home, tmp_path, writers):
    """Issue 32: a stop that comes while a frame is being committed (here held inside the commit of frame 2, its
    files renamed and its JSON not yet) lets that frame finish *and* sends its `frame` event, in order, before the
    `error` event: the stream lists exactly the frames on disk, which `--skip-existing` then keeps. With writer
    threads the frames the other writer finished meanwhile are reported too; none that had not started is."""
    walk = tmp_path / "walk"
    walk.mkdir()
    for n in range(1, 7):
        _image(walk / f"walk_{n:04d}.png", 20 + n)
    gate, out = tmp_path / "gate", tmp_path / "out"
    argv = _argv(home, out, walk, extra=("--writers", writers))
    proc = subprocess.Popen(
        [sys.executable, "-m", "sapiens2_studio.cli", *argv],
        env={**os.environ, "SAPIENS2_TEST_PAUSE_AT": f"files:2:wait:{gate}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    stdout, stderr = _stop_at_gate(proc, gate, signal.SIGINT)
    assert proc.returncode == 130, stderr
    events = _events(stdout)
    committed = sorted(p.stem for p in (out / "walk").glob("walk_[0-9][0-9][0-9][0-9].json"))
    frames = [e for e in events if e["event"] == "frame"]
    assert len(committed) >= 2 and "walk_0002" in committed
    if writers == "0":  # the held frame was the one being written: the run stopped right after it
        assert committed == ["walk_0001", "walk_0002"]
    assert [f["name"] for f in frames] == [f"walk #{int(c[-4:])}" for c in committed]  # each one, in order
    assert [f["done"] for f in frames] == list(range(1, len(committed) + 1))
    assert {f["status"] for f in frames} == {"written"}
    kinds = [e["event"] for e in events if e["event"] != "warning"]
    assert kinds == ["start", "model_loaded", *["frame"] * len(committed), "error"]
    error = events[-1]
    assert (error["kind"], error["exit_code"], error["frames"]) == ("interrupted", 130, len(committed))
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(events))
    assert (out / "walk" / "walk.partial.json").is_file() and not (
        out / "walk" / "walk.sequence.json"
    ).exists()

    # --skip-existing keeps exactly the frames the stream reported and computes the rest.
    rc = subprocess.run(
        [sys.executable, "-m", "sapiens2_studio.cli", *_argv(home, out, walk, extra=("--skip-existing",))],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert rc.returncode == 0, rc.stderr
    resumed = [e for e in _events(rc.stdout) if e["event"] == "frame"]
    assert [e["status"] for e in resumed] == ["kept"] * len(committed) + ["written"] * (6 - len(committed))
    assert (out / "walk" / "walk.sequence.json").is_file()


def test_a_failure_ends_the_log_with_failed(capsys, home, tmp_path):
    _image(tmp_path / "good.png")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    argv = [a for a in _argv(home, tmp_path / "out", tmp_path / "bad.png", tmp_path / "good.png")]
    rc = main(argv[:-2])  # the human progress: stderr is not a terminal here
    err = capsys.readouterr().err
    assert rc == 1
    last = [line for line in err.splitlines() if line.startswith("predict: ")][-1]
    assert last.startswith("predict: 2/2 images") and last.endswith("failed")
