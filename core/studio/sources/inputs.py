"""Turn input paths (images, folders, numbered frames, videos) into single images and sequences.

Why grouping: users point the CLI at a folder of `frame_0001.png …` frames and expect one sequence (with a
sequence index and temporal smoothing), not hundreds of unrelated images. Files whose names differ only by a
number, in the same folder with the same extension, form a sequence (ordered numerically); everything else is a
single image. Videos are sequences decoded with PyAV when it is installed, numbered 1..N in presentation order;
their exact frame count and frame-accurate ranges come from `video.py`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...formats.bundle import sanitize_name
from ...formats.errors import BundleError
from ..errors import InputError
from .video import VideoIndex, decode_all, decode_range, index_video, require_av

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".mov", ".avi", ".mkv", ".webm", ".m4v")
_EXIF_ORIENTATION = 0x0112
_TURNED = range(2, 9)  # EXIF orientations that need a flip or a turn (1 = upright)
_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<number>\d+)$")


@dataclass
class ImageJob:
    """One still image to process."""

    path: Path
    name: str


@dataclass
class SequenceJob:
    """Ordered frames (image files or one video) to process as one sequence. `index`: a video's frame index, made
    on first use (`video_index`) and carried with the job (e.g. to a Ray worker), so it is read once."""

    name: str
    frames: list[Path] = field(default_factory=list)
    video: Path | None = None
    fps: float = 24.0
    index: VideoIndex | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.frames)

    def video_index(self) -> VideoIndex:
        """A video's exact frame count and timestamps (`video.index_video`: demuxed, not decoded); InputError
        when it cannot be read."""
        if self.video is None:
            raise ValueError(f"{self.name} is a sequence of image files, not a video")
        if self.index is None:
            self.index = index_video(self.video)
        return self.index

    def frame_numbers(self) -> list[int]:
        """Output frame numbers: the numbers in the file names (plate_1001.png → 1001, gaps kept), so results line
        up with the plate in comp; 1, 2, … when the names repeat a number (a_1, a_01). A video's are 1..N in
        presentation order, N from its index (which this reads: a pass over the file, InputError if unreadable)."""
        if self.video is not None:
            return self.video_index().numbers()
        numbers = [int(_NUMBERED.match(p.stem).group("number")) for p in self.frames]  # type: ignore[union-attr]
        return numbers if len(set(numbers)) == len(numbers) else list(range(1, len(numbers) + 1))

    def probe(self) -> None:
        """For a video: read its frame rate (and check that it opens) before any frame is processed."""
        if self.video is None:
            return
        av = require_av(self.video)
        try:
            with av.open(str(self.video)) as container:
                if not container.streams.video:
                    raise InputError(f"{self.video}: the file has no video stream")
                rate = container.streams.video[0].average_rate
                if rate:
                    self.fps = float(rate)
        except av.error.FFmpegError as exc:
            raise InputError(f"{self.video}: cannot open video ({exc})") from None

    def iter_frames(self) -> Iterator[tuple[str, np.ndarray]]:
        """Yield (source name, RGB frame as uint8 or uint16)."""
        if self.video is None:
            for path in self.frames:
                yield path.name, load_image(path)
            return
        for image in decode_all(self.video):
            yield self.video.name, image

    def video_frames(
        self, first: int | None = None, last: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """A video's (frame number, RGB frame): all of them decoded in order, or only frames first..last (a chunk:
        decoded from a keyframe at or before `first`, frame-accurate, `video.decode_range`)."""
        assert self.video is not None
        if first is None and last is None:  # the whole video: the sequential decode, no index needed
            yield from enumerate(decode_all(self.video), start=1)
            return
        index = self.video_index()
        yield from decode_range(self.video, index, first or 1, index.count if last is None else last)


def load_image(path: Path) -> np.ndarray:
    """Read any common image as (H, W, 3) RGB: uint8, or uint16 for 16-bit grayscale; RGBA drops alpha."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            # only a turned image is transposed: exif_transpose copies even upright ones
            if img.getexif().get(_EXIF_ORIENTATION, 1) in _TURNED:
                img = ImageOps.exif_transpose(img)
            img.load()
            if img.mode in ("I;16", "I;16B", "I;16L", "I"):  # 16-bit (or 32-bit int) grayscale: keep 16 bits
                arr = np.asarray(img, dtype=np.int64)
                if img.mode == "I" and arr.max() <= 255:
                    arr = arr * 257
                gray = np.clip(arr, 0, 65535).astype(np.uint16)
                return np.ascontiguousarray(np.repeat(gray[..., None], 3, axis=2))
            if img.mode == "F":
                arr = np.asarray(img, dtype=np.float32)
                gray = np.clip(np.rint(arr * 255.0 if arr.max() <= 1.0 else arr), 0, 255).astype(np.uint8)
                return np.ascontiguousarray(np.repeat(gray[..., None], 3, axis=2))
            rgb = img if img.mode == "RGB" else img.convert("RGB")  # convert() copies even when already RGB
            return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8))
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputError(f"{path}: cannot read image ({exc}); is it a valid image file?") from None


def _numbered_key(path: Path) -> tuple[str, str, str] | None:
    match = _NUMBERED.match(path.stem)
    if not match:
        return None
    return str(path.parent), match.group("prefix"), path.suffix.lower()


def _sequence_name(prefix: str, folder: Path) -> str:
    base = prefix.rstrip("_-. ")
    return base or folder.resolve().name or "sequence"


def collect_inputs(inputs: list[str]) -> list[ImageJob | SequenceJob]:
    """Expand paths into jobs; raises InputError for missing paths, empty folders and unknown file types."""
    if not inputs:
        raise InputError("no inputs given; pass image files, folders, numbered frames or videos")
    files: list[Path] = []
    jobs: list[ImageJob | SequenceJob] = []
    for raw in inputs:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
            videos = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS)
            if not found and not videos:
                raise InputError(
                    f"{path}: no images found in this folder (looked for {', '.join(IMAGE_EXTENSIONS)})"
                )
            files.extend(found)
            jobs.extend(SequenceJob(name=p.stem, video=p) for p in videos)
        elif path.is_file():
            suffix = path.suffix.lower()
            if suffix in VIDEO_EXTENSIONS:
                jobs.append(SequenceJob(name=path.stem, video=path))
            elif suffix in IMAGE_EXTENSIONS:
                files.append(path)
            else:
                raise InputError(
                    f"{path}: unsupported file type {suffix or '(none)'!r}; images: {', '.join(IMAGE_EXTENSIONS)}; "
                    f"videos: {', '.join(VIDEO_EXTENSIONS)}"
                )
        else:
            raise InputError(f"{path}: no such file or folder")

    groups: dict[tuple[str, str, str], list[Path]] = {}
    for file in dict.fromkeys(files):  # de-duplicate, keep order
        key = _numbered_key(file)
        if key is not None:
            groups.setdefault(key, []).append(file)
    grouped: set[Path] = set()
    ordered: list[ImageJob | SequenceJob] = []
    for file in dict.fromkeys(files):
        key = _numbered_key(file)
        if key is not None and len(groups[key]) > 1:
            if file in grouped:
                continue
            frames = sorted(groups[key], key=lambda p: int(_NUMBERED.match(p.stem).group("number")))  # type: ignore[union-attr]
            grouped.update(frames)
            ordered.append(SequenceJob(name=_sequence_name(key[1], file.parent), frames=frames))
        else:
            ordered.append(ImageJob(path=file, name=file.stem))
    ordered.extend(jobs)
    _unique_names(ordered)
    return ordered


def _origin(job: ImageJob | SequenceJob) -> Path:
    """The file (image, video) or folder (numbered frames) an output name stands for."""
    if isinstance(job, ImageJob):
        return job.path
    if job.video is not None:
        return job.video
    return job.frames[0].parent if job.frames else Path(job.name)


def _extension(job: ImageJob | SequenceJob) -> str:
    if isinstance(job, ImageJob):
        return job.path.suffix.lstrip(".").lower()
    if job.video is not None:
        return job.video.suffix.lstrip(".").lower()
    return job.frames[0].suffix.lstrip(".").lower() if job.frames else ""


def _path_hash(path: Path, *, full: bool) -> str:
    """A short hash of the input's path: its folder's name and its own (stable across mounts), or, as the last
    resort, its whole resolved path."""
    text = path.resolve().as_posix() if full else f"{path.parent.name}/{path.name}"
    return hashlib.sha1(unicodedata.normalize("NFC", text).encode("utf-8")).hexdigest()[:8]


def name_candidates(job: ImageJob | SequenceJob) -> list[str]:
    """The names an input may get, in order: its own (`stem`), then with its extension (`stem_jpg`), then with its
    folder's (`shot_stem_jpg`), then with a short hash of its path; each a function of this input alone."""
    base = _safe(job.name, "sequence" if isinstance(job, SequenceJob) else "image")
    origin = _origin(job)
    ext = _extension(job)
    with_ext = f"{base}_{ext}" if ext else base
    parent = _safe(origin.resolve().parent.name, "") if origin.resolve().parent.name else ""
    return [
        base,
        with_ext,
        f"{parent}_{with_ext}" if parent else with_ext,
        f"{base}_{_path_hash(origin, full=False)}",
        f"{base}_{_path_hash(origin, full=True)}",
    ]


def _safe(name: str, fallback: str) -> str:
    try:
        return sanitize_name(name)
    except BundleError:  # a name made only of unsafe characters
        return fallback


def name_key(name: str) -> str:
    """Two names that one file system may take for one file (case-insensitive ones: macOS, Windows)."""
    return unicodedata.normalize("NFC", name).casefold()


def _unique_names(jobs: list[ImageJob | SequenceJob]) -> None:
    """Give every input its output name: its own name when no other input shares it, else every input of a
    clash moves one step down its `name_candidates` at once, so the names depend on which inputs clash, never on
    their order (the bundle records its source, and a run refuses to write one input's results over another's:
    `resume.check_source`)."""
    ladders = [name_candidates(job) for job in jobs]
    level = [0] * len(jobs)
    while True:
        groups: dict[str, list[int]] = {}
        for i, ladder in enumerate(ladders):
            groups.setdefault(name_key(ladder[level[i]]), []).append(i)
        clashes = [members for members in groups.values() if len(members) > 1]
        if not clashes:
            break
        moved = False
        for members in clashes:
            for i in members:
                if level[i] < len(ladders[i]) - 1:
                    level[i] += 1
                    moved = True
        if not moved:  # the same file given twice under different spellings: keep one name, the last resort
            raise InputError(
                "these inputs are one file given twice: "
                + ", ".join(str(_origin(jobs[i])) for i in clashes[0])
            )
    for job, ladder, i in zip(jobs, ladders, level):
        job.name = ladder[i]
