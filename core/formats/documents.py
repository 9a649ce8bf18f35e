"""The JSON documents of the bundle format: reading them with clear errors, version checks, tidy temporaries.

Shared by the frame bundle (`bundle.py`) and the sequence index (`sequence.py`), so neither reaches into the
other's internals.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import BundleError

MAJOR = 1  # the major version this reader understands; newer majors are refused


def remove_quietly(path: Path) -> None:
    """Delete a file that may not exist (a temporary after a failed write)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def load_json(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from `path`; BundleError naming the file for a missing, broken or non-object document."""
    if not path.is_file():
        raise BundleError(f"{path}: {what} not found")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise BundleError(f"{path}: expected a JSON object at the top level")
    return doc


def check_version(path: Path, doc: dict[str, Any], expected_format: str) -> str:
    """The document's version if this reader can read it; BundleError for another format or a newer major."""
    if doc.get("format") != expected_format:
        raise BundleError(f"{path}: 'format' is {doc.get('format')!r}, expected {expected_format!r}")
    version = str(doc.get("version", ""))
    match = re.fullmatch(r"(\d+)\.(\d+)", version)
    if not match:
        raise BundleError(f"{path}: 'version' must look like '1.0', got {version!r}")
    if int(match.group(1)) > MAJOR:
        raise BundleError(
            f"{path}: bundle version {version} was written by a newer Sapiens2 Studio; this reader supports "
            f"version {MAJOR}.x. Update sapiens2-studio (pip install -U sapiens2-studio)."
        )
    return version


def new_run_record() -> dict[str, str]:
    """A fresh run identity {"id", "started"}: the id sorts by start time and is unique (a random tail)."""
    now = dt.datetime.now(dt.UTC)
    return {
        "id": f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}",
        "started": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def run_id_of(doc: dict[str, Any]) -> str | None:
    """The run id a frame bundle or sequence index names (None for files written before runs were recorded)."""
    run = doc.get("run")
    value = run.get("id") if isinstance(run, dict) else None
    return value if isinstance(value, str) and value else None


def check_one_run(index: Path, index_run: str | None, frames: Sequence[tuple[str, str | None]]) -> None:
    """BundleError unless the index and all its frames (file name, run id) name one run; files that name no run
    (version 1.0, or written before runs were recorded) pass only when none of them names one."""
    ids = {run for _, run in frames} | ({index_run} if index_run is not None or not frames else set())
    if len(ids) <= 1:
        return
    by_run: dict[str | None, str] = {}
    for name, run in frames:
        by_run.setdefault(run, name)
    if index_run is not None and index_run not in by_run:
        by_run[index_run] = index.name
    shown = "; ".join(
        f"{name} from {'an older writer (no run id)' if run is None else 'run ' + run}"
        for run, name in list(by_run.items())[:3]
    )
    raise BundleError(
        f"{index}: its frames come from different runs ({shown}): the sequence was re-run or interrupted part-way "
        "and mixes results. Run it again to get one consistent sequence (an interrupted run completes with "
        "--skip-existing)"
    )
