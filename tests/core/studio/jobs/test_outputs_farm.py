"""Nothing is lost behind the user's back (issue 33): a temporarily missing frame keeps its results, and farm
chunks that see part of a shot cannot shrink it. Both tests fail on the code before issue 33 (the frame's bundle
was deleted; finalize indexed 4 of 6 frames and exited 0)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("OpenEXR")
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.sequence import read_sequence
from studio_runs import predict, write_checkpoints, write_walk

FRAMES = 6


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return write_checkpoints(tmp_path_factory.mktemp("home"), "pose")


@pytest.fixture()
def plate(tmp_path) -> Path:
    return write_walk(tmp_path / "src" / "walk", FRAMES)


def test_a_missing_frame_keeps_its_results_until_clean(tmp_path, home, plate, capsys) -> None:
    out = tmp_path / "out"
    assert predict(home, plate, out, tasks="pose") == 0
    bundle = (out / "walk" / "walk_0004.json").read_bytes()
    aside = tmp_path / "aside.png"
    shutil.move(plate / "walk_0004.png", aside)  # moved away for a moment
    capsys.readouterr()
    assert predict(home, plate, out, "--skip-existing", tasks="pose") == 0
    err = capsys.readouterr().err
    assert (out / "walk" / "walk_0004.json").read_bytes() == bundle  # kept (was deleted)
    assert (out / "walk" / "walk_0004.exr").is_file()
    assert "orphaned: walk/walk_0004 (frame 4 is not among the inputs)" in err, err
    assert "kept 5 verified result(s), skipped 0, orphaned 1" in err, err
    assert read_sequence(out / "walk" / "walk.sequence.json").frame_numbers == [1, 2, 3, 5, 6]
    # back again: verified and indexed, nothing computed
    shutil.move(aside, plate / "walk_0004.png")
    capsys.readouterr()
    assert predict(home, plate, out, "--skip-existing", tasks="pose") == 0
    assert "wrote 0 result(s)" in capsys.readouterr().err
    assert read_sequence(out / "walk" / "walk.sequence.json").frame_numbers == list(range(1, 7))
    # only --clean removes the results of a missing input
    (plate / "walk_0004.png").unlink()
    capsys.readouterr()
    assert predict(home, plate, out, "--skip-existing", tasks="pose") == 0
    assert (out / "walk" / "walk_0004.json").is_file()
    assert predict(home, plate, out, "--skip-existing", "--clean", tasks="pose") == 0
    assert not list((out / "walk").glob("walk_0004.*"))
    assert "removed 1 orphaned (--clean)" in capsys.readouterr().err


def test_a_chunk_that_sees_part_of_the_shot_cannot_shrink_it(tmp_path, home, plate, capsys) -> None:
    out = tmp_path / "farm"

    def chunk(source: Path, frames: str, *extra: str) -> int:
        return predict(home, source, out, "--frames", frames, "--run-id", "shot9", *extra, tasks="pose")

    assert chunk(plate, "1-3") == 0
    assert chunk(plate, "4-6") == 0
    # a re-queued chunk on a machine that sees only frames 1-4 (the plate not fully synced)
    partial = write_walk(tmp_path / "node7" / "walk", 4)
    assert chunk(partial, "1-3", "--skip-existing") == 0
    marker = json.loads((out / "walk" / "walk.partial.json").read_text(encoding="utf-8"))
    assert marker["numbers"] == list(range(1, 7))  # the shot's list stays (was rewritten to 1-4)
    # a chunk whose range holds frames it cannot see fails for them, and finalize refuses while they are missing
    for lost in (out / "walk").glob("walk_0006.*"):
        lost.unlink()
    capsys.readouterr()
    assert chunk(partial, "4-6", "--skip-existing") == 1
    assert "2 frame(s) of the shot in this chunk's range are not among the inputs here: 5-6" in (
        capsys.readouterr().err
    )
    assert main(["finalize", str(out)]) == 1
    assert "1 frame(s) missing: 6" in capsys.readouterr().err
    assert chunk(plate, "4-6", "--skip-existing") == 0
    assert main(["finalize", str(out)]) == 0
    assert read_sequence(out / "walk" / "walk.sequence.json").frame_numbers == list(range(1, 7))
    # a re-queued finalize of the finalized shot: exit 0, the same index
    index = (out / "walk" / "walk.sequence.json").read_bytes()
    assert main(["finalize", str(out)]) == 0
    assert (out / "walk" / "walk.sequence.json").read_bytes() == index


def _video(path: Path, frames: int) -> Path:
    av = pytest.importorskip("av")
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=12)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((24, 32, 3), 30 * i, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    (path.parent / "boxes.json").write_text("[[0, 0, 32, 24]]", encoding="utf-8")
    return path


def test_a_shorter_video_keeps_and_reports_the_frames_it_no_longer_has(tmp_path, home, capsys) -> None:
    """Before: the extra frames of the longer take were kept silently (or deleted by --clean without a word)."""
    clip = _video(tmp_path / "src" / "clip.mp4", 5)
    out = tmp_path / "out"
    assert predict(home, clip, out, "--no-previews", tasks="pose") == 0
    _video(clip, 3)  # the take was trimmed
    capsys.readouterr()
    assert predict(home, clip, out, "--no-previews", tasks="pose") == 0
    err = capsys.readouterr().err
    for n in (4, 5):
        assert f"orphaned: clip/clip_{n:04d} (frame {n} is beyond the video's 3 frames)" in err, err
        assert (out / "clip" / f"clip_{n:04d}.json").is_file()
    assert "orphaned 2" in err and read_sequence(out / "clip" / "clip.sequence.json").frame_numbers == [
        1,
        2,
        3,
    ]
    assert predict(home, clip, out, "--no-previews", "--skip-existing", "--clean", tasks="pose") == 0
    err = capsys.readouterr().err
    assert "removed (--clean): clip/clip_0004" in err and "removed 2 orphaned (--clean)" in err, err
    assert not list((out / "clip").glob("clip_0004.*")) and not list((out / "clip").glob("clip_0005.*"))


def test_the_ray_engine_keeps_orphans_and_clean_removes_them(tmp_path, home, capsys) -> None:
    """Before: under --engine ray, --clean only reported orphaned single images and left them on disk."""
    pytest.importorskip("ray")
    import numpy as np
    from PIL import Image

    photos = tmp_path / "photos"
    photos.mkdir()
    for n, name in enumerate(("alder", "birch")):
        rgb = np.random.default_rng(n).integers(0, 256, (32, 24, 3)).astype(np.uint8)
        Image.fromarray(rgb).save(photos / f"{name}.png")
    out = tmp_path / "out"
    args = ["predict", str(photos), "--tasks", "pose", "--out", str(out), "--checkpoint-dir", str(home)]
    args += ["--no-download", "--device", "cpu", "--no-flip-test", "--no-previews", "--engine", "ray"]
    assert main([*args, "--workers", "1"]) == 0
    (photos / "birch.png").unlink()
    capsys.readouterr()
    assert main([*args, "--workers", "1", "--skip-existing"]) == 0
    err = capsys.readouterr().err
    assert "orphaned: birch (its input" in err and (out / "birch.json").is_file(), err
    assert main([*args, "--workers", "1", "--skip-existing", "--clean"]) == 0
    err = capsys.readouterr().err
    assert "removed (--clean): birch" in err and "removed 1 orphaned (--clean)" in err, err
    assert not list(out.glob("birch.*")) and (out / "alder.json").is_file()
