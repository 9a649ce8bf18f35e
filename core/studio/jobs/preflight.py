"""Checks of the output folder before any model loads: a folder (not a file), writable, with room for the results.

Why: a 5B model takes a minute to load and a long sequence hours to run; learning then that `--out` is read-only or
the disk is full (as raw errno text naming a temporary file) wastes both. Nothing is created here: the folder is
made by the run itself, right before it takes the folder's lock.

Space: the bytes each frame writes (`estimate.py`: per layer and EXR compression, within 1.5x of what runs
write), minus the bytes of the existing files the run replaces (same names), plus, when it replaces any, the
largest frame (its temporaries sit beside the old files until its commit), plus 256 KiB. `space_check=False`
(`--no-space-check`) skips the comparison with the free space, for a disk whose free space is reported wrong
or content known to compress far better.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...formats.compressions import DEFAULT_EXR_COMPRESSION
from ..errors import OutputError
from ..sources.inputs import ImageJob, SequenceJob
from ..store.orphans import Orphan, find_orphans
from ..store.outputs import output_suffixes
from ..store.resume import check_source
from .estimate import SEQUENCE_INDEX_BYTES, estimate_frame_bytes

_MARGIN = 256 << 10


@dataclass(frozen=True)
class OutputCheck:
    """What the checks found: the folder, whether it exists yet, and the space estimate."""

    folder: Path
    exists: bool
    needed_bytes: int
    free_bytes: int
    frames: int
    orphans: tuple[Orphan, ...] = ()  # results there whose input is gone: kept unless `clean`


def _image_size(path: Path) -> tuple[int, int] | None:
    """(W, H) from the file's header, or None when unreadable (the run reports that image on its own)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            return image.size
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError):
        return None


def _video_frames(path: Path) -> tuple[int, int, int] | None:
    """(W, H, frame count) from a video's stream header; None when unknown (no PyAV, no count)."""
    try:
        import av
    except ImportError:
        return None
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            count = stream.frames or 0
            if not count and stream.duration and stream.average_rate and stream.time_base:
                count = int(float(stream.duration * stream.time_base) * float(stream.average_rate)) + 1
            return (stream.codec_context.width, stream.codec_context.height, count) if count else None
    except Exception:  # any decoder error: the run reports the video itself
        return None


def _frames(jobs: Sequence[ImageJob | SequenceJob], out: Path) -> list[tuple[Path, str, int, int]]:
    """(output folder, output name, W, H) for every frame whose size can be read cheaply."""
    found = []
    for job in jobs:
        if isinstance(job, ImageJob):
            size = _image_size(job.path)
            if size:
                found.append((out, job.name, *size))
            continue
        folder = out / job.name
        if job.video is not None:
            info = _video_frames(job.video)
            if info:
                found += [(folder, f"{job.name}_{n:04d}", info[0], info[1]) for n in range(1, info[2] + 1)]
            continue
        numbers = job.frame_numbers() or []
        for path, number in zip(job.frames, numbers):
            size = _image_size(path)
            if size:
                found.append((folder, f"{job.name}_{number:04d}", *size))
    return found


def _existing_bytes(folder: Path, name: str) -> int:
    total = 0
    for suffix in output_suffixes():
        with contextlib.suppress(OSError):
            total += (folder / f"{name}{suffix}").stat().st_size
    return total


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path.cwd()


def human_size(count: float) -> str:
    """Bytes in decimal units as messages print them (`17.2 MB`)."""
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if count < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def _check_writable(folder: Path, out: Path) -> None:
    """The folder that will hold (or create) the outputs accepts files; a read-only mount is named as such."""
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY) if hasattr(os, "statvfs") else False
    except OSError:
        read_only = False
    if read_only:
        raise OutputError(
            f"the output folder {out} is on a read-only file system ({folder}); choose a writable folder",
            hints={"cli": "pass another --out"},
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(
            f"cannot write into {folder} (permission denied), so {out} cannot hold the results; choose a folder "
            "you can write to or change its permissions",
            hints={"cli": "pass another --out"},
        )
    if (
        folder == out
    ):  # the folder exists: really create (and remove) a file, as ACLs and root squash hide here
        probe = folder / f".sapiens2-probe.{uuid.uuid4().hex[:8]}.tmp"
        try:
            probe.write_bytes(b"")
        except OSError as exc:
            raise OutputError(
                f"cannot create files in the output folder {out} ({os.strerror(exc.errno or 0) or exc}); "
                "choose a writable folder",
                hints={"cli": "pass another --out"},
            ) from None
        finally:
            with contextlib.suppress(OSError):
                probe.unlink()


def _check_sources(out: Path, jobs: Sequence[ImageJob | SequenceJob]) -> None:
    """Before anything is written: no input's results would go over another input's (resume.check_source)."""
    for job in jobs:
        if isinstance(job, ImageJob):
            check_source(out, job.name, job.path)
            continue
        folder = out / job.name
        if not folder.is_dir():
            continue
        if job.video is not None:
            check_source(folder, f"{job.name}_0001", job.video)
            continue
        for path, number in zip(job.frames, job.frame_numbers() or []):
            check_source(folder, f"{job.name}_{number:04d}", path)


def check_output_folder(
    out: Path,
    jobs: Sequence[ImageJob | SequenceJob],
    tasks: Sequence[str],
    *,
    previews: bool = True,
    mesh: str | None = None,
    compression: str = DEFAULT_EXR_COMPRESSION,
    space_check: bool = True,
) -> OutputCheck:
    """Raise OutputError, naming the user's path and what to do, unless `out` can take the results."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError(
            f"the output folder {out} is a file; choose a folder (it is created when missing)",
            hints={"cli": "--out needs a folder"},
        )
    for job in jobs:
        if isinstance(job, SequenceJob) and (out / job.name).exists() and not (out / job.name).is_dir():
            raise OutputError(
                f"{out / job.name} is a file, but the sequence {job.name!r} needs a folder of that name there; "
                "move the file away or choose another output folder"
            )
        if isinstance(job, ImageJob) and (out / f"{job.name}.json").is_dir():
            raise OutputError(
                f"{out / job.name}.json is a folder, but it is where {job.path.name}'s bundle goes"
            )
    if out.is_dir():
        _check_sources(out, jobs)
    existing = _nearest_existing(out)
    if not existing.is_dir():
        raise OutputError(f"cannot create the output folder {out}: {existing} is a file")
    _check_writable(existing, out)
    needed, frames = estimate_job_bytes(
        out, jobs, tasks, previews=previews, mesh=mesh, compression=compression
    )
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        free = needed
    if space_check and needed > free:
        raise OutputError(
            f"not enough free space for the results in {out}: about {human_size(needed)} are needed ({frames} "
            f"image(s), tasks {','.join(tasks)}, EXR {compression}{'' if previews else ', no previews'}), "
            f"{human_size(free)} are free on its disk; free some space or choose another output folder",
            hints={"cli": _space_hint(tasks, previews, compression)},
        )
    orphans = tuple(find_orphans(out, jobs)) if out.is_dir() else ()
    return OutputCheck(out, out.exists(), needed, free, frames, orphans)


def estimate_job_bytes(
    out: Path,
    jobs: Sequence[ImageJob | SequenceJob],
    tasks: Sequence[str],
    *,
    previews: bool = True,
    mesh: str | None = None,
    compression: str = DEFAULT_EXR_COMPRESSION,
) -> tuple[int, int]:
    """(bytes the run needs on `out`'s disk, frames counted): the module docstring's formula."""
    out = Path(out)
    frames = _frames(jobs, out)
    sizes = [
        estimate_frame_bytes(w, h, tasks, previews=previews, mesh=mesh, compression=compression)
        for _, _, w, h in frames
    ]
    replaced = sum(_existing_bytes(folder, name) for folder, name, _, _ in frames) if out.exists() else 0
    total = sum(sizes) + SEQUENCE_INDEX_BYTES * sum(isinstance(j, SequenceJob) for j in jobs)
    needed = max(total - replaced, 0) + (max(sizes, default=0) if replaced else 0) + _MARGIN
    return needed, len(frames)


def _space_hint(tasks: Sequence[str], previews: bool, compression: str) -> str:
    """What the CLI user can do to write less (never a flag already given) or to skip the check."""
    ways = []
    if previews:
        ways.append("--no-previews")
    if compression == "none":
        ways.append("--exr-compression zip")
    if len(tasks) > 1:
        ways.append("fewer --tasks")
    less = f", or {' or '.join(ways)} to write less" if ways else ""
    return f"pass another --out{less}; --no-space-check runs without this check"
