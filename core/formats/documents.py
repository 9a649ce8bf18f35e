"""The JSON documents of the bundle format: reading them with clear errors, version checks, tidy temporaries.

Shared by the frame bundle (`bundle.py`) and the sequence index (`sequence.py`), so neither reaches into the
other's internals.
"""

from __future__ import annotations

import contextlib
import json
import re
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
