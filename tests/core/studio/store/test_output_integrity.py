"""The output side under interruption, concurrency, full and read-only disks (issue #11).

Every run here is a real `python -m sapiens2_studio.cli predict …` subprocess on tiny official-layout
checkpoints, stopped at named points of the frame commit by the documented test hook SAPIENS2_TEST_PAUSE_AT
(core/studio/store/transaction.py): `kill` is a real SIGKILL, `int` a real SIGINT, `wait:GATE` holds the writer until
the test creates GATE. Each subprocess has a timeout, so a hang fails instead of blocking the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("OpenEXR")
from sapiens2_studio.core.formats.bundle import read_bundle
from sapiens2_studio.core.formats.sequence import read_sequence
from sapiens2_studio.core.studio.jobs.preflight import estimate_job_bytes, human_size
from sapiens2_studio.core.studio.sources.inputs import collect_inputs
from sapiens2_studio.core.studio.store.resume import committed_bundle
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

RUN_TIMEOUT = 180
FRAMES = 4
FRAME_JSON = re.compile(r"^walk_\d{4}\.json$")


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """Official layout `<home>/<task>/sapiens2_0.4b_<task>.safetensors`."""
    home = tmp_path_factory.mktemp("home")
    for seed, task in enumerate(("seg", "pose")):
        write_synthetic_checkpoint(home / task / f"sapiens2_0.4b_{task}.safetensors", task=task, seed=seed)
    return home


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("src") / "walk"
    folder.mkdir()
    for n in range(1, FRAMES + 1):
        rgb = np.random.default_rng(n).integers(0, 256, (32, 24, 3), dtype=np.uint8)
        Image.fromarray(rgb).save(folder / f"walk_{n:04d}.png")
    (folder.parent / "boxes.json").write_text("[[0, 0, 24, 32]]", encoding="utf-8")  # pose: one fast crop
    return folder


def predict(
    home: Path, inputs: list[Path], out: Path, tasks: str, *extra: str, pause: str | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SAPIENS2_TEST_PAUSE_AT", None)
    if pause:
        env["SAPIENS2_TEST_PAUSE_AT"] = pause
    cmd = [sys.executable, "-m", "sapiens2_studio.cli", "predict", *map(str, inputs), "--tasks", tasks]
    cmd += ["--out", str(out), "--checkpoint-dir", str(home), "--no-download", "--device", "cpu", *extra]
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, preexec_fn=_default_sigint
    )


def pose_args(frames: Path) -> tuple[str, ...]:
    return ("--boxes", str(frames.parent / "boxes.json"), "--no-flip-test")


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` → sha256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def state(folder: Path) -> dict:
    """What a reader sees in a sequence folder: index, marker, frame JSONs (name → run id), journals, temps."""
    index = folder / "walk.sequence.json"
    marker = folder / "walk.partial.json"
    frame_docs = {
        p.name: json.loads(p.read_text()) for p in sorted(folder.iterdir()) if FRAME_JSON.match(p.name)
    }
    return {
        "index": json.loads(index.read_text()) if index.exists() else None,
        "marker": json.loads(marker.read_text()) if marker.exists() else None,
        "frames": {name: doc["run"]["id"] for name, doc in frame_docs.items()},
        "tasks": {name: doc["run"]["tasks"] for name, doc in frame_docs.items()},
        "journals": sorted(p.name for p in folder.glob(".*.commit.json")),
    }


def assert_never_mixed(folder: Path) -> dict:
    """The guarantee: an index only over frames of its own run (and readable), else a partial marker; every
    frame JSON that exists describes a complete, verified file set."""
    seen = state(folder)
    for name in seen["frames"]:
        doc, why = committed_bundle(folder, name[: -len(".json")])
        assert doc is not None, f"{name}: {why}"
    if seen["index"] is not None:
        listed = [e["json"] for e in seen["index"]["frames"]]
        assert {seen["frames"][j] for j in listed} == {seen["index"]["run"]["id"]}
        assert len(read_sequence(folder / "walk.sequence.json")) == len(listed)
    else:
        assert seen["marker"] is not None, "no index and no partial marker"
        assert "--skip-existing" in seen["marker"]["message"]
    return seen


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, home, frames) -> tuple[Path, str]:
    """A complete seg run of the 4-frame sequence: the 'previous complete state'."""
    out = tmp_path_factory.mktemp("first") / "out"
    proc = predict(home, [frames], out, "seg")
    assert proc.returncode == 0, proc.stderr
    return out, state(out / "walk")["index"]["run"]["id"]


def test_interrupted_rerun_with_other_tasks_is_never_mixed_and_resumes(tmp_path, home, frames, first_run):
    """A pose re-run into a complete seg run, stopped six ways in a row (SIGKILL before any model, SIGKILL with a
    frame staged, SIGKILL between EXR and JSON, SIGINT during a commit, SIGKILL before the index); after each the
    folder is the old complete result or marked partial, and --skip-existing completes it without redoing work."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(first_run[0], out)
    seq, run_a = out / "walk", first_run[1]
    before = snapshot(out)
    seg_a = {n: read_bundle(seq / f"walk_{n:04d}.json").seg for n in range(1, FRAMES + 1)}
    pose = pose_args(frames)

    # 1. SIGKILL after the lock, before any model loads: exactly the previous complete state (+ a stale lock)
    proc = predict(home, [frames], out, "pose", *pose, pause="locked:1:kill")
    assert proc.returncode == -signal.SIGKILL
    assert {k: v for k, v in snapshot(out).items() if k != ".sapiens2.lock"} == before
    assert json.loads((out / ".sapiens2.lock").read_text())["run"] != run_a  # the dead run's record
    seen = assert_never_mixed(seq)
    assert seen["index"]["run"]["id"] == run_a and seen["marker"] is None

    # 2. a plain re-run (new run B), SIGKILL with frame 2's files staged: frame 1 is B's, 2-4 still A's, no index
    proc = predict(home, [frames], out, "pose", *pose, pause="staged:2:kill")
    assert proc.returncode == -signal.SIGKILL
    seen = assert_never_mixed(seq)
    run_b = seen["marker"]["run"]["id"]
    assert seen["index"] is None and run_b != run_a
    assert seen["frames"] == {"walk_0001.json": run_b, **{f"walk_{n:04d}.json": run_a for n in (2, 3, 4)}}
    assert any(p.name.startswith(".walk_0002") for p in seq.iterdir())  # hidden temporaries of the killed run

    # 3. --skip-existing continues run B; SIGKILL between the EXR and the JSON of frame 2
    proc = predict(home, [frames], out, "pose", *pose, "--skip-existing", pause="exr:1:kill")
    assert proc.returncode == -signal.SIGKILL
    seen = assert_never_mixed(seq)
    assert "walk_0002.json" not in seen["frames"]  # the old JSON went first: no new EXR beside an old JSON
    assert seen["journals"] == [".walk_0002.commit.json"] and seen["marker"]["run"]["id"] == run_b

    # 4. SIGINT while frame 3 commits: the commit finishes (the signal is held), then the run stops (exit 130)
    proc = predict(home, [frames], out, "pose", *pose, "--skip-existing", pause="files:1:int")
    assert proc.returncode == 130 and "interrupted" in proc.stderr
    seen = assert_never_mixed(seq)
    assert seen["journals"] == []  # frame 2's commit was rolled forward by this run
    assert seen["frames"] == {**{f"walk_{n:04d}.json": run_b for n in (1, 2, 3)}, "walk_0004.json": run_a}
    assert not [p for p in seq.iterdir() if p.name.startswith(".") and "tmp" in p.name]  # stale temps cleaned

    # 5. SIGKILL after the last frame, before the index: every frame B's, still marked partial
    proc = predict(home, [frames], out, "pose", *pose, "--skip-existing", pause="index:1:kill")
    assert proc.returncode == -signal.SIGKILL
    seen = assert_never_mixed(seq)
    assert set(seen["frames"].values()) == {run_b} and seen["index"] is None

    # 6. --skip-existing completes it: nothing recomputed, the index written over run B's frames only
    proc = predict(home, [frames], out, "pose", *pose, "--skip-existing")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote 0 result(s) to {out}, kept {FRAMES} verified result(s)" in proc.stderr
    assert "recovered the lock of run" in proc.stderr and "which is no longer running" in proc.stderr
    seen = assert_never_mixed(seq)
    assert seen["index"]["run"]["id"] == run_b and seen["marker"] is None
    assert all(tasks == ["seg", "pose"] for tasks in seen["tasks"].values())
    sequence = read_sequence(seq / "walk.sequence.json")
    for n, frame in zip(sequence.frame_numbers, sequence):
        np.testing.assert_array_equal(frame.seg, seg_a[n])  # seg kept from run A, exactly
        assert len(frame.people) == 1 and frame.people[0].track_id == 0  # tracking continued across resumes
    assert not (out / ".sapiens2.lock").exists()


def _start(home: Path, frames: Path, out: Path, pause: str) -> subprocess.Popen:
    env = {**os.environ, "SAPIENS2_TEST_PAUSE_AT": pause}
    cmd = [
        sys.executable,
        "-m",
        "sapiens2_studio.cli",
        "predict",
        str(frames),
        "--tasks",
        "seg",
        "--out",
        str(out),
    ]
    # One writer thread: the gate holds the frame it names, and with more writers the next frames would go on
    # beside it (the kill tests, through `predict`, run with the default writers).
    cmd += ["--checkpoint-dir", str(home), "--no-download", "--device", "cpu", "--writers", "0"]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint
    )


def _default_sigint() -> None:
    """Give the run Ctrl-C's default action even when this test process was started in the background by a
    non-interactive shell, which makes SIGINT ignored and passes that on to every child (a run that ignores
    SIGINT is right to ignore it, so the tests would see no interrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(gate: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not Path(f"{gate}.reached").exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the run never reached its pause point"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("sig", "rc", "said"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_a_signal_from_outside_during_a_commit_waits_for_the_frame(tmp_path, home, frames, sig, rc, said):
    """Ctrl-C or a scheduler's SIGTERM sent while frame 2 sits between its EXR and its JSON: the frame is
    finished first, then the run stops cleanly (lock released, sequence marked partial, no temporaries)."""
    out, gate = tmp_path / "out", tmp_path / "gate"
    proc = _start(home, frames, out, f"exr:2:wait:{gate}")
    try:
        _wait_for(gate, proc)
        proc.send_signal(sig)
        time.sleep(0.5)
        assert proc.poll() is None  # held: the process is still inside the commit
        gate.touch()
        _, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == rc and f"sapiens2: {said}" in err
    seq = out / "walk"
    seen = assert_never_mixed(seq)
    assert list(seen["frames"]) == ["walk_0001.json", "walk_0002.json"] and seen["journals"] == []
    assert not (out / ".sapiens2.lock").exists()
    assert not [p.name for p in seq.iterdir() if p.name.startswith(".")]


def test_second_run_into_a_busy_folder_is_refused_and_loses_nothing(tmp_path, home, frames):
    out, gate = tmp_path / "out", tmp_path / "gate"
    first = _start(home, frames, out, f"committed:1:wait:{gate}")
    try:
        _wait_for(gate, first)
        held = snapshot(out)
        second = predict(home, [frames], out, "seg")
        assert second.returncode == 1
        holder = json.loads((out / ".sapiens2.lock").read_text())
        assert f"is in use by run {holder['run']} (pid {first.pid} on host {holder['host']}" in second.stderr
        assert "Traceback" not in second.stderr and "wrote" not in second.stderr
        assert snapshot(out) == held  # the refused run changed nothing
        gate.touch()
        _, err = first.communicate(timeout=RUN_TIMEOUT)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    seen = assert_never_mixed(out / "walk")
    assert len(seen["index"]["frames"]) == FRAMES and seen["index"]["run"]["id"] == holder["run"]


# ----------------------------------------------------------------------------- full and read-only file systems


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a small tmpfs (root only); yields a function mount(size, read_only) -> Path, unmounted afterwards."""
    mounted: list[Path] = []

    def mount(size: str, read_only: bool = False) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", str(point)], check=False)


def test_too_small_disk_is_refused_before_any_model_loads(tmpfs, home, frames):
    # The disk holds half of what the estimate (core/studio/jobs/estimate.py) asks, so the numbers follow the estimate.
    needed, count = estimate_job_bytes(Path("/nonexistent"), collect_inputs([str(frames)]), ["seg"])
    pages = needed // 2 // 4096
    disk = tmpfs(str(pages * 4096))
    proc = predict(
        home, [frames], disk / "out", "seg", pause="locked:1:kill"
    )  # a loaded model would die here
    assert proc.returncode == 1, proc.stderr
    assert f"not enough free space for the results in {disk / 'out'}" in proc.stderr
    assert count == FRAMES
    free = shutil.disk_usage(disk).free
    message = f"about {human_size(needed)} are needed ({FRAMES} image(s), tasks seg, EXR zip), {human_size(free)} are free"
    assert message in proc.stderr  # docs/cli.md quotes this line
    assert list(disk.iterdir()) == []  # no debris, not even the folder


def test_disk_full_during_the_run_names_the_file_and_leaves_no_debris(tmp_path, tmpfs, home, frames):
    disk = tmpfs("24m")
    out, gate = disk / "out", tmp_path / "gate"
    run = _start(home, frames, out, f"committed:1:wait:{gate}")
    try:
        _wait_for(gate, run)
        filler = disk / "filler"
        with open(filler, "wb") as handle:  # fill the disk to the last byte
            try:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            except OSError:
                pass
        gate.touch()
        _, err = run.communicate(timeout=RUN_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, err
    assert f"no space left on the disk of {out / 'walk'} while writing walk_0002." in err
    assert "Errno" not in err and ".tmp" not in err and "Traceback" not in err
    seq = out / "walk"
    assert not [p.name for p in seq.iterdir() if p.name.startswith(".")]  # no temporaries, no journal
    seen = assert_never_mixed(seq)
    assert list(seen["frames"]) == ["walk_0001.json"] and seen["index"] is None
    filler.unlink()
    proc = predict(home, [frames], out, "seg", "--skip-existing")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {FRAMES - 1} result(s) to {out}, kept 1 verified result(s)" in proc.stderr
    assert len(assert_never_mixed(seq)["index"]["frames"]) == FRAMES


def test_read_only_output_is_refused_before_any_model_loads(tmp_path, tmpfs, home, frames):
    if os.geteuid() == 0:
        disk = tmpfs("1m", read_only=True)
        expected = "is on a read-only file system"
    else:  # the closest real alternative without root: a folder without write permission
        disk = tmp_path / "locked"
        disk.mkdir(mode=0o555)
        expected = "permission denied"
    for out in (disk, disk / "new"):
        proc = predict(home, [frames], out, "seg", pause="locked:1:kill")
        assert proc.returncode == 1, proc.stderr
        assert str(out) in proc.stderr and expected in proc.stderr and "Errno" not in proc.stderr
    assert list(disk.iterdir()) == []


def test_output_path_that_is_a_file(tmp_path, home, frames):
    (tmp_path / "out").write_text("not a folder")
    proc = predict(home, [frames], tmp_path / "out", "seg")
    assert proc.returncode == 1 and f"the output folder {tmp_path / 'out'} is a file" in proc.stderr
