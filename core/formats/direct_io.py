"""A sequential file writer that bypasses the page cache (Linux `O_DIRECT`) on local disks, for the bundle EXRs.

Why: a video job writes ≈ 31 MB of EXR per 1080p frame and never reads it back. Through the page cache every frame
lands on pages the system has not used lately; on a VM whose free memory goes back to the hypervisor (free page
reporting, this project's benchmark machine) writing a 32 MB file that way cost 85–130 core-ms, with `O_DIRECT`
from one reused buffer 3–5 (docs/performance.md), and a long video no longer evicts every other program's cached
files. On bare metal it saves the copy into the cache.

Where: only on local disk filesystems (ext4, XFS, btrfs, f2fs), which take direct writes of whole 4 KiB blocks
from page-aligned memory. Elsewhere (NFS and other network or FUSE filesystems, where a direct write waits for
the server; tmpfs; macOS, Windows) and with `SAPIENS2_DIRECT_IO=0`, it is an ordinary buffered file. If a direct
write is refused anyway, the file continues buffered. The bytes of the file are the same either way.

The file is written front to back; only its first `head` bytes may be changed afterwards (`patch`, for a
header's table that is known at the end): they stay in memory until `close`.
"""

from __future__ import annotations

import errno
import functools
import mmap
import os
import re
import threading
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # Windows: never direct (no O_DIRECT there either)
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "BLOCK",
    "DIRECT_FILESYSTEMS",
    "SequentialFile",
    "direct_io_enabled",
    "direct_io_supported",
    "open_sequential",
]

# direct writes: offsets, lengths and memory aligned to this (every current disk's logical block size divides it)
BLOCK = 4096
BUFFER = 4 << 20  # bytes gathered per direct write
DIRECT_FILESYSTEMS = frozenset({"ext4", "xfs", "btrfs", "f2fs"})
_PLATFORM_HAS_DIRECT = hasattr(os, "O_DIRECT") and fcntl is not None
SWITCH = "SAPIENS2_DIRECT_IO"  # "0" turns direct writes off (read at each use, so a host can change it at run time)


def direct_io_enabled() -> bool:
    """Whether this platform has direct writes and the user has not switched them off (SAPIENS2_DIRECT_IO=0)."""
    return _PLATFORM_HAS_DIRECT and os.environ.get(SWITCH, "1") != "0"


_buffers = threading.local()  # one aligned buffer per writer thread, reused from file to file


def _round_up(n: int) -> int:
    return -(-n // BLOCK) * BLOCK


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040 …)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


@functools.lru_cache(maxsize=64)
def _mount_type(target: str) -> str | None:
    """The filesystem type of the mount holding the real path `target` (Linux's /proc/self/mountinfo)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        point = _unescape(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind


def direct_io_supported(folder: str | os.PathLike[str]) -> bool:
    """Whether files in `folder` are written with O_DIRECT (see the module docstring)."""
    return direct_io_enabled() and _mount_type(os.path.realpath(folder)) in DIRECT_FILESYSTEMS


def _take_buffer() -> mmap.mmap:
    """The thread's aligned buffer, or a new one while another file of this thread holds it."""
    buffer = getattr(_buffers, "free", None)
    _buffers.free = None
    return buffer if buffer is not None else mmap.mmap(-1, BUFFER)  # page-aligned


def _give_back(buffer: mmap.mmap) -> None:
    if getattr(_buffers, "free", None) is None:
        _buffers.free = buffer
    else:
        buffer.close()


class SequentialFile:
    """A file written front to back: `write(data)`, `tell()`, `patch(offset, data)` within the first `head`
    bytes, then `close()`; `abort()` closes without completing (the caller removes the file). As a context manager
    it closes on success and aborts on an error. Raises OSError like a file object. Made by `open_sequential`."""

    def tell(self) -> int:
        raise NotImplementedError

    def write(self, data: bytes | bytearray | memoryview) -> None:
        raise NotImplementedError

    def patch(self, offset: int, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> SequentialFile:
        return self

    def __exit__(self, kind: object, *rest: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def open_sequential(path: str | os.PathLike[str], head: int = 0) -> SequentialFile:
    """A direct file where the folder's filesystem takes direct writes (module docstring), else a buffered one."""
    if _round_up(head) <= BUFFER and direct_io_supported(Path(path).parent):
        try:
            return _DirectFile(path, head)
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: e.g. ext4 with data=journal, no direct I/O there
                raise
    return _BufferedFile(path)


class _BufferedFile(SequentialFile):
    """An ordinary file through the page cache."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file: BinaryIO = open(path, "wb")  # noqa: SIM115 — closed by close() or abort()

    def tell(self) -> int:
        return self._file.tell()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._file.write(data)

    def patch(self, offset: int, data: bytes) -> None:
        self._file.seek(offset)
        self._file.write(data)
        self._file.seek(0, os.SEEK_END)

    def close(self) -> None:
        self._file.close()

    def abort(self) -> None:
        self._file.close()


class _DirectFile(SequentialFile):
    """O_DIRECT writes of BUFFER bytes from the thread's aligned buffer; the head held in memory until close."""

    def __init__(self, path: str | os.PathLike[str], head: int) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT | os.O_CLOEXEC, 0o666)
        self._size = 0  # bytes written so far: the file's length at close
        self._head = bytearray()  # the first bytes, held until close (patchable)
        self._head_size = _round_up(head)
        self._buffer: mmap.mmap | None = _take_buffer()
        self._filled = 0  # bytes in the buffer, not yet on disk
        self._flushed = self._head_size  # file offset of the buffer's first byte

    def tell(self) -> int:
        return self._size

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        while view.nbytes:
            if len(self._head) < self._head_size:
                take = min(self._head_size - len(self._head), view.nbytes)
                self._head += view[:take]
            else:
                take = min(BUFFER - self._filled, view.nbytes)
                self._buffer[self._filled : self._filled + take] = view[:take]
                self._filled += take
                if self._filled == BUFFER:
                    self._flush_buffer(BUFFER)
            view = view[take:]
            self._size += take

    def patch(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > len(self._head):
            raise ValueError(f"{self.path}: bytes {offset}..{end} are not in the held head of the file")
        self._head[offset:end] = data

    def close(self) -> None:
        """Write the tail and the head, give the file its exact length, close."""
        try:
            if self._filled:  # the tail, padded to a whole block; the length is cut back below
                padded = _round_up(self._filled)
                self._buffer[self._filled : padded] = bytes(padded - self._filled)
                self._flush_buffer(padded)
            if self._head:
                self._buffer[: self._head_size] = bytes(self._head) + bytes(self._head_size - len(self._head))
                self._pwrite(self._head_size, 0)
            os.ftruncate(self._fd, self._size)
        finally:
            self.abort()

    def abort(self) -> None:
        if self._buffer is not None:
            _give_back(self._buffer)
            self._buffer = None
            os.close(self._fd)

    def _flush_buffer(self, length: int) -> None:
        """Write the buffer's first `length` bytes (a multiple of BLOCK) at its file offset."""
        self._pwrite(length, self._flushed)
        self._flushed += length
        self._filled = 0

    def _pwrite(self, length: int, offset: int) -> None:
        view = memoryview(self._buffer)[:length]
        try:
            try:
                _pwrite_all(self._fd, view, offset)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                # a filesystem that took the flag but refuses the write: the rest of the file goes buffered
                fcntl.fcntl(self._fd, fcntl.F_SETFL, fcntl.fcntl(self._fd, fcntl.F_GETFL) & ~os.O_DIRECT)
                _pwrite_all(self._fd, view, offset)
        finally:
            view.release()


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    while view.nbytes:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written
