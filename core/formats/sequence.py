"""Capture-bundle sequences (docs/formats.md §2.3): numbered frame bundles plus `<name>.sequence.json`.

The index is written last and atomically, so its presence means every listed frame was written completely. The
index and every frame name the run that wrote them (`run.id`); `read_sequence` refuses a sequence whose frames
come from different runs (an interrupted or partial re-run), and accepts files that name no run (version 1.0).
Reading a sequence of version-1.0 frames converts each frame's normals (see `read_bundle`) but warns once.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bundle import (
    FORMAT_VERSION,
    SEQUENCE_FORMAT_NAME,
    BundleError,
    CaptureFrame,
    check_exr_compression,
    frame_name,
    read_bundle,
    sanitize_name,
    write_bundle,
)
from .casting import HalfCast
from .documents import check_one_run, check_version, load_json, new_run_record, remove_quietly, run_id_of

__all__ = ["CaptureSequence", "SequenceWriter", "read_sequence", "write_sequence"]


class SequenceWriter:
    """Write frames one at a time (no need to hold a whole video in memory); the index is written on close."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        name: str,
        fps: float = 24.0,
        *,
        run: Mapping[str, Any] | None = None,
        compression: str | None = None,
        half: HalfCast | None = None,
    ) -> None:
        """`run`: the run record {"id", "started", …} the index and every added frame carry (a new one when not
        given), so readers can refuse a sequence whose frames come from different runs. `compression`: the
        frames' EXR compression (`bundle.EXR_COMPRESSIONS`; None: the default). `half`: the frames' float16 converter
        (`bundle.stage_bundle`)."""
        self.compression = check_exr_compression(compression)
        self.half = half
        self.folder = Path(folder)
        self.name = sanitize_name(name)
        self.fps = float(fps)
        self.run = dict(run) if run else new_run_record()
        self.entries: list[dict[str, Any]] = []

    def add(self, frame: CaptureFrame, number: int | None = None) -> Path:
        """Write the next frame (numbered from 1 unless given) and return its JSON path."""
        number = len(self.entries) + 1 if number is None else int(number)
        frame.frame = number
        # always this writer's run: a frame written before (by another writer) must not bring its old id along
        frame.run = {**(frame.run or {}), "id": self.run["id"], "started": self.run.get("started")}
        json_path = write_bundle(
            self.folder, frame_name(self.name, number), frame, compression=self.compression, half=self.half
        )
        self.record(number, json_path.name)
        return json_path

    def record(self, number: int, json_name: str) -> None:
        """List a frame bundle that was written by other means (e.g. with its previews) in the index."""
        self.entries.append({"frame": int(number), "json": str(json_name)})

    def close(self) -> Path:
        """Write `<name>.sequence.json` (atomically) and return its path."""
        doc = {
            "format": SEQUENCE_FORMAT_NAME,
            "version": FORMAT_VERSION,
            "name": self.name,
            "fps": self.fps,
            "run": {"id": self.run["id"], "started": self.run.get("started")},
            "frames": sorted(self.entries, key=lambda e: e["frame"]),
        }
        path = self.folder / f"{self.name}.sequence.json"
        tmp = self.folder / f".{self.name}.{uuid.uuid4().hex[:8]}.tmp.json"
        try:
            tmp.write_text(json.dumps(doc, indent=1), encoding="utf-8")
            os.replace(tmp, path)
        finally:
            remove_quietly(tmp)
        return path


def write_sequence(
    folder: str | os.PathLike[str],
    name: str,
    frames: Iterable[CaptureFrame],
    fps: float = 24.0,
    *,
    half: HalfCast | None = None,
) -> Path:
    """Write numbered frame bundles plus `<name>.sequence.json`; returns the index path."""
    writer = SequenceWriter(folder, name, fps, half=half)
    for frame in frames:
        writer.add(frame)
    return writer.close()


@dataclass
class CaptureSequence:
    """A sequence index; frames are read lazily (`load(i)` or iteration)."""

    path: Path
    name: str
    fps: float
    frame_numbers: list[int]
    json_paths: list[Path]
    version: str = FORMAT_VERSION
    run: str | None = (
        None  # the run id that wrote the index and every frame (None: written before runs existed)
    )
    warned: bool = field(default=False, repr=False)  # a LegacyNormalsWarning was issued for one of its frames

    def __len__(self) -> int:
        return len(self.json_paths)

    def load(self, index: int) -> CaptureFrame:
        """Read frame `index` (every frame's `notes` say what was converted; the warning comes once)."""
        frame = read_bundle(self.json_paths[index], warn=not self.warned)
        self.warned = self.warned or bool(frame.notes)
        return frame

    def __iter__(self) -> Iterator[CaptureFrame]:
        for index in range(len(self)):
            yield self.load(index)


def read_sequence(path: str | os.PathLike[str]) -> CaptureSequence:
    """Read `<name>.sequence.json`; checks that every listed frame JSON exists."""
    index_path = Path(path)
    doc = load_json(index_path, "sequence index")
    version = check_version(index_path, doc, SEQUENCE_FORMAT_NAME)
    entries = doc.get("frames")
    if not isinstance(entries, list):
        raise BundleError(f"{index_path}: 'frames' must be a list")
    numbers, paths, runs = [], [], []
    for entry in entries:
        try:
            number, json_name = int(entry["frame"]), str(entry["json"])
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{index_path}: malformed frame entry {entry!r}") from exc
        if Path(json_name).name != json_name:
            raise BundleError(f"{index_path}: frame JSON must be a plain file name, got {json_name!r}")
        frame_path = index_path.parent / json_name
        if not frame_path.is_file():
            raise BundleError(f"{index_path}: frame {number} file {json_name!r} is missing")
        numbers.append(number)
        paths.append(frame_path)
        runs.append((json_name, run_id_of(load_json(frame_path, "capture bundle JSON"))))
    check_one_run(index_path, run_id_of(doc), runs)
    try:
        fps = float(doc.get("fps", 24.0))
    except (TypeError, ValueError) as exc:
        raise BundleError(f"{index_path}: 'fps' must be a number") from exc
    name = str(doc.get("name", index_path.name.removesuffix(".sequence.json")))
    return CaptureSequence(index_path, name, fps, numbers, paths, version, run_id_of(doc))
