"""EXR wrapper: contiguity, pixel types and clear errors (read back with OpenEXR's own API)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

OpenEXR = pytest.importorskip("OpenEXR")

from sapiens2_studio.core.formats.exr import ExrError, read_exr, write_exr  # noqa: E402


def test_non_contiguous_views_are_written_correctly(tmp_path: Path) -> None:
    xyz = np.arange(5 * 7 * 3, dtype=np.float32).reshape(5, 7, 3)
    channels = {"P.X": xyz[..., 0], "P.Y": xyz[..., 1], "P.Z": xyz[..., 2]}  # strided views
    assert not channels["P.X"].flags["C_CONTIGUOUS"]
    write_exr(tmp_path / "p.exr", channels, {"note": "hello"})
    with OpenEXR.File(str(tmp_path / "p.exr"), separate_channels=True) as exr:
        back = {name: np.array(ch.pixels) for name, ch in exr.channels().items()}
        assert exr.header()["note"] == "hello"
    for i, axis in enumerate("XYZ"):
        np.testing.assert_array_equal(back[f"P.{axis}"], xyz[..., i])


def test_pixel_types_round_trip(tmp_path: Path) -> None:
    data = {
        "half": np.full((3, 4), 0.5, np.float16),
        "full": np.full((3, 4), 1e-7, np.float32),
        "ids": np.arange(12, dtype=np.uint32).reshape(3, 4),
    }
    write_exr(tmp_path / "t.exr", data)
    channels, header = read_exr(tmp_path / "t.exr")
    assert header["compression"] == OpenEXR.ZIP_COMPRESSION
    for name, arr in data.items():
        assert channels[name].dtype == arr.dtype
        np.testing.assert_array_equal(channels[name], arr)


def test_write_errors(tmp_path: Path) -> None:
    with pytest.raises(ExrError, match="no channels"):
        write_exr(tmp_path / "e.exr", {})
    with pytest.raises(ExrError, match=r"must be 2-D"):
        write_exr(tmp_path / "e.exr", {"R": np.zeros((2, 2, 3), np.float32)})
    with pytest.raises(ExrError, match="dtype float64"):
        write_exr(tmp_path / "e.exr", {"R": np.zeros((2, 2))})
    with pytest.raises(ExrError, match=r"has shape \(3, 2\), others have \(2, 2\)"):
        write_exr(tmp_path / "e.exr", {"R": np.zeros((2, 2), np.float32), "G": np.zeros((3, 2), np.float32)})
    assert not (tmp_path / "e.exr").exists()


def test_read_errors(tmp_path: Path) -> None:
    with pytest.raises(ExrError, match="EXR file not found"):
        read_exr(tmp_path / "missing.exr")
    (tmp_path / "junk.exr").write_bytes(b"v/1\x01" + b"\x00" * 64)
    with pytest.raises(ExrError, match=r"junk\.exr: not a readable OpenEXR file"):
        read_exr(tmp_path / "junk.exr")
