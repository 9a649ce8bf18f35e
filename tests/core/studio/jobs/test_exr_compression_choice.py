"""The bundle EXR's compression as a user's choice (`--exr-compression`, JobSpec.exr_compression, ComfyUI's Save
Capture Bundle input, `save_capture_bundle(compression=)`): zip (default), zips and none hold the same pixels bit
for bit, the choice is recorded in `run.outputs`, `--skip-existing` rewrites frames written with another one
without recomputing them, and the preflight size estimate is an upper bound of an uncompressed frame.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("OpenEXR")
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.bundle import BundleError, CaptureFrame, read_bundle, write_bundle
from sapiens2_studio.core.formats.compressions import EXR_COMPRESSIONS
from sapiens2_studio.core.formats.exr import read_exr
from sapiens2_studio.core.formats.sequence import SequenceWriter, read_sequence
from sapiens2_studio.core.studio.errors import StudioError
from sapiens2_studio.core.studio.jobs.estimate import estimate_frame_bytes, exr_bytes_per_pixel
from sapiens2_studio.core.studio.jobs.job import JobSpec
from sapiens2_studio.core.studio.store.exports import save_capture_bundle
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

TASKS = "seg,pose,pointmap"  # FLOAT (points, ids) and HALF (image, mask) channels; pose for the people
HEADER_NAMES = {"zip": "ZIP_COMPRESSION", "zips": "ZIPS_COMPRESSION", "none": "NO_COMPRESSION"}


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    for seed, task in enumerate(TASKS.split(",")):
        write_synthetic_checkpoint(home / task / f"sapiens2_0.4b_{task}.safetensors", task=task, seed=seed)
    return home


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    """A photo and a two-frame sequence, with one person box each (keeps pose fast)."""
    src = tmp_path_factory.mktemp("src")
    rng = np.random.default_rng(5)
    Image.fromarray(rng.integers(0, 256, (40, 28, 3), dtype=np.uint8)).save(src / "photo.png")
    (src / "walk").mkdir()
    for n in (1, 2):
        Image.fromarray(rng.integers(0, 256, (40, 28, 3), dtype=np.uint8)).save(
            src / "walk" / f"walk_{n:04d}.png"
        )
    (src / "boxes.json").write_text("[[1, 1, 27, 39]]", encoding="utf-8")
    return [str(src / "photo.png"), str(src / "walk")]


def predict(home: Path, inputs: list[str], out: Path, *extra: str) -> int:
    argv = ["predict", *inputs, "--tasks", TASKS, "--out", str(out), "--checkpoint-dir", str(home)]
    argv += [
        "--no-download",
        "--device",
        "cpu",
        "--no-flip-test",
        "--boxes",
        str(Path(inputs[0]).parent / "boxes.json"),
    ]
    return main([*argv, "--no-previews", *extra])


def exr_files(out: Path) -> list[Path]:
    return sorted(out.rglob("*.exr"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, home, inputs) -> dict[str, Path]:
    """One output folder per compression, the default first (no flag at all)."""
    outs = {}
    for compression in EXR_COMPRESSIONS:
        out = tmp_path_factory.mktemp(compression)
        flag = [] if compression == "zip" else ["--exr-compression", compression]
        assert predict(home, inputs, out, *flag) == 0
        outs[compression] = out
    return outs


def test_every_compression_holds_the_same_pixels(runs) -> None:
    reference = {p.relative_to(runs["zip"]): read_exr(p)[0] for p in exr_files(runs["zip"])}
    assert len(reference) == 3  # the photo and both frames of the sequence
    sizes = {}
    for compression, out in runs.items():
        files = exr_files(out)
        assert [p.relative_to(out) for p in files] == sorted(reference)
        sizes[compression] = sum(p.stat().st_size for p in files)
        for path in files:
            channels, header = read_exr(path)
            assert header["compression"].name == HEADER_NAMES[compression], path
            expected = reference[path.relative_to(out)]
            assert sorted(channels) == sorted(expected)
            for name, values in channels.items():  # bit for bit, dtype included
                assert (
                    values.dtype == expected[name].dtype and values.tobytes() == expected[name].tobytes()
                ), name
            doc = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
            assert doc["run"]["outputs"]["exr_compression"] == compression
            assert doc["run"]["files"][path.name] == path.stat().st_size
        assert len(read_sequence(out / "walk" / "walk.sequence.json")) == 2
    assert sizes["zip"] < sizes["none"] and sizes["zips"] < sizes["none"]


def test_skip_existing_rewrites_only_frames_of_another_compression(
    tmp_path, home, inputs, runs, capsys
) -> None:
    out = tmp_path / "out"
    assert predict(home, inputs, out) == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.json")}
    assert (
        predict(home, inputs, out, "--skip-existing") == 0
    )  # same choice: every frame verified, none touched
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.json")} == before
    capsys.readouterr()
    assert predict(home, inputs, out, "--skip-existing", "--exr-compression", "none") == 0
    for path in exr_files(out):
        channels, header = read_exr(path)
        assert header["compression"].name == "NO_COMPRESSION", path
        expected, _ = read_exr(runs["none"] / path.relative_to(out))
        assert all(channels[n].tobytes() == expected[n].tobytes() for n in expected), path
        doc = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        assert doc["run"]["computed"] == []  # carried over, not recomputed
        assert doc["run"]["outputs"]["exr_compression"] == "none"


def test_python_writers_take_the_compression_and_refuse_unknown_ones(tmp_path) -> None:
    rng = np.random.default_rng(1)
    frame = CaptureFrame(
        width=6,
        height=5,
        image=rng.integers(0, 256, (5, 6, 3), dtype=np.uint8),
        points=np.concatenate([rng.normal(0, 1, (5, 6, 2)), rng.uniform(1, 3, (5, 6, 1))], axis=2).astype(
            np.float32
        ),
    )
    single = save_capture_bundle(tmp_path / "one", "shot", [frame], compression="zips")
    assert read_exr(single.with_suffix(".exr"))[1]["compression"].name == "ZIPS_COMPRESSION"
    index = save_capture_bundle(tmp_path / "seq", "shot", [frame, frame], compression="none")
    for loaded in read_sequence(index):
        np.testing.assert_array_equal(loaded.points, read_bundle(single).points)
    for path in (tmp_path / "seq").glob("*.exr"):
        assert read_exr(path)[1]["compression"].name == "NO_COMPRESSION"
    for bad in ("piz", "dwaa", "../zip"):  # lossy or binding-only codecs are not a bundle's
        with pytest.raises(BundleError, match="zip, zips, none"):
            write_bundle(tmp_path, "bad", frame, compression=bad)
        with pytest.raises(BundleError, match="zip, zips, none"):
            SequenceWriter(tmp_path, "bad", compression=bad)
        with pytest.raises(StudioError, match="zip, zips, none"):
            JobSpec(inputs=[], out=tmp_path, exr_compression=bad).validate()
    assert not list(tmp_path.glob("bad*"))


def test_cli_refuses_an_unknown_compression_before_any_work(tmp_path, home, inputs, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        predict(home, inputs, tmp_path / "out", "--exr-compression", "piz")
    assert exit_info.value.code == 2
    assert "--exr-compression" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_size_estimate_bounds_an_uncompressed_frame_of_every_layer(tmp_path) -> None:
    height, width = 37, 29
    rng = np.random.default_rng(2)
    alpha = rng.uniform(0, 1, (height, width)).astype(np.float32)
    frame = CaptureFrame(
        width=width,
        height=height,
        image=rng.integers(0, 256, (height, width, 3), dtype=np.uint8),
        points=rng.uniform(1, 3, (height, width, 3)).astype(np.float32),
        normals=np.tile(np.float32([0, 0, -1]), (height, width, 1)),
        albedo=rng.uniform(0, 1, (height, width, 3)).astype(np.float32),
        seg=rng.integers(0, 29, (height, width)).astype(np.int64),
        mask=(alpha > 0.5).astype(np.float32),
        alpha=alpha,
        foreground=rng.uniform(0, 1, (height, width, 3)).astype(np.float32),
    )
    json_path = write_bundle(tmp_path, "all", frame, compression="none")
    written = json_path.stat().st_size + json_path.with_suffix(".exr").stat().st_size
    tasks = ("seg", "normal", "albedo", "pointmap", "matting")
    estimate = estimate_frame_bytes(width, height, tasks, previews=False, compression="none")
    assert written <= estimate
    # and a tight one: the EXR part of the estimate counts the mask once, for seg and matting alike
    exr_part = width * height * exr_bytes_per_pixel(tasks, "none")
    assert width * height * 52 == exr_part < json_path.with_suffix(".exr").stat().st_size < 1.1 * exr_part
