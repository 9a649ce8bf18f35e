"""Render-farm chunks (`predict --frames A-B --run-id ID`) and `finalize` (issue #12, docs/scale.md).

The guarantee tested: chunks of a sequence — numbered frames, or a video (H.264 with B-frames, chunks starting
mid-GOP, each decoding only its range) — finalized, give the same files as one full local run — every EXR channel
and every JSON value apart from timestamps and run records — with smoothing on; `--skip-existing` on a chunk
keeps its verified frames; finalize refuses, naming the frames, when some are missing or come from another run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("OpenEXR")
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.exr import read_exr
from sapiens2_studio.core.formats.sequence import read_sequence
from studio_runs import FRAMES, assert_same_outputs, predict, predict_killed_after
from videos import write_walk_video


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, home, walk) -> Path:
    out = tmp_path_factory.mktemp("full")
    assert predict(home, walk, out) == 0
    return out / "walk"


def test_chunks_then_finalize_equal_one_full_run(tmp_path, home, walk, full_run, capsys) -> None:
    out = tmp_path / "farm"
    for first, last in ((9, 12), (1, 4), (5, 8)):  # in any order, as a farm manager dispatches them
        assert predict(home, walk, out, "--frames", f"{first}-{last}", "--run-id", "shot42") == 0
    folder = out / "walk"
    assert not (folder / "walk.sequence.json").exists()  # chunks never write the index
    assert (folder / "walk.partial.json").exists()
    assert main(["finalize", str(out)]) == 0
    assert f"finalized {FRAMES} frame(s)" in capsys.readouterr().err
    assert not (folder / "walk.partial.json").exists()
    seq = read_sequence(folder / "walk.sequence.json")
    assert seq.frame_numbers == list(range(1, FRAMES + 1))
    tracks = [[p.track_id for p in f.people] for f in seq]
    assert all(sorted(t) == [0, 1] for t in tracks)
    scales = [f.pointmap_scale for f in seq]
    assert len(set(scales)) > 1  # the scale really moved, so its smoothing was exercised
    assert_same_outputs(full_run, folder)
    # A second finalize (a re-queued farm job) is idempotent: exit 0, the same index, no frame touched.
    index = (folder / "walk.sequence.json").read_bytes()
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert main(["finalize", str(out)]) == 0
    assert "already finalized: walk" in capsys.readouterr().err
    assert (folder / "walk.sequence.json").read_bytes() == index
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps


def test_finalize_keeps_the_compression_the_chunks_chose(tmp_path, home, short, capsys) -> None:
    """A farm job's `--exr-compression` holds through finalize, which restages every frame's EXR (its smoothed
    points). That every compression holds the same pixels is tests/core/studio/jobs/test_exr_compression_choice.py's."""
    out = tmp_path / "farm"
    for first, last in ((1, 3), (4, 6)):
        chunk = ("--frames", f"{first}-{last}", "--run-id", "shot7", "--exr-compression", "zips")
        assert predict(home, short, out, *chunk, tasks="pose,pointmap") == 0
    assert main(["finalize", str(out)]) == 0
    assert "finalized 6 frame(s)" in capsys.readouterr().err
    folder = out / "walk"
    assert len(read_sequence(folder / "walk.sequence.json")) == 6
    for path in sorted(folder.glob("*.exr")):
        channels, header = read_exr(path)
        assert header["compression"].name == "ZIPS_COMPRESSION", path.name
        assert {"P.X", "P.Y", "P.Z", "Z", "R"} <= set(channels)
        doc = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        assert doc["run"]["outputs"]["exr_compression"] == "zips"
        assert doc["run"]["temporal"]["state"] == "passed"


@pytest.fixture(scope="module")
def walk_video(tmp_path_factory) -> Path:
    """The 12-frame walk as an H.264 video with B-frames and 5-frame GOPs, and its boxes beside it."""
    pytest.importorskip("av")
    return write_walk_video(tmp_path_factory.mktemp("video"), FRAMES)


def test_chunks_of_a_video_then_finalize_equal_one_full_run(
    tmp_path, home, walk_video, capsys, monkeypatch
) -> None:
    from sapiens2_studio.core.studio.sources import video

    def from_start(*args):
        raise AssertionError("a chunk decoded the video from its start")

    assert predict(home, walk_video, tmp_path / "full") == 0
    out = tmp_path / "farm"
    for first, last in ((9, 12), (1, 4), (5, 8)):  # 5 and 9 start mid-GOP: decoded from the keyframe before
        with monkeypatch.context() as patch:
            if first > 1:  # only the first chunk decodes from the video's start
                patch.setattr(video, "_decode_from_start", from_start)
            assert predict(home, walk_video, out, "--frames", f"{first}-{last}", "--run-id", "shot7") == 0
    folder = out / "walk"
    assert not (folder / "walk.sequence.json").exists()
    marker = json.loads((folder / "walk.partial.json").read_text(encoding="utf-8"))
    assert marker["numbers"] == list(range(1, FRAMES + 1)) and marker["frames"] == FRAMES  # from the index
    # a requeued chunk (one frame lost meanwhile) keeps the verified frames and computes only the lost one
    for lost in folder.glob("walk_0006.*"):
        lost.unlink()
    capsys.readouterr()
    assert predict(home, walk_video, out, "--frames", "5-8", "--run-id", "shot7", "--skip-existing") == 0
    err = capsys.readouterr().err
    assert "wrote 1 result(s)" in err and "kept 3" in err, err
    assert main(["finalize", str(out)]) == 0
    assert f"finalized {FRAMES} frame(s)" in capsys.readouterr().err
    seq = read_sequence(folder / "walk.sequence.json")
    assert seq.frame_numbers == list(range(1, FRAMES + 1))
    assert all(sorted(p.track_id for p in f.people) == [0, 1] for f in seq)
    assert len({f.pointmap_scale for f in seq}) > 1
    assert_same_outputs(tmp_path / "full" / "walk", folder)
    # a range past the video's end is refused with the video's length
    assert predict(home, walk_video, tmp_path / "past", "--frames", "20-30", "--run-id", "shot7") == 1
    assert "no frames in the range (the video has frames 1-12)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def short(tmp_path_factory, walk) -> Path:
    """The first 6 frames of `walk` (the refusal paths need no more)."""
    folder = tmp_path_factory.mktemp("short") / "walk"
    folder.mkdir()
    for n in range(1, 7):
        (folder / f"walk_{n:04d}.png").write_bytes((walk / f"walk_{n:04d}.png").read_bytes())
    (folder.parent / "boxes.json").write_text((walk.parent / "boxes.json").read_text())
    return folder


def test_a_smoothed_sequence_killed_and_resumed_equals_one_run(tmp_path, home, walk, full_run) -> None:
    """The local engine, SIGKILLed after its fifth commit, then --skip-existing: the kept frames are replayed
    through the pass from their raw inputs (`run.temporal`), so the smoothing after the resume point is the
    uninterrupted run's — every keypoint, the smoothed scale and the rescaled points equal."""
    out = tmp_path / "out"
    assert predict_killed_after(5, home, walk, out).returncode == -9
    assert (out / "walk" / "walk.partial.json").is_file()
    assert predict(home, walk, out, "--skip-existing") == 0
    assert_same_outputs(full_run, out / "walk")
    kept = json.loads((out / "walk" / "walk_0003.json").read_text(encoding="utf-8"))["run"]["temporal"]
    assert kept["state"] == "passed" and kept["tasks"] == ["pose", "pointmap"] and "scale" in kept


def test_finalize_refuses_missing_frames_and_other_runs(tmp_path, home, short, capsys) -> None:
    out = tmp_path / "farm"

    def chunk(frames: str, run: str, *extra: str) -> int:
        return predict(home, short, out, "--frames", frames, "--run-id", run, *extra, tasks="pose")

    assert chunk("1-2", "shotA") == 0
    assert chunk("5-6", "shotA") == 0
    capsys.readouterr()
    assert main(["finalize", str(out)]) == 1
    err = capsys.readouterr().err
    assert "2 frame(s) missing: 3-4" in err and "--skip-existing" in err
    assert not (out / "walk" / "walk.sequence.json").exists()
    # the missing chunk run under another run id (a typo in the farm job): refused, naming both runs, and
    # nothing of the shot changes (the old behaviour took the shot over silently)
    assert chunk("3-4", "shotB") == 1
    err = capsys.readouterr().err
    assert "belongs to run shotA" in err and "shotB" in err and "--take-over" in err, err
    assert not (out / "walk" / "walk_0003.json").exists()
    marker = json.loads((out / "walk" / "walk.partial.json").read_text(encoding="utf-8"))
    assert marker["run"]["id"] == "shotA" and marker["numbers"] == list(range(1, 7))
    # taken over on purpose: finalize then names both runs
    assert chunk("3-4", "shotB", "--take-over") == 0
    capsys.readouterr()
    assert main(["finalize", str(out)]) == 1
    err = capsys.readouterr().err
    assert "come from run shot" in err and "shotA" in err and "shotB" in err
    assert not (out / "walk" / "walk.sequence.json").exists()
    # every chunk again under the first run (taken back) with --skip-existing: only the foreign frames computed
    for frames in ("1-2", "3-4", "5-6"):
        assert chunk(frames, "shotA", "--skip-existing", "--take-over") == 0
    assert main(["finalize", str(out)]) == 0
    seq = read_sequence(out / "walk" / "walk.sequence.json")
    assert seq.frame_numbers == list(range(1, 7))
    assert {f.run["id"] for f in seq} == {"shotA"}


def test_frames_need_a_run_id(tmp_path, home, walk, capsys) -> None:
    assert predict(home, walk, tmp_path / "o", "--frames", "1-10") == 2
    assert "--run-id" in capsys.readouterr().err


def test_shared_lock_joins_writers_of_one_run_only(tmp_path) -> None:
    from sapiens2_studio.core.studio.errors import OutputError
    from sapiens2_studio.core.studio.store.lock import OutputLock

    first, second = OutputLock(tmp_path, "shot1", shared=True), OutputLock(tmp_path, "shot1", shared=True)
    first.acquire()
    second.acquire()  # a second chunk of the same run joins
    with pytest.raises(OutputError, match="shot1"):
        OutputLock(tmp_path, "other", shared=True).acquire()
    with pytest.raises(OutputError, match="shot1"):
        OutputLock(tmp_path, "shot1").acquire()  # an exclusive holder (finalize) waits for the chunks
    first.release()
    assert (tmp_path / ".sapiens2.lock").exists()  # the last one out removes it
    second.release()
    assert not (tmp_path / ".sapiens2.lock").exists()
    with OutputLock(tmp_path, "shot1"):
        pass
