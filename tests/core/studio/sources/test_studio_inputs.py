"""CLI input discovery and image loading: grouping numbered frames, image modes, and clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sapiens2_studio.core.studio.errors import InputError
from sapiens2_studio.core.studio.sources.inputs import ImageJob, SequenceJob, collect_inputs, load_image


def _save(path: Path, size=(20, 12), mode="RGB") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(len(path.name))
    if mode == "I;16":
        Image.fromarray(rng.integers(0, 65536, size[::-1], dtype=np.uint16)).save(path)
    else:
        Image.fromarray(rng.integers(0, 256, (*size[::-1], 3), dtype=np.uint8)).convert(mode).save(path)
    return path


def test_numbered_files_become_one_sequence(tmp_path: Path) -> None:
    for n in (10, 2, 1):
        _save(tmp_path / "shots" / f"walk_{n:03d}.png")
    _save(tmp_path / "shots" / "portrait.jpg")
    _save(tmp_path / "shots" / "take5.png")  # a lone numbered file stays an image
    jobs = collect_inputs([str(tmp_path / "shots")])
    seqs = [j for j in jobs if isinstance(j, SequenceJob)]
    singles = sorted(j.name for j in jobs if isinstance(j, ImageJob))
    assert singles == ["portrait", "take5"]
    assert len(seqs) == 1 and seqs[0].name == "walk"
    assert [p.name for p in seqs[0].frames] == [
        "walk_001.png",
        "walk_002.png",
        "walk_010.png",
    ]  # numeric order


def test_bare_numbers_use_folder_name_and_names_are_unique(tmp_path: Path) -> None:
    for n in (1, 2):
        _save(tmp_path / "clip" / f"{n:04d}.png")
    _save(tmp_path / "a" / "photo.png")
    _save(tmp_path / "b" / "photo.png")
    jobs = collect_inputs(
        [str(tmp_path / "clip"), str(tmp_path / "a" / "photo.png"), str(tmp_path / "b" / "photo.png")]
    )
    # a clash is resolved by each input's own path (its folder's name), never by arrival order (was photo_2)
    names = sorted(j.name for j in jobs)
    assert names == ["a_photo_png", "b_photo_png", "clip"]
    _save(tmp_path / "Фото.png")
    _save(tmp_path / "моё фото.png")
    jobs = collect_inputs([str(tmp_path / "Фото.png"), str(tmp_path / "моё фото.png")])
    assert [j.name for j in jobs] == ["Фото", "моё фото"]  # Unicode kept (was image, image_2)


def test_image_modes_load_as_rgb(tmp_path: Path) -> None:
    for mode in ("RGB", "RGBA", "L", "P", "CMYK"):
        suffix = ".jpg" if mode == "CMYK" else ".png"
        img = load_image(_save(tmp_path / f"{mode}{suffix}", mode=mode))
        assert img.shape == (12, 20, 3) and img.dtype == np.uint8, mode
    sixteen = load_image(_save(tmp_path / "deep.png", mode="I;16"))
    assert sixteen.shape == (12, 20, 3) and sixteen.dtype == np.uint16
    raw = np.asarray(Image.open(tmp_path / "deep.png"))
    np.testing.assert_array_equal(sixteen[..., 1], raw)  # all 16 bits kept


def test_errors_are_clear(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no images found in this folder"):
        collect_inputs([str(tmp_path / "empty")])
    with pytest.raises(InputError, match="no such file or folder"):
        collect_inputs([str(tmp_path / "nope.png")])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match=r"unsupported file type '\.txt'"):
        collect_inputs([str(tmp_path / "notes.txt")])
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    with pytest.raises(InputError, match=r"broken\.png: cannot read image"):
        load_image(bad)


@pytest.mark.parametrize("suffix", [".png", ".jpg"])
def test_exif_orientation_is_applied_exactly_as_pillow_does(tmp_path: Path, suffix: str) -> None:
    """Every EXIF orientation (1 = upright, 2-8 = flips and turns, 9 = invalid) loads as
    `ImageOps.exif_transpose` shows it; upright images skip the transpose's copy, not its result."""
    from PIL import ImageOps

    pixels = np.random.default_rng(5).integers(0, 256, (6, 10, 3), dtype=np.uint8)
    for orientation in range(1, 10):
        path = tmp_path / f"o{orientation}{suffix}"
        exif = Image.Exif()
        exif[0x0112] = orientation
        Image.fromarray(pixels).save(
            path, exif=exif.tobytes(), **({"quality": 95} if suffix == ".jpg" else {})
        )
        with Image.open(path) as img:
            expected = np.asarray(ImageOps.exif_transpose(img).convert("RGB"))
        got = load_image(path)
        assert got.dtype == np.uint8 and got.flags.c_contiguous
        assert np.array_equal(got, expected), orientation
        if orientation in (6, 8):
            assert got.shape == (10, 6, 3)
