"""Our PNG writer (core/formats/png.py) against the PNG specification and a real reader: every filter it uses,
every colour type, edge sizes; decoded by Pillow and by an independent decoder written here from the
specification (all five filter types, so a file from any encoder decodes)."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image
from sapiens2_studio.core.formats.errors import FormatError
from sapiens2_studio.core.formats.png import FILTERS, encode_png, write_png
from sapiens2_studio.core.studio.views.previews import save_png

_CHANNELS = {0: 1, 2: 3, 6: 4}


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def _decode_by_the_specification(data: bytes) -> np.ndarray:
    """Chunks with checked CRCs, IHDR, the IDAT stream inflated, each scanline unfiltered byte by byte."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, []
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, colour, *_ = struct.unpack(">IIBBBBB", chunks[0][1])
    assert depth == 8
    bpp = _CHANNELS[colour]
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = width * bpp
    assert len(raw) == height * (stride + 1)
    out = np.zeros((height, stride), np.int64)
    for y in range(height):
        line = raw[y * (stride + 1) : (y + 1) * (stride + 1)]
        kind, filtered = line[0], line[1:]
        for x in range(stride):
            a = int(out[y, x - bpp]) if x >= bpp else 0
            b = int(out[y - 1, x]) if y > 0 else 0
            c = int(out[y - 1, x - bpp]) if x >= bpp and y > 0 else 0
            predictor = [0, a, b, (a + b) // 2, _paeth(a, b, c)][kind]
            out[y, x] = (filtered[x] + predictor) % 256
    return out.astype(np.uint8).reshape(height, width, bpp)


def _pillow(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        img.load()
        arr = np.asarray(img)
    return arr[..., None] if arr.ndim == 2 else arr


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize(("height", "width"), [(1, 1), (1, 7), (6, 1), (13, 17)])
@pytest.mark.parametrize("filter_type", sorted(FILTERS))
def test_every_filter_decodes_exactly(channels: int, height: int, width: int, filter_type: int) -> None:
    rng = np.random.default_rng(height * 100 + width * 10 + channels)
    pixels = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
    pixels[0, 0] = 255  # predictors reaching past 255 and below 0 wrap
    data = encode_png(pixels, filter_type=filter_type)
    assert np.array_equal(_decode_by_the_specification(data), pixels)
    assert np.array_equal(_pillow(data), pixels)


def test_the_chosen_filter_decodes_and_compresses() -> None:
    """A preview-sized image with smooth, flat and noisy parts: Pillow reads back every pixel, the file is smaller
    than the raw pixels, and a flat image is tiny."""
    rng = np.random.default_rng(7)
    height, width = 1080, 1920
    ramp = np.add.outer(np.arange(height) // 5, np.arange(width) // 8).astype(np.uint8)
    pixels = np.stack([ramp, ramp[::-1], np.full_like(ramp, 90)], axis=-1)
    pixels[200:400, 300:900] = rng.integers(0, 256, (200, 600, 3), dtype=np.uint8)
    data = encode_png(pixels)
    assert np.array_equal(_pillow(data), pixels)
    assert len(data) < pixels.size // 2
    assert len(encode_png(np.zeros((1080, 1920, 3), np.uint8))) < 20_000
    strided = pixels[::2, ::3]  # any strides in
    assert np.array_equal(_pillow(encode_png(strided)), strided)


def test_save_png_writes_what_the_preview_holds(tmp_path) -> None:
    image = np.linspace(0.0, 1.0, 5 * 9 * 3, dtype=np.float32).reshape(5, 9, 3)
    save_png(tmp_path / "p.png", image)
    expected = np.rint(image * 255.0).astype(np.uint8)
    assert np.array_equal(_pillow((tmp_path / "p.png").read_bytes()), expected)
    gray = (np.arange(12, dtype=np.uint8) * 20).reshape(3, 4)
    write_png(tmp_path / "g.png", gray)
    with Image.open(tmp_path / "g.png") as img:
        assert img.mode == "L" and np.array_equal(np.asarray(img), gray)


def test_bad_images_are_refused_clearly() -> None:
    with pytest.raises(FormatError, match="uint8"):
        encode_png(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(FormatError, match="non-empty"):
        encode_png(np.zeros((0, 4, 3), np.uint8))
    with pytest.raises(FormatError, match="1\\|3\\|4"):
        encode_png(np.zeros((4, 4, 2), np.uint8))
    with pytest.raises(FormatError, match="filter type 7"):
        encode_png(np.zeros((4, 4, 3), np.uint8), filter_type=7)


@pytest.mark.parametrize("filter_type", sorted(FILTERS))
def test_images_taller_than_a_band_stream_in_several_idat_chunks(filter_type: int) -> None:
    """Rows are filtered and deflated a band at a time: the Up filter reaches across band edges, the zlib stream
    spans several IDAT chunks, and both decoders read it whole."""
    rng = np.random.default_rng(9)
    narrow = rng.integers(0, 256, (600, 5, 1), dtype=np.uint8)
    data = encode_png(narrow, filter_type=filter_type)
    assert np.array_equal(_decode_by_the_specification(data), narrow)
    assert np.array_equal(_pillow(data), narrow)
    wide = rng.integers(0, 256, (600, 400, 3), dtype=np.uint8)  # enough bytes for the stream to emit per band
    data = encode_png(wide, filter_type=filter_type)
    assert data.count(b"IDAT") >= 2
    assert np.array_equal(_pillow(data), wide)
