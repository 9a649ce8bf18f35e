"""The page-cache-bypassing sequential writer (core/formats/direct_io.py) and the EXR writer on top of it.

What must hold: the file's bytes are exactly what was written (with the head patched), direct or buffered, for any
pattern of write sizes; a direct file really leaves nothing in the page cache (checked with mincore, the kernel's
own record of resident pages); filesystems without direct I/O get an ordinary file; the EXR writer's files are
the same bytes either way and decode in the `openexr` reader.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
from pathlib import Path

import numpy as np
import pytest
from sapiens2_studio.core.formats import direct_io
from sapiens2_studio.core.formats.direct_io import BUFFER, direct_io_supported, open_sequential
from sapiens2_studio.core.formats.exr_scanline import ScanlineExrWriter

pytestmark = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="O_DIRECT is Linux's")


@pytest.fixture
def disk(tmp_path: Path) -> Path:
    """A folder on a disk filesystem (the tests' temporary folder on these machines)."""
    assert direct_io_supported(tmp_path), (
        f"{tmp_path} is not on a filesystem with direct I/O ({direct_io._mount_type(os.path.realpath(tmp_path))});"
        " run the tests with a temporary folder on ext4/XFS/btrfs"
    )
    return tmp_path


@pytest.fixture
def buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(direct_io.SWITCH, "0")


def _write_pattern(path: Path, sizes: list[int], head: int, patches: list[tuple[int, bytes]]) -> bytes:
    """Write random pieces of `sizes`, patch the head, and return the bytes the file must hold."""
    rng = np.random.default_rng(len(sizes) + head)
    expected = bytearray()
    out = open_sequential(path, head=head)
    for size in sizes:
        piece = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert out.tell() == len(expected)
        out.write(piece)
        expected += piece
    for offset, data in patches:
        out.patch(offset, data)
        expected[offset : offset + len(data)] = data
    out.close()
    return bytes(expected)


PATTERNS = [
    ([], 0, []),  # empty file
    ([10], 600, [(2, b"xy")]),  # shorter than its head
    ([600, 7, 4096, 1], 600, [(0, b"HEAD"), (590, b"0123456789")]),
    ([BUFFER], 0, []),  # exactly one buffer
    ([BUFFER - 4096, 4096, 5000], 4096, [(4000, b"z" * 96)]),  # the head fills a whole block
    (
        [1000] * 9000 + [BUFFER * 2 + 17],
        72_000,
        [(64_000, b"t" * 8000)],
    ),  # many small writes, then a large one
]


@pytest.mark.parametrize("sizes, head, patches", PATTERNS)
def test_direct_file_holds_exactly_what_was_written(disk: Path, sizes, head, patches) -> None:
    path = disk / "out.bin"
    expected = _write_pattern(path, sizes, head, patches)
    assert path.read_bytes() == expected


@pytest.mark.parametrize("sizes, head, patches", PATTERNS)
def test_buffered_file_holds_the_same_bytes(tmp_path: Path, buffered: None, sizes, head, patches) -> None:
    path = tmp_path / "out.bin"
    assert not direct_io_supported(tmp_path)
    expected = _write_pattern(path, sizes, head, patches)
    assert path.read_bytes() == expected


def _resident_pages(path: Path) -> tuple[int, int]:
    """(pages of `path` in the page cache, pages of the file), from mincore(2) over a mapping of it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vector = (ctypes.c_ubyte * pages)()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        first = ctypes.c_char.from_buffer(mapped)  # the mapping's address (mapping a file reads none of it)
        try:
            if libc.mincore(ctypes.addressof(first), size, vector) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        finally:
            del first
    return sum(v & 1 for v in vector), pages


def test_a_direct_file_leaves_the_page_cache_alone(disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the writer: 16 MB written directly are not in the page cache afterwards; written through the
    cache (the fallback) they are."""
    data = np.random.default_rng(1).integers(0, 256, 16 << 20, dtype=np.uint8).tobytes()
    direct = disk / "direct.bin"
    out = open_sequential(direct, head=100)
    out.write(data)
    out.close()
    resident, pages = _resident_pages(direct)
    assert resident <= 2, f"{resident} of {pages} pages of a direct file are cached"

    monkeypatch.setenv(direct_io.SWITCH, "0")
    cached = disk / "cached.bin"
    out = open_sequential(cached, head=100)
    out.write(data)
    out.close()
    resident, pages = _resident_pages(cached)
    assert resident > pages // 2, f"only {resident} of {pages} pages of a buffered file are cached"
    assert direct.read_bytes() == cached.read_bytes()


def test_two_files_of_one_thread_do_not_share_a_buffer(disk: Path) -> None:
    a, b = open_sequential(disk / "a.bin"), open_sequential(disk / "b.bin")
    for i in range(5):
        a.write(bytes([i]) * (BUFFER // 2 + 3))
        b.write(bytes([100 + i]) * (BUFFER // 3 + 5))
    a.close()
    b.close()
    assert (disk / "a.bin").read_bytes() == b"".join(bytes([i]) * (BUFFER // 2 + 3) for i in range(5))
    assert (disk / "b.bin").read_bytes() == b"".join(bytes([100 + i]) * (BUFFER // 3 + 5) for i in range(5))


def test_a_patch_outside_the_held_head_is_refused(disk: Path) -> None:
    out = open_sequential(disk / "out.bin", head=64)
    out.write(b"a" * 10_000)
    with pytest.raises(ValueError, match="held head"):
        out.patch(5000, b"no")
    out.abort()


def test_a_refused_direct_write_continues_buffered(disk: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem that takes O_DIRECT at open but refuses the writes (EINVAL): the file is still complete."""
    real = os.pwrite
    refused = []

    def pwrite(fd: int, data, offset: int) -> int:
        import fcntl

        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(direct_io.os, "pwrite", pwrite)
    path = disk / "out.bin"
    expected = _write_pattern(path, [5000, BUFFER, 123], 300, [(10, b"patched")])
    assert refused and path.read_bytes() == expected


def test_tmpfs_gets_an_ordinary_file() -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or direct_io._mount_type(os.path.realpath(shm)) != "tmpfs":
        pytest.fail("this machine has no tmpfs at /dev/shm to check the buffered choice on")
    assert not direct_io_supported(shm)


def _exr(path: Path, compression: str) -> None:
    rng = np.random.default_rng(7)
    height, width = 70, 333
    layout = [("R", np.float16), ("P.X", np.float32), ("seg.id", np.uint32)]
    with ScanlineExrWriter(
        path, layout, height, width, {"note": "direct"}, compression=compression
    ) as writer:
        for top in range(0, height, 23):
            rows = min(23, height - top)
            writer.write(
                {
                    "R": rng.random((rows, width), dtype=np.float32),
                    "P.X": rng.standard_normal((rows, width)).astype(np.float32),
                    "seg.id": rng.integers(0, 29, (rows, width)).astype(np.uint32),
                }
            )


@pytest.mark.parametrize("compression", ["zip", "zips", "none"])
def test_exr_files_are_the_same_bytes_direct_or_buffered(
    disk: Path, monkeypatch: pytest.MonkeyPatch, compression: str
) -> None:
    import OpenEXR

    _exr(disk / "direct.exr", compression)
    monkeypatch.setenv(direct_io.SWITCH, "0")
    _exr(disk / "buffered.exr", compression)
    assert (disk / "direct.exr").read_bytes() == (disk / "buffered.exr").read_bytes()
    channels = OpenEXR.File(str(disk / "direct.exr"), separate_channels=True).channels()
    assert sorted(channels) == ["P.X", "R", "seg.id"]
    assert channels["seg.id"].pixels.shape == (70, 333)
