"""The Ray engine (`--engine ray`, issue #12, docs/scale.md) on a local Ray with two CPU workers.

What is shown: a folder of images with a 12-frame H.264 video (B-frames, split into frame ranges over both
workers), and a 30-frame sequence (smoothing, track ids) give the same files as the local engine — every EXR
channel, every JSON value apart from run records and timestamps; a corrupt image fails alone and the exit code
says so; a worker killed mid-job loses and duplicates nothing and the report says what was retried; after an
interrupted job `--skip-existing` redoes only the frames that were not committed.

The local references run with one torch thread, as each worker here does (its CPU share of two cores): float
sums on the CPU depend on the thread count, not on the engine (with two threads one N.Z value in 768 differs by
one half-float step).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("OpenEXR")
import ray
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.sequence import read_sequence
from sapiens2_studio.core.studio.engines.dispatch import run_job
from sapiens2_studio.core.studio.engines.units import split_work, unit_size
from sapiens2_studio.core.studio.jobs.job import JobSpec, PredictJob
from sapiens2_studio.core.studio.sources.inputs import ImageJob, SequenceJob
from sapiens2_studio.core.studio.store.transaction import PAUSE_ENV
from studio_runs import assert_same_outputs
from videos import noise_frames, write_video

TASKS = "pose,pointmap,normal"
SEQUENCE_TASKS = "pose,pointmap"  # what the temporal pass changes (tracks, keypoints, the pointmap scale)
FRAMES = 30
WALK_DRIFT = 2.0  # grey levels a frame: a slower change than the default walk's
VIDEO_FRAMES = 12  # three units of four; with 5-frame GOPs (keyframes 1, 6, 11), 5 and 9 start mid-GOP
IMAGES = ("alder", "birch", "cedar", "dogwood", "elm", "fir", "ginkgo", "hazel")


@pytest.fixture(scope="module")
def kill_gate(tmp_path_factory) -> Iterator[Path]:
    """A local Ray for the module; its workers die at their second commit once the gate file is removed."""
    gate = tmp_path_factory.mktemp("gate") / "killed"
    gate.touch()  # disarmed
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {PAUSE_ENV: f"committed:2:kill-once:{gate}"}},
    )
    yield gate
    ray.shutdown()


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    """Eight photos with unrelated names (single images, not a sequence) and one corrupt file."""
    folder = tmp_path_factory.mktemp("photos")
    for n, name in enumerate(IMAGES):
        rgb = np.random.default_rng(n).integers(0, 256, (32, 24, 3)).astype(np.uint8)
        Image.fromarray(rgb).save(folder / f"{name}.png")
    (folder / "zelkova.png").write_bytes(b"\x89PNG\r\n\x1a\n but the rest is not an image")
    return folder


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """A 12-frame H.264 video with B-frames: split into three frame ranges (each worker decodes only its own, from
    the keyframe before it), finalized by the driver."""
    return write_video(tmp_path_factory.mktemp("video") / "clip.mp4", noise_frames(VIDEO_FRAMES, seed=50))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def predict(home: Path, source: Path | list[Path], out: Path, *extra: str, tasks: str = TASKS) -> int:
    sources = [str(p) for p in (source if isinstance(source, list) else [source])]
    args = ["predict", *sources, "--tasks", tasks, "--out", str(out), "--checkpoint-dir", str(home)]
    return main([*args, "--no-download", "--device", "cpu", "--no-flip-test", *extra])


def sequence_args(walk: Path) -> list[str]:
    return ["--boxes", str(walk.parent / "boxes.json"), "--smooth", "--mesh", "ply", "--fps", "24"]


def local_reference(home: Path, source: Path | list[Path], out: Path, *extra: str, tasks: str = TASKS) -> int:
    with one_thread():
        return predict(home, source, out, *extra, tasks=tasks)


@pytest.fixture(scope="module")
def local_walk(tmp_path_factory, home, walk) -> Path:
    """The sequence through the local engine: the reference of the sequence tests."""
    out = tmp_path_factory.mktemp("local")
    assert local_reference(home, walk, out, *sequence_args(walk), tasks=SEQUENCE_TASKS) == 0
    return out / "walk"


def frame_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_images_and_a_video_equal_the_local_engine_and_a_corrupt_image_fails_alone(
    tmp_path, kill_gate, home, photos, clip, capsys
) -> None:
    assert local_reference(home, [photos, clip], tmp_path / "local") == 1  # the corrupt photo fails there too
    capsys.readouterr()
    assert predict(home, [photos, clip], tmp_path / "ray", "--engine", "ray", "--workers", "2") == 1
    err = capsys.readouterr().err
    assert "zelkova.png" in err and "1 input(s) failed" in err, err
    # units: 4 + 4 + 1 photos, the video's frames 1-4, 5-8, 9-12
    assert f"wrote {len(IMAGES) + VIDEO_FRAMES} result(s)" in err and "6 unit(s) on 2 worker(s)" in err, err
    assert not list((tmp_path / "ray").glob("zelkova*"))
    assert len(list((tmp_path / "ray").glob("*.json"))) == len(IMAGES) + 2 * len(IMAGES)  # + keypoint JSONs
    assert_same_outputs(tmp_path / "local", tmp_path / "ray")  # the video's folder too
    seq = read_sequence(tmp_path / "ray" / "clip" / "clip.sequence.json")
    assert seq.frame_numbers == list(range(1, VIDEO_FRAMES + 1))
    assert not list((tmp_path / "ray" / "clip").glob("*.partial.json"))


def test_a_sequence_with_smoothing_and_track_ids_equals_the_local_engine(
    tmp_path, kill_gate, home, walk, local_walk, capsys
) -> None:
    extra = [*sequence_args(walk), "--engine", "ray", "--workers", "2"]
    assert predict(home, walk, tmp_path / "ray", *extra, tasks=SEQUENCE_TASKS) == 0
    assert "8 unit(s) on 2 worker(s)" in capsys.readouterr().err  # 30 frames in chunks of 4: borders inside
    assert_same_outputs(local_walk, tmp_path / "ray" / "walk")
    seq = read_sequence(tmp_path / "ray" / "walk" / "walk.sequence.json")
    assert seq.frame_numbers == list(range(1, FRAMES + 1))
    assert {p.track_id for frame in seq for p in frame.people} == {0, 1}
    states = {((f.run or {}).get("temporal") or {}).get("state") for f in seq}
    assert states == {"passed"}  # all through the pass, none pending


@pytest.fixture(scope="module")
def good_photos(tmp_path_factory, photos) -> Path:
    good = tmp_path_factory.mktemp("good")
    for name in IMAGES:
        (good / f"{name}.png").write_bytes((photos / f"{name}.png").read_bytes())
    return good


def test_a_worker_loads_its_models_once_for_all_its_units(tmp_path, home, good_photos, monkeypatch) -> None:
    """What an actor does (`UnitWorker.run`), here in this process: units share one model cache."""
    from sapiens2_studio.core.studio.engines.units import run_unit
    from sapiens2_studio.core.studio.jobs.job import Member
    from sapiens2_studio.core.studio.runtime import models
    from sapiens2_studio.core.studio.store.resume import RunInfo

    loads: list[str] = []
    real = models.load
    monkeypatch.setattr(models, "load", lambda path, **kw: loads.append(kw["task"]) or real(path, **kw))
    spec = JobSpec(
        inputs=[good_photos],
        out=tmp_path / "o",
        tasks=("pose",),
        checkpoint_dir=home,
        allow_download=False,
        device="cpu",
        flip_test=False,
        previews=False,
    )
    job = PredictJob(spec)
    job.prepare()
    units = split_work(job.jobs, workers=2)
    member = Member(RunInfo.new(), models.ModelCache())
    results = [run_unit(spec, unit, member, job.paths) for unit in units]
    assert len(units) == 2 and [r.written for r in results] == [4, 4]
    assert loads == ["pose"]  # loaded for the first unit, reused by the second
    assert len(list((tmp_path / "o").glob("*.exr"))) == len(IMAGES)


def test_a_worker_killed_mid_job_loses_and_duplicates_nothing(
    tmp_path, kill_gate, home, good_photos, capsys
) -> None:
    good = good_photos
    assert local_reference(home, good, tmp_path / "local") == 0
    kill_gate.unlink()  # armed: the first worker to commit its second frame is SIGKILLed
    try:
        assert predict(home, good, tmp_path / "ray", "--engine", "ray", "--workers", "2") == 0
    finally:
        killed = kill_gate.exists()
        kill_gate.touch()
    err = capsys.readouterr().err
    assert killed, "no worker was killed"
    assert "retried: " in err and "its worker died (killed); retried on another worker" in err, err
    # each frame counted once (the summary now always lists every count, so "kept 0", not no "kept")
    assert "wrote 8 result(s)" in err and "kept 0 verified result(s)" in err, err
    names = frame_files(tmp_path / "ray")
    assert not [n for n in names if n.startswith(".")], names  # no journal, temporary or lock left
    assert sorted(n for n in names if n.endswith(".exr")) == sorted(f"{n}.exr" for n in IMAGES)
    assert_same_outputs(tmp_path / "local", tmp_path / "ray")


def test_skip_existing_after_an_interrupted_job_redoes_only_the_missing_frames(
    tmp_path, kill_gate, home, walk, local_walk
) -> None:
    spec = dict(
        inputs=[walk],
        out=tmp_path / "ray",
        tasks=tuple(SEQUENCE_TASKS.split(",")),
        checkpoint_dir=home,
        allow_download=False,
        device="cpu",
        flip_test=False,
        boxes_file=walk.parent / "boxes.json",
        smooth=True,
        mesh="ply",
        fps=24.0,
        engine="ray",
        workers=2,
    )

    def interrupt(count: int, label: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C once the first unit is done, with the second still running

    with pytest.raises(KeyboardInterrupt):
        run_job(JobSpec(**spec), on_item=interrupt)
    folder = tmp_path / "ray" / "walk"
    committed = {p.name: p.read_bytes() for p in folder.glob("walk_*.json") if ".keypoints" not in p.name}
    committed = {k: v for k, v in committed.items() if not k.endswith(".openpose.json")}
    assert 4 <= len(committed) < FRAMES, sorted(committed)
    assert (folder / "walk.partial.json").exists() and not (folder / "walk.sequence.json").exists()
    assert not (tmp_path / "ray" / ".sapiens2.lock").exists()  # released, no worker left writing

    report = run_job(JobSpec(**spec, skip_existing=True))
    assert report.ok, report.failures
    assert report.skipped == len(committed) and report.written == FRAMES - len(committed)
    assert_same_outputs(local_walk, folder)
    assert len({json.loads(p.read_text())["run"]["id"] for p in folder.glob("walk_????.json")}) == 1


def test_frame_ranges_belong_to_the_local_engine(tmp_path, home, walk, capsys) -> None:
    extra = ["--engine", "ray", "--frames", "1-4", "--run-id", "shot"]
    assert predict(home, walk, tmp_path / "o", *extra) == 2
    assert "splits the frames across its workers itself" in capsys.readouterr().err


def test_a_missing_ray_is_explained_before_anything_runs(tmp_path, home, walk, capsys, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    assert predict(home, walk, tmp_path / "o", "--engine", "ray") == 2
    assert "pip install 'sapiens2-studio[ray]'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_units_split_images_sequences_and_videos(tmp_path) -> None:
    images = [ImageJob(tmp_path / f"{n}.png", n) for n in "abcdefghij"]
    frames = [tmp_path / f"s_{n:04d}.png" for n in range(1001, 1031)]
    sequence = SequenceJob("s", frames)
    video = SequenceJob("clip", video=write_video(tmp_path / "clip.mp4", noise_frames(14)))
    broken = SequenceJob("broken", video=tmp_path / "missing.mp4")
    units = split_work([*images, sequence, video, broken], workers=2)  # 54 frames: units of 7
    assert [len(u.jobs) for u in units if isinstance(u.jobs[0], ImageJob)] == [7, 3]
    chunks = [u.frames for u in units if u.sequence == "s"]
    assert chunks == [(1001, 1007), (1008, 1014), (1015, 1021), (1022, 1028), (1029, 1030)]
    # a video is split into frame ranges like a numbered sequence (1-based, its count from the index)
    assert [(u.frames, u.count, u.label) for u in units if u.sequence == "clip"] == [
        ((1, 7), 7, "clip #1-7"),
        ((8, 14), 7, "clip #8-14"),
    ]
    # one that cannot be indexed goes whole to one worker, which reports why (as the local engine does)
    assert [(u.label, u.frames, u.sequence) for u in units if u.jobs[0] is broken] == [
        ("broken (video)", None, None)
    ]
    assert [u.index for u in units] == list(range(len(units)))
    assert unit_size(3, workers=2, batch=1) == 2  # both workers get frames
    assert unit_size(10_000, workers=2, batch=1) == 64  # a dead worker loses at most 64 frames in progress
    assert unit_size(30, workers=2, batch=4) == 4 and unit_size(30, workers=2, batch=3) == 6


@pytest.mark.skipif(os.name != "posix", reason="flock")
def test_the_driver_opens_its_lock_to_its_workers_only(tmp_path) -> None:
    from sapiens2_studio.core.studio.errors import OutputError
    from sapiens2_studio.core.studio.store.lock import OutputLock

    driver = OutputLock(tmp_path, "run1")
    driver.acquire()
    with pytest.raises(OutputError):
        OutputLock(tmp_path, "run1", shared=True).acquire()  # exclusive while it recovers
    driver.share()
    worker = OutputLock(tmp_path, "run1", shared=True)
    worker.acquire()
    with pytest.raises(OutputError, match="run1"):
        OutputLock(tmp_path, "run2", shared=True).acquire()
    worker.release()
    driver.exclusive(wait=5)
    driver.release()
    assert not (tmp_path / ".sapiens2.lock").exists()
