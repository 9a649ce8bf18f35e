"""`finalize`: the temporal pass of sequences whose frames were committed raw (render-farm chunks, distributed
workers), in frame order over the frames read back from disk, then each sequence's index.

The chunks of a farm job (`JobSpec.frames`) commit every frame with `run.temporal.state = "pending"` and leave
the sequence's `<name>.partial.json` marker listing every frame number the finished sequence holds. Finalize,
under the folder's exclusive lock:

1. checks every listed frame is there, verified, of the marker's run (else refuses, naming the frames), before it
   changes anything;
2. drives `temporal.SequencePass` over the frames in frame order exactly as the local engine does right before
   each commit (track ids, One-Euro keypoints, the pointmap scale's average with points and camera rescaled), so
   the numbers equal one full local run's — the raw frames are canonical (`stages.canonical_frame`);
3. recommits each pending frame through one transaction (`outputs.rewrite_frame_outputs`): the JSON, the EXR's
   pointmap channels and the files the pass changes (pose and depth previews, keypoint JSONs, mesh) anew, the
   rest kept as committed; then writes the index and removes the marker.

Frames already finalized (e.g. by a finalize that was stopped) are taken as committed and continue the pass.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...formats.bundle import read_bundle
from ...formats.errors import BundleError
from ...formats.sequence import SequenceWriter
from ...tasks import registry as tasks_registry
from ..compute.sequence_pass import SequencePass
from ..errors import FinalizeError, InputError, OutputError
from ..runtime.host import Host
from ..store.output_store import OutputStore
from ..store.outputs import frame_files, rewrite_frame_outputs
from ..store.remote import RemoteOutput, is_remote, local_path
from ..store.resume import PARTIAL_FORMAT, bundle_state, frame_ranges, is_pending
from ..store.transaction import pause_point
from .stages import PENDING_SUFFIX, load_pending_arrays

CHANGED_SUFFIXES = (".pose.png", ".depth.png", ".keypoints.json", ".openpose.json", ".ply", ".glb")


@dataclass
class FinalizeReport:
    """What finalize did: sequences indexed, frames passed, notes."""

    out: Path
    sequences: list[str] = field(default_factory=list)
    finalized: int = 0  # pending frames passed and recommitted
    kept: int = 0  # frames already through a pass
    published: str | None = None  # the output URL (`out` is then its staging folder)
    notes: list[str] = field(default_factory=list)


def chunk_markers(out: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(sequence folder, partial marker) for every sequence under `out` left by chunks (a marker with numbers)."""
    found = []
    for marker in sorted(Path(out).glob("*/*.partial.json")):
        try:
            doc = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("format") == PARTIAL_FORMAT and doc.get("numbers") is not None:
            found.append((marker.parent, doc))
    return found


def finalized_sequences(out: Path, only: Collection[str] | None = None) -> list[str]:
    """Sequences under `out` that finalize already completed: an index, no chunk marker, every frame it lists
    committed and through the pass (so finalizing again would write the same index)."""
    done = []
    for index in sorted(Path(out).glob("*/*.sequence.json")):
        name = index.name[: -len(".sequence.json")]
        if (only is not None and name not in only) or (index.parent / f"{name}.partial.json").exists():
            continue
        try:
            doc = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        entries = doc.get("frames") if isinstance(doc, dict) else None
        if not isinstance(entries, list) or not entries:
            continue
        states = [bundle_state(index.parent, str(e.get("json", ""))[: -len(".json")]) for e in entries]
        if all(d is not None and not is_pending(d) for d, _, _ in states):
            done.append(name)
    return done


def check_sequence(folder: Path, marker: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """(number, name, JSON) of every frame the marker lists, in frame order; FinalizeError when one is missing,
    damaged or of another run than the marker's."""
    name = str(marker.get("name"))
    run_id = (marker.get("run") or {}).get("id")
    numbers = sorted(int(n) for n in marker.get("numbers") or [])
    missing: list[int] = []
    damaged: list[str] = []
    foreign: dict[str, list[int]] = {}
    frames = []
    for number in numbers:
        frame_name = f"{name}_{number:04d}"
        doc, why, _ = bundle_state(folder, frame_name)
        if doc is None and why == "not written yet":
            missing.append(number)
            continue
        if doc is None:
            damaged.append(f"{number} ({why})")
            continue
        other = (doc.get("run") or {}).get("id")
        if other != run_id:
            foreign.setdefault(str(other), []).append(number)
            continue
        frames.append((number, frame_name, doc))
    problems = []
    if missing:
        problems.append(f"{len(missing)} frame(s) missing: {frame_ranges(missing)}")
    if damaged:
        problems.append(f"damaged: {', '.join(damaged)}")
    for other, nums in sorted(foreign.items()):
        problems.append(f"frames {frame_ranges(nums)} come from run {other}, not {run_id}")
    if problems:
        raise FinalizeError(f"{folder}: sequence {name!r} cannot be finalized — " + "; ".join(problems))
    return frames


def finalize(
    out: str | Path,
    *,
    smooth: bool | None = None,
    host: Host | None = None,
    on_frame: Callable[[str], Any] | None = None,
    sequences: Collection[str] | None = None,
    locked: bool = False,
    staging: str | os.PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> FinalizeReport:
    """Run the temporal pass over the pending frames of every chunked sequence in `out` and write their indexes
    (module docstring). `smooth`: None keeps what the chunks recorded; True/False overrides it. `sequences`:
    only these (a distributed run's driver finalizes its own); `locked`: the caller holds the folder's exclusive
    lock and has recovered what killed writers left (`output_store.recover_left_overs`). An output URL (`remote.py`): what
    the chunks published is fetched into `staging`, finalized there and published again, while no chunk runs."""
    if is_remote(out):
        remote = RemoteOutput(os.fspath(out), staging, storage_options)
        remote.check()
        with remote.mirrored(None):  # exclusive: no chunk may still be writing there
            report = finalize(
                remote.staging, smooth=smooth, host=host, on_frame=on_frame, sequences=sequences
            )
        report.published = remote.url
        return report
    out = local_path(out)
    host = host or Host()
    report = FinalizeReport(out)
    markers = chunk_markers(out)
    if sequences is not None:
        markers = [(f, m) for f, m in markers if m.get("name") in sequences]
    if not markers and (done := finalized_sequences(out, sequences)):  # a re-queued finalize: nothing to do
        report.sequences = done
        report.notes.append(f"already finalized: {', '.join(done)} (the index stands as it was)")
        return report
    if not markers:
        raise InputError(
            f"{out}: no sequence waits for finalize (no <name>.partial.json left by chunks with --frames)",
            hints={"cli": "finalize the folder the chunks wrote into (their --out)"},
        )
    runs = {(m.get("run") or {}).get("id") for _, m in markers}
    run_id = str(sorted(runs, key=str)[0])
    # the caller's lock (a distributed run's driver), else the store's: exclusive, what killed writers left completed
    opened = OutputStore(out).opened(run_id if len(runs) == 1 else "finalize", host)
    with contextlib.nullcontext() if locked else opened:
        checked = [(folder, marker, check_sequence(folder, marker)) for folder, marker in markers]
        for folder, marker, frames in checked:  # every sequence checked before any changes
            _finalize_sequence(folder, marker, frames, smooth, report, on_frame)
    report.notes = list(host.notes)
    return report


def _finalize_sequence(
    folder: Path,
    marker: dict[str, Any],
    frames: list[tuple[int, str, dict[str, Any]]],
    smooth: bool | None,
    report: FinalizeReport,
    on_frame: Callable[[str], Any] | None,
) -> None:
    name = str(marker["name"])
    run = marker.get("run") or {}
    recorded = [
        ((doc.get("run") or {}).get("temporal") or {}).get("smooth")
        for _, _, doc in frames
        if is_pending(doc)
    ]
    use_smooth = smooth if smooth is not None else bool(recorded and all(recorded))
    fps = float(marker.get("fps") or 24.0)
    passer = SequencePass(fps, smooth=use_smooth)
    writer = SequenceWriter(folder, name, fps, run={"id": run.get("id"), "started": run.get("started")})
    for number, frame_name, doc in frames:
        if not is_pending(doc):
            passer.kept(doc)
            report.kept += 1
        else:
            _pass_frame(folder, frame_name, doc, passer, use_smooth)
            report.finalized += 1
        writer.record(number, f"{frame_name}.json")
        if on_frame is not None:
            on_frame(f"{name} #{number}")
    pause_point("index")
    writer.close()
    with contextlib.suppress(FileNotFoundError):
        (folder / f"{name}.partial.json").unlink()
    report.sequences.append(name)


def _pass_frame(folder: Path, name: str, doc: dict[str, Any], passer: SequencePass, smooth: bool) -> None:
    """One pending frame: read back, through the pass, recommitted (module docstring, step 3)."""
    try:
        frame = read_bundle(folder / f"{name}.json", warn=False)
    except BundleError as exc:
        raise OutputError(f"{folder / name}: its bundle changed while finalize read it ({exc})") from None
    record = dict(doc.get("run") or {})
    temporal = dict(record.pop("temporal", None) or {})
    computed = list(temporal.get("computed") or [])
    old_scale, old_points = frame.pointmap_scale, frame.points
    passed = passer.computed(frame, computed)
    if passed is not None:
        record["temporal"] = passed  # its raw inputs, so that a later resume can replay the frame
    points_changed = frame.pointmap_scale != old_scale and old_points is not None
    settings = record.get("settings") or {}
    for task in tasks_registry.all_tasks():  # the settings of what the pass changes now say what it did
        if task.temporal and "smooth" in settings.get(task.name, {}):
            settings[task.name] = {**settings[task.name], "smooth": smooth}
    record.pop("files", None)
    frame.run = record
    arrays = load_pending_arrays(folder / f"{name}{PENDING_SUFFIX}")
    if "normals" in arrays:
        frame.normals = arrays["normals"]
    image = arrays.get("image")
    outputs = record.get("outputs") or {}
    have = {p.name for p in folder.glob(f"{name}.*")}
    files = frame_files(
        frame,
        image if image is not None else np.zeros((frame.height, frame.width, 3), np.uint8),
        name,
        with_previews=bool(outputs.get("previews", True)),
        mesh_format=outputs.get("mesh"),
    )
    changed: dict[str, Any] = {}
    for final, write in files.items():
        if not final.endswith(CHANGED_SUFFIXES):
            continue
        needs_image = final.endswith((".pose.png", ".ply", ".glb"))
        if needs_image and image is None:
            continue  # unchanged by the pass (no smoothing): the committed file stays
        if final.endswith((".depth.png", ".ply", ".glb")) and not points_changed:
            continue
        changed[final] = write
    keep = {n for n in have if n not in changed and n != f"{name}.json" and n != f"{name}.exr"}
    keep.discard(f"{name}{PENDING_SUFFIX}")
    keep = {n for n in keep if not n.startswith(".")}
    rewrite_frame_outputs(folder, name, frame, changed, points_changed=points_changed, keep=keep)
