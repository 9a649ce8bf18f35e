"""A checkpoint run with `runtime="onnxruntime"`: exported once, kept beside the checkpoints, reused.

The file name carries the checkpoint's fingerprint (path, size, mtime), so a replaced checkpoint exports again
and an unchanged one never does.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .export import export_onnx


def exported_path(checkpoint: Path, dtype: str, folder: Path, fingerprint: str) -> Path:
    """Where the export of `checkpoint` in `dtype` is kept."""
    tag = hashlib.sha256(fingerprint.encode()).hexdigest()[:12]
    return folder / f"{checkpoint.stem}.{dtype}.{tag}.onnx"


def ensure_exported(
    checkpoint: str | os.PathLike, *, task: str | None, dtype: str, folder: Path, fingerprint: str
) -> tuple[Path, bool]:
    """The cached export of `checkpoint` (made now when missing) and whether it was made now."""
    source = Path(checkpoint)
    target = exported_path(source, dtype, folder, fingerprint)
    if target.is_file():
        return target, False
    export_onnx(source, target, task=task, dtype=dtype, overwrite=True)
    return target, True
