"""The bundle writer's vectorised paths give exactly the bits of the plain numpy definitions they replace.

Why: they exist only for speed (docs/performance.md), and the bundle's bytes must not depend on which path ran —
whether the caller handed in torch's float16 cast, how a chunk's bytes were reordered, how points were masked."""

from __future__ import annotations

import numpy as np
import pytest
from sapiens2_studio.core.formats import bundle, casting, exr_scanline
from sapiens2_studio.core.formats.arrays import zero_where_invalid
from sapiens2_studio.core.formats.exr import read_exr, write_exr_bands
from sapiens2_studio.core.studio.runtime.half_cast import torch_half

HALF = np.dtype(np.float16)


def _float32_patterns(count: int, seed: int = 0) -> np.ndarray:
    """Random float32 bit patterns (every exponent, subnormals, NaNs) plus the float16 rounding boundaries."""
    rng = np.random.default_rng(seed)
    random_bits = rng.integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32).view(np.float32)
    half_bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    finite = half_bits[np.isfinite(half_bits)]
    ties = (finite[:-1] + (finite[1:] - finite[:-1]) / 2).astype(np.float32)  # exact midpoints: ties to even
    near = np.concatenate([np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    edges = np.array([65504, 65519.996, 65520, -65520, 1e30, 2.0**-24, 2.0**-25, 2.0**-26, 1e-45, 0.0, -0.0,
                      np.inf, -np.inf], np.float32)  # fmt: skip
    return np.concatenate([random_bits, finite, ties, near, edges]).astype(np.float32)


def test_half_casts_match_numpy_bit_for_bit_except_nan_payloads() -> None:
    flat = _float32_patterns(4_000_000)
    values = np.resize(flat, (-(-flat.size // 1000), 1000))  # 2-D, as the writer's bands; every pattern kept
    with np.errstate(over="ignore"):
        expected = values.astype(np.float16)
    nan = np.isnan(values)
    channel_view = np.stack([values, values], axis=-1)[..., 1]  # strided, as the writer's channel views are
    for source in (values, channel_view):
        got = casting.as_pixel_type(source, HALF, torch_half)
        assert got.dtype == np.float16 and got.flags.c_contiguous
        assert np.isnan(got[nan]).all()
        assert np.array_equal(got[~nan].view(np.uint16), expected[~nan].view(np.uint16))


def test_half_casts_of_flags_strided_wide_and_read_only_arrays() -> None:
    rng = np.random.default_rng(1)
    flags = rng.random((5, 70_001)) > 0.5  # wider than one torch piece: split by columns too
    assert np.array_equal(casting.as_pixel_type(flags, HALF, torch_half), flags.astype(np.float16))
    points = rng.normal(size=(300, 129, 3)).astype(np.float32)
    strided = points[..., 1]  # a channel view, as the writer gets them
    assert np.array_equal(casting.as_pixel_type(strided, HALF, torch_half), strided.astype(np.float16))
    frozen = points[..., 2].copy()
    frozen.flags.writeable = False
    assert np.array_equal(casting.as_pixel_type(frozen, HALF, torch_half), frozen.astype(np.float16))
    backwards = points[::-1, :, 0]  # torch cannot view negative strides: left to numpy's cast
    assert casting.as_pixel_type(backwards, HALF, torch_half) is backwards
    doubles = points[..., 0].astype(np.float64)  # not a torch fast path (double rounding would differ)
    assert casting.as_pixel_type(doubles, HALF, torch_half) is doubles


def test_with_or_without_the_torch_cast_the_writer_makes_the_same_file(tmp_path) -> None:
    """A writer not handed a converter (Blender, bundle tools) casts with numpy, even in a process that has
    torch loaded (the choice is the caller's, not the import state's); the file is byte-identical."""
    rng = np.random.default_rng(2)
    height, width = 70, 2100  # several torch pieces per band, a partial last chunk
    normals = rng.normal(size=(height, width, 3)).astype(np.float32)
    flags = rng.random((height, width)) > 0.3
    layout = [("N.X", np.float16), ("N.Y", np.float16), ("P.A", np.float16), ("Z", np.float32)]

    def bands():
        for y in range(0, height, 64):
            rows = slice(y, y + 64)
            yield {"N.X": normals[rows, :, 0], "N.Y": normals[rows, :, 1], "P.A": flags[rows],
                   "Z": normals[rows, :, 2]}  # fmt: skip

    write_exr_bands(tmp_path / "torch.exr", layout, height, width, bands(), half=torch_half)
    assert casting.as_pixel_type(normals[..., 0], HALF).dtype == np.float32  # left to numpy's copyto
    write_exr_bands(tmp_path / "numpy.exr", layout, height, width, bands())
    assert (tmp_path / "torch.exr").read_bytes() == (tmp_path / "numpy.exr").read_bytes()
    channels, _ = read_exr(tmp_path / "torch.exr")
    assert np.array_equal(channels["N.Y"], normals[..., 1].astype(np.float16))
    assert np.array_equal(channels["P.A"], flags.astype(np.float16))


def test_torch_half_refuses_what_it_cannot_view() -> None:
    with pytest.raises(ValueError, match="2-D float32 or bool"):
        torch_half(np.zeros((4, 4), np.float64))


def _predicted_by_definition(raw: np.ndarray) -> np.ndarray:
    """OpenEXR's ZIP pre-processing as specified: even-offset bytes, then odd ones; then byte deltas + 128."""
    reordered = np.concatenate([raw[0::2], raw[1::2]]).astype(np.int16)
    out = reordered.copy()
    out[1:] = (reordered[1:] - reordered[:-1] + 128) % 256
    return out.astype(np.uint8)


@pytest.mark.parametrize("size", [2, 4, 38, 1000, 16 * 1920 * 38])
def test_zip_predictor_matches_its_definition(size: int) -> None:
    raw = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    scratch, out = np.empty(size + 6, np.uint8), np.empty(size + 6, np.uint8)  # a full chunk's buffers
    assert np.array_equal(exr_scanline._predicted(raw, scratch, out), _predicted_by_definition(raw))


def test_zero_where_invalid_is_numpy_where_bit_for_bit() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(size=(40, 50, 3)).astype(np.float32)
    values.reshape(-1)[:12] = [np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 3e38, -3e38, 1, -1]
    valid = rng.random((40, 50)) > 0.4
    expected = np.where(valid[..., None], values, np.float32(0.0))
    got = zero_where_invalid(values, valid)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    strided = values[:, ::2]  # any strides in, a new array out
    assert np.array_equal(
        zero_where_invalid(strided, valid[:, ::2]).view(np.uint32),
        np.where(valid[:, ::2, None], strided, np.float32(0.0)).view(np.uint32),
    )
    in_place = values.copy()
    assert zero_where_invalid(in_place, valid, out=in_place) is in_place
    assert np.array_equal(in_place.view(np.uint32), expected.view(np.uint32))


def test_point_channels_and_colour_tables_match_the_plain_definitions() -> None:
    rng = np.random.default_rng(4)
    points = rng.normal(size=(33, 21, 3)).astype(np.float32)
    points[0, :4] = [[np.nan, 1, 1], [1, np.inf, 1], [1, 1, -0.0], [1, 1, 0.0]]
    channels = bundle.point_channels(points)
    valid = np.isfinite(points).all(-1) & (points[..., 2] > 0)
    assert np.array_equal(channels["P.A"], valid.astype(np.float16))
    for i, axis in enumerate("XYZ"):
        expected = np.where(valid, points[..., i], np.float32(0.0))
        assert np.array_equal(channels[f"P.{axis}"].view(np.uint32), expected.view(np.uint32))
    image = rng.integers(0, 256, (9, 11, 4), dtype=np.uint8)
    for dtype in (np.float16, np.float32):
        colour = bundle._colour_band("image", image, slice(2, 7), "", dtype)
        linear = bundle._srgb_u8_table(np.dtype(dtype))[image[2:7, :, :3]]
        for i, ch in enumerate("RGB"):
            assert colour[ch].dtype == dtype and np.array_equal(colour[ch], linear[..., i])
