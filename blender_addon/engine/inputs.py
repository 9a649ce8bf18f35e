"""Which files the engine gets for what the user picked: one image, a numbered image sequence (optionally a range of
its frame numbers), a video, or a folder. No ``bpy`` here: the panel resolves Blender data to a path first.

The CLI treats numbered files given together as one sequence (docs/cli.md, "Inputs"), so a frame range of an
image sequence is passed as exactly the files in range; the CLI's own ``--frames`` is a render-farm chunk that
needs ``finalize`` over the whole shot, which is not what a range picked in Blender means.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".mov", ".avi", ".mkv", ".webm", ".m4v")
_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<number>\d+)$")


class InputChoiceError(ValueError):
    """What the user picked cannot be predicted on; the message says what to pick instead."""


@dataclass(frozen=True)
class EngineInput:
    """The paths to pass to ``sapiens2 predict`` and what they are (for the panel and the import)."""

    kind: str  # "image", "sequence", "video" or "folder"
    paths: tuple[str, ...]
    frames: int | None  # None: a video or a folder (the engine counts)


def numbered_siblings(first: Path) -> list[tuple[int, Path]]:
    """(number, file) of every file beside `first` that shares its name up to the trailing number and its
    extension, in number order; [] when `first` has no trailing number."""
    match = _NUMBERED.match(first.stem)
    if match is None or not first.parent.is_dir():
        return []
    prefix, ext = match.group("prefix"), first.suffix.lower()
    found = []
    for path in first.parent.iterdir():
        if not path.is_file() or path.suffix.lower() != ext:
            continue
        m = _NUMBERED.match(path.stem)
        if m is not None and m.group("prefix") == prefix:
            found.append((int(m.group("number")), path))
    return sorted(found)


def resolve(path: str | os.PathLike, *, sequence: bool = True, first: int | None = None,
            last: int | None = None) -> EngineInput:  # fmt: skip
    """The engine input for `path`: a video, a folder, an image or (with `sequence` and numbered siblings) the
    whole numbered sequence it belongs to, limited to frame numbers `first`..`last` when given."""
    p = Path(os.path.expanduser(os.fspath(path)))
    if not os.fspath(path):
        raise InputChoiceError("no input chosen: pick a movie clip, an image or a file")
    if p.is_dir():
        return EngineInput("folder", (str(p),), None)
    if not p.is_file():
        raise InputChoiceError(f"{p} does not exist (was it moved? pick it again)")
    ext = p.suffix.lower()
    if ext in VIDEO_EXTENSIONS:
        if first is not None or last is not None:
            raise InputChoiceError(
                f"{p.name}: a frame range of a video is not supported from Blender yet; predict the whole clip, or "
                "extract its frames to numbered images (ffmpeg -i clip.mp4 frames/clip_%04d.png) and pick those"
            )
        return EngineInput("video", (str(p),), None)
    if ext not in IMAGE_EXTENSIONS:
        raise InputChoiceError(f"{p.name} is not an image or video the engine reads ({', '.join(IMAGE_EXTENSIONS)}, "
                               f"{', '.join(VIDEO_EXTENSIONS)})")  # fmt: skip
    siblings = numbered_siblings(p) if sequence else []
    if len(siblings) < 2:
        return EngineInput("image", (str(p),), 1)
    chosen = [f for n, f in siblings if (first is None or n >= first) and (last is None or n <= last)]
    if not chosen:
        lo, hi = siblings[0][0], siblings[-1][0]
        raise InputChoiceError(
            f"no frames of {p.parent.name}/{p.name}'s sequence in {first}-{last}; it has {lo}-{hi}"
        )
    if len(chosen) == 1:  # one numbered file on its own is an ordinary image to the engine
        return EngineInput("image", (str(chosen[0]),), 1)
    return EngineInput("sequence", tuple(str(f) for f in chosen), len(chosen))
