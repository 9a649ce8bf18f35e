"""Our own writer of single-part scanline EXR files (no, ZIPS or ZIP compression), fed in row bands.

Why not the `openexr` binding for these: (1) it deflates at OpenEXR's default level with no way to choose a faster
one, and on a 1080p capture frame that compression was about two thirds of all host-side work (docs/performance.md);
(2) it needs every channel of the whole image in memory at once, which a 9000×6000 photo cannot afford. This writer
produces the same file format (OpenEXR 2 single-part scanline image: header, chunk offset table, chunks of 1 (ZIPS)
or 16 (ZIP) scanlines, each chunk byte-reordered, delta-predicted and zlib-deflated — the layout is documented in
OpenEXR's "OpenEXR File Layout"), deflates with ISA-L (`python-isal`, about 3.5× faster than OpenEXR's own deflate
here at a 3 % larger file) where it is installed, else with the standard library's zlib, and accepts rows in bands
so a caller never has to hold the whole image. Every OpenEXR reader decodes these files: the tests read them back
with the `openexr` binding, OpenImageIO and Blender.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from .casting import HalfCast, as_pixel_type
from .deflate import ZLIB_LEVEL, fast_deflate
from .direct_io import open_sequential
from .errors import ExrError

__all__ = ["LINES_PER_CHUNK", "ScanlineExrWriter"]

_MAGIC = 20000630
_VERSION = 2
_LONG_NAMES = 0x400  # version flag: attribute or channel names longer than 31 bytes
# OpenEXR's compression codes and the scanlines each chunk holds.
_CODES = {"none": 0, "zips": 2, "zip": 3}
LINES_PER_CHUNK = {"none": 1, "zips": 1, "zip": 16}
BLOCK_LINES = 16  # rows the writer gathers before it writes their chunks (a multiple of every chunk size)
_CHUNK_HEADER = 8  # a scanline chunk's y and byte count, two little-endian int32
_PIXEL_TYPES = {np.dtype(np.uint32): 0, np.dtype(np.float16): 1, np.dtype(np.float32): 2}
_ZLIB_LEVEL = ZLIB_LEVEL  # the fallback's level (benchmarks/bench_exr.py compares it)
_DEFLATE = fast_deflate


# ------------------------------------------------------------------------------------------------ header


def _attribute(name: str, kind: str, value: bytes) -> bytes:
    return name.encode() + b"\0" + kind.encode() + b"\0" + struct.pack("<i", len(value)) + value


def _user_attribute(name: str, value: Any) -> bytes:
    if isinstance(value, str):
        return _attribute(name, "string", value.encode())
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExrError(f"EXR attribute {name!r}: only str, int and float values are supported, got {value!r}")
    if isinstance(value, int):
        if not -(2**31) <= value < 2**31:
            raise ExrError(
                f"EXR attribute {name!r}: {value} does not fit an EXR int (32 bits); store it as a string"
            )
        return _attribute(name, "int", struct.pack("<i", value))
    return _attribute(name, "float", struct.pack("<f", value))


def _header(
    layout: list[tuple[str, np.dtype]],
    height: int,
    width: int,
    compression: str,
    attributes: Mapping[str, Any],
) -> tuple[bytes, bool]:
    channels = b"".join(
        name.encode() + b"\0" + struct.pack("<iB3xii", _PIXEL_TYPES[dtype], 0, 1, 1) for name, dtype in layout
    )
    window = struct.pack("<iiii", 0, 0, width - 1, height - 1)
    standard = {
        "channels": ("chlist", channels + b"\0"),
        "compression": ("compression", bytes([_CODES[compression]])),
        "dataWindow": ("box2i", window),
        "displayWindow": ("box2i", window),
        "lineOrder": ("lineOrder", b"\0"),  # INCREASING_Y
        "pixelAspectRatio": ("float", struct.pack("<f", 1.0)),
        "screenWindowCenter": ("v2f", struct.pack("<ff", 0.0, 0.0)),
        "screenWindowWidth": ("float", struct.pack("<f", 1.0)),
    }
    clash = sorted(set(attributes) & set(standard))
    if clash:
        raise ExrError(f"EXR attributes {clash} are written by the writer itself")
    encoded = {name: _attribute(name, *entry) for name, entry in standard.items()}
    encoded.update({name: _user_attribute(name, value) for name, value in attributes.items()})
    names = [name for name, _ in layout] + list(encoded)
    long_names = any(len(name.encode()) > 31 for name in names)
    if any(len(name.encode()) > 255 or not name or "\0" in name for name in names):
        raise ExrError("EXR channel and attribute names must be 1–255 bytes without NUL")
    return b"".join(encoded[name] for name in sorted(encoded)) + b"\0", long_names


# ------------------------------------------------------------------------------------------------ chunks


def _predicted(raw: np.ndarray, scratch: np.ndarray, out: np.ndarray) -> np.ndarray:
    """ZIP's pre-processing of one chunk: bytes at even offsets first, then odd ones; then each byte replaced by
    its difference to the previous one plus 128 (mod 256), the first byte kept.

    Every channel row is a whole number of 16-bit words, so the even bytes are the low bytes of the chunk read as
    little-endian words and the odd bytes their high bytes: two vectorised casts instead of numpy's strided byte
    copies (46 → 33–37 core-ms per 1080p capture frame in the engine). `out` doubles as the high bytes' scratch
    words, which keeps the working set small enough for the core's cache."""
    n = raw.size
    half = n // 2
    high = out[: 2 * half].view(np.uint16)
    as_words = raw.view("<u2")
    np.copyto(scratch[:half], as_words, casting="unsafe")  # the low byte of each word
    np.right_shift(as_words, 8, out=high)
    np.copyto(scratch[half:n], high, casting="unsafe")  # the high byte
    out[0] = scratch[0]
    np.subtract(scratch[1:n], scratch[: n - 1], out=out[1:n])
    out[1:n] ^= 0x80  # + 128 mod 256
    return out[:n]


class ScanlineExrWriter:
    """Writes one EXR file from row bands, top to bottom: `write(band)` any number of times, then `close()`.

    `layout` = [(channel name, dtype)] with dtype float16 (HALF), float32 (FLOAT) or uint32 (UINT); a band maps
    every channel name to a (rows, width) array of any numeric dtype, cast to the channel's dtype on the way in.
    Memory: one block of BLOCK_LINES interleaved scanlines at a time, plus the band the caller holds. On any error
    the partial file is left for the caller's transaction to discard (it always writes to a temporary name).
    `half`: the float16 converter the caller hands in (casting.py); None casts with numpy, to the same bits.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        layout: list[tuple[str, Any]],
        height: int,
        width: int,
        attributes: Mapping[str, Any] | None = None,
        *,
        compression: str = "zip",
        half: HalfCast | None = None,
    ) -> None:
        if compression not in _CODES:
            raise ExrError(f"{path}: this writer does {', '.join(_CODES)} compression, not {compression!r}")
        if height <= 0 or width <= 0:
            raise ExrError(f"{path}: EXR size must be positive, got {width}x{height}")
        if not layout:
            raise ExrError(f"{path}: refusing to write an EXR with no channels")
        self.path = path
        self._half = half
        self.layout = sorted(((name, np.dtype(dtype)) for name, dtype in layout), key=lambda c: c[0].encode())
        names = [name for name, _ in self.layout]
        if len(set(names)) != len(names):
            raise ExrError(f"{path}: duplicate channel names in {names}")
        for name, dtype in self.layout:
            if dtype not in _PIXEL_TYPES:
                raise ExrError(f"{path}: channel {name!r} has dtype {dtype}; use float16, float32 or uint32")
        self.height, self.width, self.compression = height, width, compression
        self.lines = LINES_PER_CHUNK[compression]
        header, long_names = _header(self.layout, height, width, compression, attributes or {})
        self._offsets: list[int] = []
        self._chunks = -(-height // self.lines)
        self._row_bytes = sum(dtype.itemsize for _, dtype in self.layout) * width
        # Rows are gathered BLOCK_LINES at a time whatever the chunk size: with one-line chunks (none, zips) a copy
        # per channel and row cost more than the copying itself. Uncompressed, each row of the block starts with
        # its chunk's 8-byte header, so the block is the file's bytes and goes out in one write.
        self._prefix = _CHUNK_HEADER if compression == "none" else 0
        self._block = np.empty((BLOCK_LINES, self._prefix + self._row_bytes), np.uint8)
        size = self.lines * self._row_bytes
        self._scratch = np.empty(size, np.uint8)
        self._deflated = np.empty(size, np.uint8)
        self._filled = 0  # rows of the current block already in _block
        self._row = 0  # rows written so far
        flags = _VERSION | (_LONG_NAMES if long_names else 0)
        start = struct.pack("<ii", _MAGIC, flags) + header
        self._table_at = len(start)
        try:
            # the offset table is filled in by close(): the file holds it until then (direct_io.py)
            self._file = open_sequential(path, head=self._table_at + 8 * self._chunks)
        except OSError as exc:
            raise ExrError(f"{path}: could not write EXR ({exc})") from exc
        try:
            self._file.write(start)
            self._file.write(bytes(8 * self._chunks))
        except OSError as exc:
            self._file.abort()
            raise ExrError(f"{path}: could not write EXR ({exc})") from exc

    def write(self, band: Mapping[str, Any]) -> None:
        """Append the next rows: every channel of the layout, each a (rows, width) array."""
        rows = None
        arrays = []
        for name, dtype in self.layout:
            if name not in band:
                raise ExrError(f"{self.path}: band is missing channel {name!r}")
            arr = np.asarray(band[name])
            if arr.ndim != 2 or arr.shape[1] != self.width or (rows is not None and arr.shape[0] != rows):
                raise ExrError(
                    f"{self.path}: channel {name!r} band has shape {arr.shape}, expected (rows, {self.width}) "
                    "like the others"
                )
            rows = arr.shape[0]
            arrays.append(as_pixel_type(arr, dtype, self._half))
        extra = sorted(set(band) - {name for name, _ in self.layout})
        if extra:
            raise ExrError(f"{self.path}: band has channels not in the layout: {extra}")
        if self._row + rows > self.height:
            raise ExrError(f"{self.path}: {self._row + rows} rows written, the image has {self.height}")
        start = 0
        while start < rows:
            take = min(BLOCK_LINES - self._filled, rows - start)
            offset = self._prefix
            for (_, dtype), arr in zip(self.layout, arrays, strict=True):
                span = dtype.itemsize * self.width
                target = self._block[self._filled : self._filled + take, offset : offset + span].view(dtype)
                np.copyto(target, arr[start : start + take], casting="unsafe")
                offset += span
            self._filled += take
            self._row += take
            start += take
            if self._filled == BLOCK_LINES or self._row == self.height:
                self._flush()

    def _flush(self) -> None:
        """Write the rows gathered in the block as chunks."""
        first, count = self._row - self._filled, self._filled
        try:
            if self.compression == "none":
                self._write_uncompressed(first, count)
            else:
                for top in range(0, count, self.lines):
                    lines = min(self.lines, count - top)
                    raw = self._block[top : top + lines].reshape(-1)
                    packed = _DEFLATE(_predicted(raw, self._scratch, self._deflated))
                    # stored raw when deflate does not help
                    payload = packed if len(packed) < raw.size else raw
                    self._offsets.append(self._file.tell())
                    self._file.write(struct.pack("<ii", first + top, len(payload)))
                    self._file.write(payload)
        except OSError as exc:
            raise ExrError(f"{self.path}: could not write EXR ({exc})") from exc
        self._filled = 0

    def _write_uncompressed(self, first: int, count: int) -> None:
        """One-line chunks whose headers (y, byte count) are already in place in front of each block row."""
        block = self._block[:count]
        headers = block[:, :_CHUNK_HEADER].view("<i4")
        headers[:, 0] = np.arange(first, first + count)
        headers[:, 1] = self._row_bytes
        start = self._file.tell()
        self._offsets.extend(range(start, start + count * block.shape[1], block.shape[1]))
        self._file.write(block)

    def close(self) -> None:
        """Write the offset table and close; the image must be complete."""
        try:
            if self._row != self.height:
                raise ExrError(f"{self.path}: only {self._row} of {self.height} rows were written")
            self._file.patch(self._table_at, struct.pack(f"<{len(self._offsets)}Q", *self._offsets))
            self._file.close()
        except OSError as exc:
            raise ExrError(f"{self.path}: could not write EXR ({exc})") from exc
        finally:
            self._file.abort()

    def abort(self) -> None:
        """Close without completing (the caller discards the file)."""
        self._file.abort()

    def __enter__(self) -> ScanlineExrWriter:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()
