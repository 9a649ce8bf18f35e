"""`sapiens2 predict --tasks …,matting` end to end on tiny checkpoints in the official layout (real files).

Matting exists only at 1B: without `--size` the CLI takes each task's own default size (seg 0.4b, matting 1b);
a forced size that matting was never released at fails before anything loads, saying what to do. The constant
matting checkpoint makes every written number known: alpha = sigmoid(0.5) everywhere, straight colour
sigmoid(-1, 0, 1) / alpha, clipped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("OpenEXR")
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.bundle import read_bundle
from sapiens2_studio.core.testing.synthetic import (
    write_constant_output_checkpoint,
    write_synthetic_checkpoint,
)

LOGITS = (-1.0, 0.0, 1.0, 0.5)
ALPHA = 1.0 / (1.0 + math.exp(-0.5))
STRAIGHT = [min(1.0, 1.0 / (1.0 + math.exp(-v)) / ALPHA) for v in LOGITS[:3]]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("home")
    write_synthetic_checkpoint(root / "seg" / "sapiens2_0.4b_seg.safetensors", task="seg")
    write_constant_output_checkpoint(root / "matting" / "sapiens2_1b_matting.safetensors", "matting", LOGITS)
    return root


def _run(capsys, home: Path, out: Path, image: Path, *extra: str) -> tuple[int, str]:
    argv = ["predict", str(image), "--out", str(out), "--checkpoint-dir", str(home), "--no-download"]
    rc = main([*argv, "--device", "cpu", *extra])
    return rc, capsys.readouterr().err


@pytest.fixture
def photo(tmp_path) -> Path:
    path = tmp_path / "person.png"
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (48, 36, 3), dtype=np.uint8)).save(path)
    return path


def test_seg_and_matting_write_alpha_and_cutout_previews_and_the_matte_layer(capsys, home, photo, tmp_path):
    out = tmp_path / "out"
    rc, err = _run(capsys, home, out, photo, "--tasks", "seg,matting")
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == [
        "person.alpha.png",
        "person.exr",
        "person.foreground.png",
        "person.json",
        "person.seg.png",
    ]
    with Image.open(out / "person.alpha.png") as alpha_png:
        assert alpha_png.mode == "L" and alpha_png.size == (36, 48)
        assert set(np.unique(np.asarray(alpha_png)).tolist()) == {round(ALPHA * 255)}  # 159
    with Image.open(out / "person.foreground.png") as cutout:
        assert cutout.mode == "RGBA"
        pixel = np.asarray(cutout)[7, 5].tolist()
        assert pixel == [round(v * 255) for v in (*STRAIGHT, ALPHA)]  # [110, 205, 255, 159], straight
    doc = json.loads((out / "person.json").read_text())
    assert doc["layers"] == ["rgba", "segmentation", "person_mask", "alpha", "matte"]
    assert [(m["task"], m["checkpoint"]) for m in doc["models"]] == [
        ("seg", "sapiens2_0.4b_seg.safetensors"),
        ("matting", "sapiens2_1b_matting.safetensors"),
    ]
    frame = read_bundle(out / "person.json")
    assert np.abs(frame.alpha - ALPHA).max() < 2.5e-4
    assert np.abs(frame.foreground - np.array(STRAIGHT, np.float32)).max() < 1e-3
    assert frame.mask is not None and np.array_equal(
        frame.mask > 0.5, frame.seg > 0
    )  # the seg's, not alpha's


def test_matting_alone_masks_by_alpha_and_is_carried_over_by_a_rerun_of_another_task(
    capsys, home, photo, tmp_path
):
    out = tmp_path / "out"
    rc, err = _run(capsys, home, out, photo, "--tasks", "matting", "--no-previews")
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["person.exr", "person.json"]
    frame = read_bundle(out / "person.json")
    assert frame.mask.min() == 1.0  # alpha 0.62 >= 0.5 everywhere: all person
    # A re-run of another task keeps the matte (carried over from the verified bundle, previews redrawn) ...
    rc, err = _run(capsys, home, out, photo, "--tasks", "seg")
    carried = read_bundle(out / "person.json")
    assert rc == 0, err
    assert np.array_equal(carried.alpha, frame.alpha) and np.array_equal(carried.foreground, frame.foreground)
    assert [m["task"] for m in carried.models] == ["seg", "matting"]
    assert (out / "person.alpha.png").is_file() and (out / "person.foreground.png").is_file()
    # ... and --clean leaves only this run's tasks: no matte layer, no stale matte previews.
    rc, err = _run(capsys, home, out, photo, "--tasks", "seg", "--clean")
    assert rc == 0, err
    assert read_bundle(out / "person.json").alpha is None
    assert not (out / "person.alpha.png").exists() and not (out / "person.foreground.png").exists()


def test_a_forced_size_matting_was_never_released_at_fails_first(capsys, home, photo, tmp_path):
    rc, err = _run(capsys, home, tmp_path / "out", photo, "--tasks", "seg,matting", "--size", "0.4b")
    assert rc == 4  # EXIT_CHECKPOINT: no such official file
    assert "there is no official matting checkpoint of size 0.4b; matting is released in sizes 1b" in err
    assert "leave out --size (each task then uses its own default: matting 1b)" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_help_lists_matting_and_the_size_rule(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "pose,seg,normal,albedo,pointmap,matting" in text
    assert "default: each task's own: 0.4b, matting 1b" in text
