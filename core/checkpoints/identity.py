"""One checkpoint's identity, worked out once: which file (path, size, mtime), what its header says (the inferred
architecture, its size and task, checked against every tensor's shape), its official name if any, and its sha256.

Why: a job used to read a checkpoint's header three or four times (the asked-size check, the plan's task check,
the loader's meta pass and its real load) and to look its sha256 up twice (the skip-existing expectation and the
bundle's `models` entry). Now the plan makes one `CheckpointIdentity` per file and every consumer reads it: the
task check (`require_task`), the size checks (`size_contradiction`), the loader (`loader.load_identity` fills
weights from the parsed header without parsing it again) and the run records (`sha256`, hashed at most once per
identity, through the hub's on-disk hash cache). The error messages are the loader's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..arch.config import ModelConfig
from ..arch.model import ModelSpec
from ..catalogue import parse_official_name
from . import hub
from .errors import CheckpointError
from .reader import SafetensorsReader

__all__ = ["CheckpointIdentity", "identify", "identify_file"]


@dataclass(frozen=True, eq=False)
class CheckpointIdentity:
    """What a checkpoint file is, decided once. `header`, `config` and `spec` are None for a file whose header
    this layer does not parse (an exported `.onnx` file: its own metadata is checked by `core/onnx`); `task` is
    then the task it was checked for. `hash_home` is where the sha256 cache lives (`hub.file_sha256`)."""

    path: Path
    size_bytes: int
    mtime_ns: int
    task: str | None = None
    header: SafetensorsReader | None = None
    config: ModelConfig | None = None
    spec: ModelSpec | None = None
    hash_home: Path | None = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def official(self) -> tuple[str, str] | None:
        """(task, size) the file's official name promises, or None for a name of its own."""
        return parse_official_name(self.name)

    @property
    def fingerprint(self) -> tuple[str, int, int]:
        """(resolved path, size, mtime): an unchanged file keeps its identity, a replaced one gets a new one."""
        return (str(self.path.resolve()), self.size_bytes, self.mtime_ns)

    def is_current(self) -> bool:
        """Whether the file on disk is still the one identified (same size and mtime)."""
        try:
            stat = self.path.stat()
        except OSError:
            return False
        return (stat.st_size, stat.st_mtime_ns) == (self.size_bytes, self.mtime_ns)

    @cached_property
    def sha256(self) -> str:
        """The file's sha256, computed at most once per identity (and once per file version on this machine:
        `hub.file_sha256` keeps it next to the checkpoints by path, size and mtime)."""
        return hub.file_sha256(self.path, self.hash_home)

    def require_task(self, task: str) -> None:
        """Refuse a checkpoint of another task (the loader's `wrong_task` message)."""
        from .loader import wrong_task

        if self.task is not None and self.task != task:
            raise wrong_task(self.name, self.task, task)

    def size_contradiction(self, requested: str | None = None, name: str | None = None) -> str | None:
        """The loader's warning when the architecture is not the size its official name (or `name`, e.g. a
        front-end's label) or the asked size promises; None for a file without a parsed header."""
        from .loader import size_contradiction

        return None if self.spec is None else size_contradiction(name or self.name, self.spec, requested)


def _stat(path: Path) -> os.stat_result:
    try:
        return path.stat()
    except OSError:
        raise CheckpointError(f"checkpoint not found: {path}") from None


def identify(
    path: str | os.PathLike,
    *,
    task: str | None = None,
    rope_dtype: str = "bf16",
    hash_home: str | os.PathLike | None = None,
) -> CheckpointIdentity:
    """Read a `.safetensors` checkpoint's header once and check it whole: the architecture inferred from its
    shapes, the task (when given; a file of another task is refused before its keys are compared) and every
    key and shape against the model that architecture builds. Raises the loader's `CheckpointError`s."""
    from .loader import checked_model

    file = Path(path)
    if not file.is_file():
        raise CheckpointError(f"checkpoint not found: {file}")
    header = SafetensorsReader(file)  # refuses pickles, foreign and truncated files
    stat = _stat(file)
    model = checked_model(header.shapes, file.name, task=task, rope_dtype=rope_dtype)
    return CheckpointIdentity(
        path=file,
        size_bytes=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        task=model.cfg.task,
        header=header,
        config=model.cfg,
        spec=model.spec,
        hash_home=None if hash_home is None else Path(hash_home),
    )


def identify_file(
    path: str | os.PathLike, *, task: str | None = None, hash_home: str | os.PathLike | None = None
) -> CheckpointIdentity:
    """The identity of a file whose header another layer checks (an exported `.onnx` file): where it is, its
    size, mtime and sha256, and the task it was checked for."""
    file = Path(path)
    stat = _stat(file)
    return CheckpointIdentity(
        path=file,
        size_bytes=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        task=task,
        hash_home=None if hash_home is None else Path(hash_home),
    )
