"""Runs, and what earlier runs left: which frames and tasks a run must (re)do, verified rather than assumed.

A *run* is one logical job with an id (`RunInfo`). Its id is recorded in every frame it commits (the bundle JSON's
`run`), in the sequence index it writes and in a sequence's partial marker while the sequence is unfinished. A run
resumed with `skip_existing` continues the id of the unfinished (or complete) sequence it finds, so the index it
finally writes still lists the frames of one run only.

A task t of frame `<name>` counts as done (verified, not just present) only when all of these hold:
- `<name>.json` is a capture bundle 1.x with a `run` record (files without one are never trusted);
- its EXR exists with exactly the size `run.files` recorded (a preview or keypoint JSON that is missing or of
  another size only makes the run write the frame's file set again, from the bundle, without a model);
- t is in `run.tasks`, and its `models` entry has the sha256 of the checkpoint this run uses for t;
- `run.settings[t]` equals this run's settings for t (pose: flip test, boxes file, box source, smoothing;
  pointmap: smoothing);
- `run.source` equals this input's identity (an image file's name, size and sha256; a video frame: the video's
  name, size, mtime and the frame number).
A frame whose `seg` must be redone also redoes pose (when its boxes come from seg) and pointmap (masked by seg),
so the layers of one frame stay consistent. Tasks the run does not ask for are carried over from the verified
bundle (unless `clean`), and previews are regenerated for the whole frame, so its file set is always one commit.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...formats.bundle import FORMAT_NAME, FORMAT_VERSION, LAYER_ENCODING
from ...formats.documents import new_run_record
from ...tasks import registry as tasks_registry
from ..errors import InputError

PARTIAL_FORMAT = "sapiens2-capture-partial"
Action = Literal["skip", "relabel", "write"]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class RunInfo:
    """A run's identity: `id` (unique, sortable by time) and when it `started` (UTC, ISO 8601)."""

    id: str
    started: str

    @classmethod
    def new(cls, run_id: str | None = None) -> RunInfo:
        """A new run (or one with the given id, e.g. a render-farm job's, shared by its chunks)."""
        record = new_run_record()
        return cls(run_id or record["id"], record["started"])

    @classmethod
    def from_record(cls, record: Any) -> RunInfo | None:
        if isinstance(record, Mapping) and isinstance(record.get("id"), str) and record["id"]:
            return cls(record["id"], str(record.get("started") or ""))
        return None

    def record(self) -> dict[str, str]:
        return {"id": self.id, "started": self.started}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def source_path(path: Path) -> str:
    """An input's path as a bundle records it: its folder's name and its own (`shot/plate_1001.png`), NFC; the
    same on every machine of a farm, whatever the mount point."""
    parent = path.resolve().parent.name
    return unicodedata.normalize("NFC", f"{parent}/{path.name}" if parent else path.name)


def image_source(path: Path) -> dict[str, Any]:
    """Identity of an image file input: name, size and the sha256 of its bytes (copies and touches keep it), and
    where it was (`path`: recorded, not part of the identity, so a moved folder of the same images is kept)."""
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "sha256": file_sha256(path),
        "path": source_path(path),
    }


def video_source(path: Path, number: int) -> dict[str, Any]:
    """Identity of frame `number` of a video: hashing a long video per frame is not worth it, so its name, size
    and mtime stand for it (a touched video is redone: the safe direction)."""
    stat = path.stat()
    return {
        "file": path.name,
        "bytes": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "frame": int(number),
        "path": source_path(path),
    }


def same_source(recorded: Any, expected: Mapping[str, Any]) -> bool:
    """Whether a bundle's `run.source` is this input's identity (`path` is where it was, not what it is)."""
    if not isinstance(recorded, Mapping):
        return False
    strip = lambda source: {k: v for k, v in source.items() if k != "path"}  # noqa: E731
    return strip(recorded) == strip(expected)


class NameClashError(InputError):
    """A run would write one input's results under a name that holds another input's results."""


def recorded_source(folder: Path, name: str) -> dict[str, Any] | None:
    """The `run.source` the bundle JSON `<name>.json` in `folder` records, if it is a bundle that records one."""
    try:
        doc = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    run = doc.get("run") if isinstance(doc, dict) else None
    source = run.get("source") if isinstance(run, dict) else None
    return source if isinstance(source, dict) and isinstance(source.get("file"), str) else None


def check_source(folder: Path, name: str, path: Path) -> None:
    """Refuse (NameClashError, naming both) to write the results of input `path` as `<name>` when the bundle
    there was made from another input: another file name, or another folder and other bytes. The same file
    edited in place, or the same bytes moved to another folder, is the same input (its results are replaced or
    kept as `--skip-existing` decides)."""
    recorded = recorded_source(folder, name)
    if recorded is None:
        return
    nfc = lambda text: unicodedata.normalize("NFC", str(text))  # noqa: E731
    other_name = nfc(recorded["file"]) != nfc(path.name)
    other_place = "path" in recorded and nfc(recorded["path"]) != source_path(path)
    if other_place and not other_name:  # the same name elsewhere: the same input only if the same bytes
        other_place = recorded.get("bytes") != path.stat().st_size or (
            "sha256" in recorded and recorded["sha256"] != file_sha256(path)
        )
    if other_name or other_place:
        was = recorded.get("path") or recorded["file"]
        raise NameClashError(
            f"{path} would be written as {name!r} in {folder}, which holds the results of another input, {was}; "
            "nothing was written. Move those results away (or delete them), or write into another output folder",
            hints={
                "cli": "pass another --out, or move the old results away",
                "python": "use another out folder",
            },
        )


@dataclass(frozen=True)
class Expectation:
    """What this run produces for one frame, to compare an existing bundle against.

    `settings(task, tasks_held)` is given the tasks the frame will hold, since pose's box source depends on
    whether seg is among them."""

    tasks: tuple[str, ...]
    checkpoints: Mapping[str, str | None]  # task → sha256 of the file this run uses
    source: Mapping[str, Any]
    settings: Mapping[str, Mapping[str, Any]]
    outputs: Mapping[str, Any]  # {"previews": bool, "mesh": "ply" | "glb" | None, "exr_compression": str}
    boxes_given: bool = False
    skip_existing: bool = False
    clean: bool = False
    trusted_run: str | None = None  # only this run's committed frames verify (a retried distributed unit)

    def task_settings(self, task: str, held: set[str]) -> dict[str, Any]:
        settings = dict(self.settings.get(task, {}))
        if tasks_registry.has(task):
            settings.update(tasks_registry.get(task).held_settings(held, self.boxes_given))
        return settings


def in_run_order(tasks: set[str]) -> tuple[str, ...]:
    """`tasks` in the registry's run order; tasks it does not know (a frame's plug-in task whose plug-in is not
    loaded now, carried as it is) after them, by name."""
    known = tuple(t for t in tasks_registry.run_order() if t in tasks)
    return (*known, *sorted(set(tasks) - set(known)))


@dataclass
class FramePlan:
    """What to do with one frame: `skip` (done and of this run), `relabel` (done, but committed by another run:
    rewrite its JSON only), or `write` (compute `compute`, carry `carry` over from `doc`, commit the whole set)."""

    name: str
    action: Action
    compute: tuple[str, ...]
    carry: tuple[str, ...] = ()
    doc: dict[str, Any] | None = None
    reason: str = ""
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks the frame holds after this plan, in run order."""
        held = set(self.compute) | set(self.carry)
        return in_run_order(held)


def committed_bundle(folder: Path, name: str) -> tuple[dict[str, Any] | None, str]:
    """The bundle JSON of `<name>` if it is a committed frame whose every file verifies (module docstring), else
    (None, why not)."""
    doc, why, sidecars_ok = bundle_state(folder, name)
    return (doc, why) if sidecars_ok else (None, why)


def bundle_state(folder: Path, name: str) -> tuple[dict[str, Any] | None, str, bool]:
    """(bundle JSON or None, why not, whether the files beside the bundle verify too).

    The data (JSON + EXR) and the derived files are judged apart: a missing or truncated preview only means the
    file set must be written again (from the bundle, no model needed); a damaged EXR means the frame is not there."""
    path = folder / f"{name}.json"
    if not path.is_file():
        return None, "not written yet", False
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None, "its bundle JSON is damaged", False
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        return None, "its JSON is not a capture bundle", False
    if not str(doc.get("version", "")).startswith("1."):
        return None, f"bundle version {doc.get('version')!r} is not 1.x", False
    run = doc.get("run")
    if not isinstance(run, dict) or not isinstance(run.get("files"), dict) or not run.get("id"):
        return None, "written by a version that records no run", False
    exr = f"{name}.exr"
    if exr not in run["files"]:
        return None, "its file list has no EXR", False
    why = ""
    for file_name, size in run["files"].items():
        if not isinstance(file_name, str) or Path(file_name).name != file_name:
            return None, "its file list is malformed", False
        try:
            actual = (folder / file_name).stat().st_size
        except OSError:
            actual = None
        if actual != size:
            why = (
                f"{file_name} is missing"
                if actual is None
                else f"{file_name} has {actual} bytes, {size} committed"
            )
            if file_name == exr:
                return None, why, False
    return doc, why, not why


def _exr_compression(outputs: Mapping[str, Any]) -> str:
    """The EXR compression `run.outputs` records; frames from before it was a choice hold the default."""
    return str(outputs.get("exr_compression") or LAYER_ENCODING.compression)


def _model_sha(doc: Mapping[str, Any], task: str) -> str | None:
    for model in doc.get("models") or []:
        if isinstance(model, dict) and model.get("task") == task:
            return model.get("sha256")
    return None


def is_pending(doc: Mapping[str, Any] | None) -> bool:
    """Whether a bundle JSON is a raw frame whose temporal pass is still to run (`run.temporal.state`)."""
    run = (doc or {}).get("run")
    temporal = run.get("temporal") if isinstance(run, Mapping) else None
    return isinstance(temporal, Mapping) and temporal.get("state") == "pending"


def plan_frame(
    folder: Path,
    name: str,
    expect: Expectation,
    run_id: str | None = None,
    *,
    accept_pending: bool = False,
) -> FramePlan:
    """Decide what to do with frame `<name>` (rules in the module docstring). `run_id`: the run a sequence's
    frames must carry (a verified frame of another run is relabelled); None for single images.
    `accept_pending`: a raw frame whose temporal pass is pending counts as done (a chunk or a distributed
    worker, whose frames finalize completes); otherwise it is computed again (the local engine runs the pass
    itself)."""
    requested = set(expect.tasks)
    doc, why, sidecars_ok = bundle_state(folder, name)
    run = (doc or {}).get("run") or {}
    if doc is not None and not same_source(run.get("source"), expect.source):
        doc, why = None, "it was made from another input"
    if doc is not None and is_pending(doc) and not (accept_pending and run.get("id") == run_id):
        doc, why = None, "its temporal pass is pending (a chunk of another run made it)"
    existing = {str(t) for t in run.get("tasks", [])} if doc is not None else set()  # plug-ins not loaded too
    held = requested | (set() if expect.clean else existing)
    settings = {t: expect.task_settings(t, held) for t in held}
    verified: set[str] = set()
    trusted = expect.trusted_run is None or run.get("id") == expect.trusted_run
    if expect.skip_existing and doc is not None and trusted:
        stored = run.get("settings") or {}
        for task in requested & existing:
            if _model_sha(doc, task) != expect.checkpoints.get(task):
                continue
            if stored.get(task) != settings[task]:
                continue
            verified.add(task)
    compute = requested - verified
    # layers made from another's results are redone with it (module docstring: pose's boxes and the pointmap's
    # mask follow seg)
    computed = set(compute)
    compute |= {
        t
        for t in requested
        if tasks_registry.has(t) and tasks_registry.get(t).follows(computed, expect.boxes_given)
    }
    carry = (verified - compute) | (set() if expect.clean else existing - requested)
    ordered = in_run_order(compute)
    carried = in_run_order(carry)
    outputs = run.get("outputs") or {}
    outputs_ok = sidecars_ok and (
        (outputs.get("previews") or not expect.outputs.get("previews"))
        and (not expect.outputs.get("mesh") or outputs.get("mesh") == expect.outputs.get("mesh"))
        and _exr_compression(outputs) == _exr_compression(expect.outputs)
    )
    plan_settings = {t: settings[t] for t in held if t in compute or t in carry}
    for task in carried:  # a carried task keeps the settings it was made with
        plan_settings[task] = (run.get("settings") or {}).get(task, settings[task])
    if doc is not None and not ordered and carry == existing and outputs_ok:
        if run_id is not None and run.get("id") != run_id:
            return FramePlan(
                name, "relabel", (), carried, doc, "verified, committed by another run", plan_settings
            )
        return FramePlan(name, "skip", (), carried, doc, "verified", plan_settings)
    if doc is None and not expect.skip_existing:
        why = ""
    reason = why or ("redo " + ",".join(ordered) if ordered else "rewrite the file set")
    return FramePlan(name, "write", ordered, carried, doc, reason, plan_settings)


def frame_run_record(
    run: RunInfo,
    plan: FramePlan,
    source: Mapping[str, Any],
    outputs: Mapping[str, Any],
) -> dict[str, Any]:
    """The bundle's `run` object for a commit of `plan` (its `files` are added by the transaction)."""
    previous = ((plan.doc or {}).get("run") or {}).get("task_runs") or {}
    task_runs = {t: (run.id if t in plan.compute else previous.get(t, "unknown")) for t in plan.tasks}
    return {
        **run.record(),
        "committed": _now(),
        "tasks": list(plan.tasks),
        "computed": list(plan.compute),
        "task_runs": task_runs,
        "settings": {t: plan.settings.get(t, {}) for t in plan.tasks},
        "source": dict(source),
        "outputs": dict(outputs),
    }


def relabelled(doc: Mapping[str, Any], run: RunInfo) -> dict[str, Any]:
    """A verified frame's JSON, now listed under `run` (its files, tasks and provenance unchanged)."""
    out = json.loads(json.dumps(doc))
    out["run"].update({**run.record(), "committed": _now(), "computed": []})
    return out


def sequence_run(folder: Path, name: str, default: RunInfo, *, skip_existing: bool) -> RunInfo:
    """The run a sequence's frames must carry: with `skip_existing`, the run of its unfinished attempt (partial
    marker) or, failing that, of its complete index; otherwise `default` (a new run)."""
    if not skip_existing:
        return default
    for path in (folder / f"{name}.partial.json", folder / f"{name}.sequence.json"):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        found = RunInfo.from_record(doc.get("run")) if isinstance(doc, dict) else None
        if found is not None:
            return found
    return default


def partial_marker(
    name: str,
    run: RunInfo,
    tasks: Sequence[str],
    frames: int | None,
    *,
    numbers: Sequence[int] | None = None,
    fps: float | None = None,
) -> dict[str, Any]:
    """`<name>.partial.json`: written before a sequence's first commit, removed after its index is written.
    `numbers` (chunks of a render-farm job): every frame number the finished sequence holds, so finalize can
    tell a missing chunk; `fps`: its frame rate, for the index finalize writes."""
    extra: dict[str, Any] = {}
    if numbers is not None:
        extra["numbers"] = [int(n) for n in numbers]
    if fps is not None:
        extra["fps"] = float(fps)
    return {
        **extra,
        "format": PARTIAL_FORMAT,
        "version": FORMAT_VERSION,
        "name": name,
        "run": {**run.record(), "tasks": list(tasks)},
        "frames": frames,
        "message": f"sequence {name!r} is incomplete: run {run.id} has not finished it (stopped or still running). "
        "Its frames may come from different runs and there is no index. Run the same command again with "
        "--skip-existing to complete it.",
    }


class ShotError(InputError):
    """A farm chunk does not fit the shot its folder holds: another run's, or frames of the shot it cannot see."""


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def shot_numbers(
    folder: Path,
    name: str,
    run_id: str,
    visible: Sequence[int],
    *,
    explicit: tuple[int, int] | None = None,
    take_over: bool = False,
) -> list[int]:
    """The frame list of a farm shot (sequence `name` in `folder`), fixed when the shot is first planned: the
    frames `explicit` gives (FIRST-LAST, every number), else those of its partial marker or of its index (a
    finalized shot re-queued), else the frames this chunk sees. A chunk never shrinks or rewrites the list from
    what it happens to see (a machine that misses part of the plate); a marker or index of another run id is
    refused (ShotError) unless `take_over`, when the list is planned anew."""
    marker = _read_json(folder / f"{name}.partial.json")
    index = _read_json(folder / f"{name}.sequence.json")
    for doc, what in ((marker, "its chunks' marker"), (index, "its index")):
        if doc is None:
            continue
        owner = (doc.get("run") or {}).get("id") if isinstance(doc.get("run"), dict) else None
        if owner and owner != run_id and not take_over:
            raise ShotError(
                f"{folder}: sequence {name!r} belongs to run {owner} ({what}), not {run_id}; a chunk of another "
                f"run would replace its frame list. Use --run-id {owner}, or take the shot over on purpose "
                "(--take-over)",
                hints={
                    "cli": f"pass --run-id {owner}, or --take-over to start the shot anew under {run_id}",
                    "python": f"JobSpec(run_id={owner!r}), or take_over=True",
                },
            )
        if owner and owner != run_id:
            break  # taken over: planned anew below
        if doc is marker and marker.get("numbers") is not None:
            fixed = sorted(int(n) for n in marker["numbers"])
            return _with_explicit(fixed, explicit, folder, name)
        if doc is index and isinstance(index.get("frames"), list):
            fixed = sorted(int(f["frame"]) for f in index["frames"] if isinstance(f, dict) and "frame" in f)
            if fixed:
                return _with_explicit(fixed, explicit, folder, name)
    if explicit is not None:
        return list(range(explicit[0], explicit[1] + 1))
    return sorted(int(n) for n in visible)


def _with_explicit(fixed: list[int], explicit: tuple[int, int] | None, folder: Path, name: str) -> list[int]:
    if explicit is not None and fixed != list(range(explicit[0], explicit[1] + 1)):
        raise ShotError(
            f"{folder}: sequence {name!r} was planned with frames {fixed[0]}-{fixed[-1]} ({len(fixed)}), not "
            f"{explicit[0]}-{explicit[1]}; a shot's frame list is fixed when it is first planned",
            hints={"cli": "give the same --shot-frames as its first chunk, or --take-over to plan it anew"},
        )
    return fixed


def frame_ranges(numbers: list[int]) -> str:
    """1, 2, 3, 7 → "1-3, 7"."""
    parts: list[str] = []
    for n in sorted(numbers):
        if parts and parts[-1][1] == n - 1:
            parts[-1] = (parts[-1][0], n)  # type: ignore[assignment]
        else:
            parts.append((n, n))  # type: ignore[arg-type]
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)  # type: ignore[misc]
