"""One checkpoint's identity, worked out once: which file (path, size, mtime), what its header says (the inferred
architecture, its size and task, checked against every tensor's shape), its official name if any, and its sha256.

Why: a job used to read a checkpoint's header three or four times (the asked-size check, the plan's task check,
the loader's meta pass and its real load) and to look its sha256 up twice (the skip-existing expectation and the
bundle's `models` entry). Now the plan makes one `CheckpointIdentity` per file and every consumer reads it: the
task check (`require_task`), the size checks (`size_contradiction`), the loader (`loader.load_identity` fills
weights from the parsed header without parsing it again) and the run records (`sha256`, hashed at most once per
identity, through the hub's on-disk hash cache). The header's checks live here (`checked_model`: architecture
inferred from the shapes, task, then every key and shape; `wrong_task`, `size_contradiction`); `loader.py`
re-exports them and only fills weights.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch

from ..arch import Sapiens2Model
from ..arch.config import ModelConfig
from ..arch.model import ModelSpec
from ..catalogue import ALL_TASKS, parse_official_name, task_file_hint
from . import hub
from .errors import CheckpointError
from .infer import infer_config
from .reader import SafetensorsReader

__all__ = [
    "CheckpointIdentity",
    "check_keys",
    "checked_model",
    "identify",
    "identify_file",
    "size_contradiction",
    "wrong_task",
]


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
        if self.task is not None and self.task != task:
            raise wrong_task(self.name, self.task, task)

    def size_contradiction(self, requested: str | None = None, name: str | None = None) -> str | None:
        """The loader's warning when the architecture is not the size its official name (or `name`, e.g. a
        front-end's label) or the asked size promises; None for a file without a parsed header."""
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


# ------------------------------------------------------------------------------------- the header's checks


def checked_model(
    shapes: Mapping[str, tuple[int, ...]],
    name: str,
    *,
    task: str | None = None,
    rope_dtype: str = "bf16",
    dtype: Callable[[], torch.dtype] | None = None,
) -> Sapiens2Model:
    """The model `shapes` describe, built on the meta device (in the dtype `dtype()` gives, asked after the task
    check) and checked against every key and shape (strict). A file of another `task` is refused before its keys
    are compared."""
    sources: set[str] = set()
    cfg = infer_config(shapes, rope_dtype=rope_dtype, reads=sources)
    if task is not None and cfg.task != task:
        raise wrong_task(name, cfg.task, task)
    model = Sapiens2Model(cfg, device="meta", dtype=dtype() if dtype is not None else None)
    prefixed = cfg.task != "pretrain"
    layout = "task file: backbone.* + decode_head.*" if prefixed else "pretrain file: bare backbone keys"
    expected = expected_shapes(model, prefixed=prefixed)
    disputed = any(k in shapes and tuple(shapes[k]) != tuple(v) for k, v in expected.items())
    check_keys(
        expected,
        shapes,
        f"{name}, {layout}, {len(shapes)} keys, inferred {cfg.backbone.size_name} {cfg.task}",
        odd=odd_tensor(shapes, expected, sources, rope_dtype=rope_dtype) if disputed else None,
    )
    return model


def expected_shapes(model: Sapiens2Model, *, prefixed: bool) -> dict[str, tuple[int, ...]]:
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if prefixed:
        return shapes
    return {k[len("backbone.") :]: v for k, v in shapes.items()}


def check_keys(
    expected: Mapping[str, tuple],
    found: Mapping[str, tuple],
    description: str,
    *,
    odd: tuple[str, tuple[int, ...], tuple[int, ...]] | None = None,
) -> None:
    """Strict comparison; the error lists the first few offenders of each kind and says what the file is.

    odd: (key, its shape, the shape the rest of the file implies) when one tensor the model was inferred from is
    mis-shaped (see `odd_tensor`): it is named alone, instead of the neighbours that only look wrong because the
    model followed it."""
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    mismatched = [
        f"{k}: file {tuple(found[k])} vs model {tuple(expected[k])}"
        for k in expected
        if k in found and tuple(found[k]) != tuple(expected[k])
    ]
    if not (missing or unexpected or mismatched):
        return
    parts = [f"the checkpoint does not fit the model inferred from it ({description})"]
    if odd is not None:
        key, shape, implied = odd
        parts.append(
            f"tensor {key} has shape {shape}, but the rest of the file implies {implied}; the file is damaged or "
            "was edited, download it again"
        )
        mismatched = []
    for label, items in (
        ("missing keys", missing),
        ("unexpected keys", unexpected),
        ("shape mismatches", mismatched),
    ):
        if items:
            more = f", … (+{len(items) - 5} more)" if len(items) > 5 else ""
            parts.append(f"{label} ({len(items)}): {', '.join(items[:5])}{more}")
    raise CheckpointError("; ".join(parts))


_MAX_ODD_TRIALS = 64  # meta-model builds at most, on the error path only


def odd_tensor(
    found: Mapping[str, tuple[int, ...]],
    expected: Mapping[str, tuple[int, ...]],
    sources: set[str],
    *,
    rope_dtype: str = "bf16",
) -> tuple[str, tuple[int, ...], tuple[int, ...]] | None:
    """The one source tensor (a key the architecture was read from) whose shape the rest of the file disagrees with.

    Why: the model is inferred from a few tensors' shapes (`infer_config(reads=…)`); when one of those is
    mis-shaped, the inferred model follows it and the strict comparison blames its *neighbours*. For each source
    tensor holding a disputed value, this tries the value its neighbours agree on; if the model inferred then fits
    every other tensor of the file exactly, that tensor is the culprit. Returns (key, shape, implied shape) or None.
    """
    pairs = set()  # (value the model took, value the file's other tensors have)
    for key, shape in expected.items():
        if key in found and len(found[key]) == len(shape):
            pairs |= {(m, f) for f, m in zip(found[key], shape) if f != m}
    trials = 0
    for key in sorted(k for k in sources if k in found):
        shape = tuple(found[key])
        for model_value, file_value in sorted(pairs):
            for axis in (a for a, v in enumerate(shape) if v == model_value):
                trials += 1
                if trials > _MAX_ODD_TRIALS:
                    return None
                implied = (*shape[:axis], file_value, *shape[axis + 1 :])
                trial = {**found, key: implied}
                try:
                    cfg = infer_config(trial, rope_dtype=rope_dtype)
                    model = Sapiens2Model(cfg, device="meta")
                except (CheckpointError, ValueError):
                    continue
                shapes = expected_shapes(model, prefixed=cfg.task != "pretrain")
                if set(shapes) == set(found) and all(
                    tuple(shapes[k]) == tuple(found[k]) for k in shapes if k != key
                ):
                    return key, shape, implied
    return None


def wrong_task(name: str, found: str, needed: str) -> CheckpointError:
    """A checkpoint of another task. When the file carries an official name of the needed task (a mislabelled or
    swapped file in the checkpoint folder), suggesting "a pose file such as <that very name>" would send the user
    back to the file just rejected, so the message says to replace it instead."""
    wanted = task_file_hint(needed) if needed in ALL_TASKS else needed
    official = parse_official_name(name)
    if official is None or official[0] != needed:
        return CheckpointError(
            f"{name} is a {found} checkpoint, but a {needed} model is needed here: choose {wanted}"
        )
    size = official[1]
    return CheckpointError(
        f"{name} holds a {found} model, not the {needed} model its name promises (the file was renamed or "
        f"overwritten); replace it with the official {needed} file",
        hints={
            "cli": f"download it again with: sapiens2 download --task {needed} --size {size} --force, or pass "
            f"--checkpoint {needed}=PATH to another {needed} file",
            "python": f"download it again with download_checkpoint({needed!r}, {size!r}, force=True), or pass "
            f"the path of another {needed} file",
            "comfyui": f"download it again (delete it and pick size {size} with downloads on), or pick another "
            f"*_{needed} checkpoint",
        },
    )


def size_contradiction(name: str, spec: ModelSpec, requested: str | None = None) -> str | None:
    """A warning when a file's architecture (read from its tensor shapes) is not the size its official name, or
    the size the user asked for, promises; else None. Why: a tiny test file or another size saved under an
    official name (`sapiens2_0.4b_pose.safetensors`) loads and runs, and its results would pass for the official
    model's. Front-ends show the text as it is (CLI note, progress-json `warning`, the bundle's models entry)."""
    official = parse_official_name(name)
    promised = [size for size in ((official[1] if official else None), requested) if size]
    if not promised or all(size == spec.size for size in promised):
        return None
    claim = f"its name promises {promised[0]}" if official else f"size {promised[0]} was asked for"
    if official and requested and requested != official[1]:
        claim += f" and size {requested} was asked for"
    found = "no released size" if spec.size == "custom" else f"Sapiens2 {spec.size}"
    return (
        f"{name} holds a {spec.task} model of {found} (embed_dim {spec.embed_dim}, depth {spec.depth}, "
        f"{spec.num_parameters:,} parameters), but {claim}; its results are not the official model's. Replace "
        f"it with the official file (sapiens2 download --task {spec.task} --size {promised[0]} --force) or "
        "give it a name of its own"
    )
