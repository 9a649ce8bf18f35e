"""Results in the output folder whose input is gone: found before a run, kept and reported, removed only on request.

Why: an input that is only temporarily away (a frame moved aside, a folder not mounted yet, an image renamed) must
not cost its results. A run therefore never deletes what it did not write; it names these results *orphaned* in
its summary, and only `clean` (the CLI's `--clean`) removes them, under the output folder's lock.

A single image's bundle is orphaned when the input folder it came from (its recorded `run.source.path`, a folder
this run reads) no longer holds its file, or holds it under another output name now (a name clash moved it,
`inputs.name_candidates`). A sequence frame is orphaned when its sequence's inputs no longer have its number.
Bundles of inputs this run does not read (other folders, files given one by one) are none of its business.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...formats.bundle import FORMAT_NAME
from ..sources.inputs import ImageJob, SequenceJob
from .outputs import remove_outputs
from .resume import recorded_source, source_path


@dataclass(frozen=True)
class Orphan:
    """Results `<folder>/<name>.*` kept although their input is gone; `why` says what became of it."""

    folder: Path
    name: str
    why: str

    @property
    def label(self) -> str:
        return f"{self.folder.name}/{self.name}" if self.why.startswith("frame") else self.name


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _image_orphans(out: Path, jobs: Sequence[ImageJob | SequenceJob]) -> list[Orphan]:
    images = [j for j in jobs if isinstance(j, ImageJob)]
    if not images or not out.is_dir():
        return []
    folders: dict[str, list[Path]] = {}
    for job in images:
        parent = job.path.resolve().parent
        if parent not in folders.setdefault(_nfc(parent.name), []):
            folders[_nfc(parent.name)].append(parent)
    named = {source_path(j.path): j.name for j in images}
    found = []
    for path in sorted(out.glob("*.json")):
        name = path.name[: -len(".json")]
        if name.endswith((".keypoints", ".openpose")) or name in named.values():  # a sidecar, or written now
            continue
        source = recorded_source(out, name)
        where = _nfc(str((source or {}).get("path", "")))
        if "/" not in where or not _is_bundle(path):
            continue
        parent, file = where.rsplit("/", 1)
        for folder in folders.get(parent, []):
            if not (folder / file).exists():
                found.append(Orphan(out, name, f"its input {where} is missing"))
            elif where in named:
                found.append(Orphan(out, name, f"its input {where} is now written as {named[where]!r}"))
            break
    return found


def _is_bundle(path: Path) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("format") == FORMAT_NAME
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False


def _frame_orphans(out: Path, job: SequenceJob) -> list[Orphan]:
    folder = out / job.name
    if job.video is not None or not folder.is_dir():
        return []  # a video's frames are all there or the video is (its count is not read before the run)
    pattern = re.compile(rf"^{re.escape(job.name)}_(\d{{4,}})\.json$")
    numbers = set(job.frame_numbers() or [])
    found = []
    for path in sorted(folder.iterdir()):
        match = pattern.match(path.name)
        if match and int(match.group(1)) not in numbers and _is_bundle(path):
            found.append(Orphan(folder, path.stem, f"frame {int(match.group(1))} is not among the inputs"))
    return found


def find_orphans(out: Path, jobs: Sequence[ImageJob | SequenceJob]) -> list[Orphan]:
    """Every result in `out` of this run's inputs whose input is gone (module docstring), in name order."""
    found = _image_orphans(Path(out), jobs)
    for job in jobs:
        if isinstance(job, SequenceJob):
            found += _frame_orphans(Path(out), job)
    return found


def remove_orphans(orphans: Sequence[Orphan]) -> None:
    """Delete the results of `orphans` (asked for: `clean`); the JSON first, as `outputs.remove_outputs` does."""
    for orphan in orphans:
        remove_outputs(orphan.folder, orphan.name)
