"""Our scanline EXR writer (core/formats/exr_scanline.py) against real readers: the `openexr` binding and
OpenImageIO (what Blender and oiiotool use) must decode exactly the values written, whatever the band sizes."""

from __future__ import annotations

import errno
import struct
import zlib

import numpy as np
import OpenImageIO as oiio
import pytest
from sapiens2_studio.core.formats import exr_scanline
from sapiens2_studio.core.formats.errors import ExrError
from sapiens2_studio.core.formats.exr import read_exr, write_exr
from sapiens2_studio.core.formats.exr_scanline import ScanlineExrWriter


def _channels(height: int, width: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    smooth = np.add.outer(np.linspace(0, 1, height), np.linspace(0, 2, width)).astype(np.float32)
    special = smooth.copy()
    for i, value in enumerate([np.nan, np.inf, -np.inf, -0.0, 3.0e38]):
        special.flat[(i * 7919) % special.size] = value
    return {
        "R": smooth.astype(np.float16),
        "P.X": rng.normal(size=(height, width)).astype(np.float32),  # incompressible: chunks stored raw
        "Z": special,
        "seg.id": rng.integers(0, 29, (height, width)).astype(np.float32),
        "id": rng.integers(0, 2**32 - 1, (height, width), dtype=np.uint64).astype(np.uint32),
        "mask.A": (smooth > 1).astype(np.float16),
    }


def _oiio_pixels(path) -> dict[str, np.ndarray]:
    image = oiio.ImageInput.open(str(path))
    try:
        spec = image.spec()
        pixels = image.read_image(format="float")
    finally:
        image.close()
    return {name: pixels[..., i] for i, name in enumerate(spec.channelnames)}


def _write(path, channels, bands, compression="zip", attributes=None):
    height, width = next(iter(channels.values())).shape
    layout = [(name, arr.dtype) for name, arr in channels.items()]
    with ScanlineExrWriter(path, layout, height, width, attributes, compression=compression) as writer:
        start = 0
        for rows in bands:
            writer.write({name: arr[start : start + rows] for name, arr in channels.items()})
            start += rows
    assert start == height


@pytest.mark.parametrize("compression", ["zip", "zips", "none"])
@pytest.mark.parametrize(
    ("height", "width", "bands"),
    [(1, 1, [1]), (16, 5, [16]), (37, 3, [1, 16, 20]), (40, 7, [3] * 13 + [1]), (130, 33, [130])],
)
def test_readers_decode_exactly_what_was_written(tmp_path, compression, height, width, bands):
    channels = _channels(height, width)
    path = tmp_path / "a.exr"
    _write(path, channels, bands, compression, {"sapiens2Capture": "1.1", "frame": 7, "scale": 0.5})
    back, header = read_exr(path)
    expected = "NO_COMPRESSION" if compression == "none" else f"{compression.upper()}_COMPRESSION"
    assert header["compression"].name == expected
    assert header["sapiens2Capture"] == "1.1" and header["frame"] == 7 and header["scale"] == 0.5
    assert set(back) == set(channels)
    for name, arr in channels.items():
        assert back[name].dtype == arr.dtype, name
        assert back[name].tobytes() == arr.tobytes(), name  # bit-exact, NaN payloads and -0 included
    seen = _oiio_pixels(path)
    for name, arr in channels.items():
        if arr.dtype != np.uint32:
            np.testing.assert_array_equal(seen[name], arr.astype(np.float32), err_msg=name)


def test_same_pixels_as_the_openexr_binding_and_smaller_than_none(tmp_path):
    """write_exr's zip path is ours now; the binding (via piz, which stays the binding's) decodes to the same
    values, and the zip file compresses."""
    channels = _channels(64, 48, seed=3)
    write_exr(tmp_path / "ours.exr", channels, {"sapiens2Capture": "1.1"}, compression="zip")
    write_exr(tmp_path / "binding.exr", channels, {"sapiens2Capture": "1.1"}, compression="piz")
    write_exr(tmp_path / "raw.exr", channels, compression="none")
    ours, _ = read_exr(tmp_path / "ours.exr")
    binding, _ = read_exr(tmp_path / "binding.exr")
    for name in channels:
        assert ours[name].tobytes() == binding[name].tobytes(), name
    assert (tmp_path / "ours.exr").stat().st_size < (tmp_path / "raw.exr").stat().st_size


def test_zlib_fallback_writes_the_same_pixels(tmp_path, monkeypatch):
    channels = _channels(50, 20, seed=5)
    _write(tmp_path / "isal.exr", channels, [50])
    monkeypatch.setattr(exr_scanline, "_DEFLATE", lambda data: zlib.compress(data, 1))
    _write(tmp_path / "zlib.exr", channels, [50])
    a, _ = read_exr(tmp_path / "isal.exr")
    b, _ = read_exr(tmp_path / "zlib.exr")
    assert all(a[n].tobytes() == b[n].tobytes() == channels[n].tobytes() for n in channels)


def test_casts_on_the_way_in_like_astype(tmp_path):
    """A band may hand float32 for a HALF channel (and strided views): stored as `astype` would round them."""
    source = np.random.default_rng(1).normal(size=(20, 9, 3)).astype(np.float32) * 100
    path = tmp_path / "c.exr"
    with ScanlineExrWriter(path, [("N.X", np.float16), ("N.Y", np.float16)], 20, 9) as writer:
        writer.write({"N.X": source[:11, :, 0], "N.Y": source[:11, :, 1]})
        writer.write({"N.X": source[11:, :, 0], "N.Y": source[11:, :, 1]})
    back, _ = read_exr(path)
    assert back["N.X"].tobytes() == source[..., 0].astype(np.float16).tobytes()
    assert back["N.Y"].tobytes() == source[..., 1].astype(np.float16).tobytes()


def test_long_names_set_the_flag_and_read_back(tmp_path):
    name = "layer_with_a_rather_long_name_for_exr.value"
    channels = {name: np.ones((4, 4), np.float16)}
    _write(tmp_path / "l.exr", channels, [4])
    version = struct.unpack("<i", (tmp_path / "l.exr").read_bytes()[4:8])[0]
    assert version & 0x400 and version & 0xFF == 2
    back, _ = read_exr(tmp_path / "l.exr")
    assert back[name].tobytes() == channels[name].tobytes()


def test_bad_bands_and_incomplete_images_are_errors(tmp_path):
    layout = [("R", np.float16), ("G", np.float16)]
    with (
        pytest.raises(ExrError, match="missing channel 'R'"),
        ScanlineExrWriter(tmp_path / "m.exr", layout, 4, 4) as w,
    ):
        w.write({"G": np.zeros((4, 4))})
    with (
        pytest.raises(ExrError, match="not in the layout"),
        ScanlineExrWriter(tmp_path / "x.exr", layout, 4, 4) as w,
    ):
        w.write({"R": np.zeros((4, 4)), "G": np.zeros((4, 4)), "B": np.zeros((4, 4))})
    with pytest.raises(ExrError, match="shape"), ScanlineExrWriter(tmp_path / "s.exr", layout, 4, 4) as w:
        w.write({"R": np.zeros((2, 4)), "G": np.zeros((3, 4))})
    with (
        pytest.raises(ExrError, match="rows written"),
        ScanlineExrWriter(tmp_path / "o.exr", layout, 4, 4) as w,
    ):
        w.write({"R": np.zeros((5, 4)), "G": np.zeros((5, 4))})
    writer = ScanlineExrWriter(tmp_path / "i.exr", layout, 4, 4)
    writer.write({"R": np.zeros((2, 4)), "G": np.zeros((2, 4))})
    with pytest.raises(ExrError, match="only 2 of 4 rows"):
        writer.close()
    with pytest.raises(ExrError, match="float16, float32 or uint32"):
        ScanlineExrWriter(tmp_path / "d.exr", [("R", np.float64)], 4, 4)
    with pytest.raises(ExrError, match="only str, int and float"):
        ScanlineExrWriter(tmp_path / "a.exr", layout, 4, 4, {"when": [1, 2]})
    with pytest.raises(ExrError, match="does not fit an EXR int"):
        ScanlineExrWriter(tmp_path / "a.exr", layout, 4, 4, {"frame": 2**40})
    with pytest.raises(ExrError, match="written by the writer itself"):
        ScanlineExrWriter(tmp_path / "a.exr", layout, 4, 4, {"compression": "none"})
    with pytest.raises(ExrError, match="duplicate"):
        ScanlineExrWriter(tmp_path / "a.exr", [("R", np.float16), ("R", np.float32)], 4, 4)


def test_os_errors_keep_their_errno_for_the_output_messages(tmp_path):
    """transaction.output_error reads the errno of the cause (full disk, read-only, permissions)."""
    with pytest.raises(ExrError) as caught:
        ScanlineExrWriter(tmp_path / "missing" / "a.exr", [("R", np.float16)], 2, 2)
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == errno.ENOENT
