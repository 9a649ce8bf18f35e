"""A predict job's models: which checkpoint file each task uses (given, else official and downloaded, every
missing one reported at once), each file's one identity (`checkpoint_identities`: its header read and checked
once, its sha256 hashed at most once) and loading them under the one execution rule. `job.py` re-exports these
names."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ... import catalogue
from ...checkpoints import hub
from ...checkpoints.identity import CheckpointIdentity
from ...checkpoints.loader import refuse_size_contradiction
from ...tasks import registry as tasks_registry
from ..errors import InputError
from ..runtime.models import LoadedModel, ModelCache, check_checkpoint
from .job_spec import JobSpec


def resolve_checkpoints(spec: JobSpec) -> dict[str, Path]:
    """Task → checkpoint file: the given file first, else the official one (downloaded unless forbidden). Every
    missing file is reported at once; an official file of another size than the one asked for is refused."""
    paths = _checkpoint_files(spec)
    _refuse_other_sizes(spec, paths, ModelCache())
    return paths


def checkpoint_identities(spec: JobSpec, cache: ModelCache | None = None) -> dict[str, CheckpointIdentity]:
    """Task → the identity of its checkpoint file (`resolve_checkpoints`'s files), checked before any image is
    read: the runtime fits the file, the file is whole and of its task. Each header is read once (`cache` keeps
    identities across a host's or a worker's jobs); the loader, the skip-existing expectation and the bundles'
    `models` entries read the identity, not the file."""
    cache = cache if cache is not None else ModelCache()  # an empty cache is falsy (__len__)
    paths = _checkpoint_files(spec)
    _refuse_other_sizes(spec, paths, cache)
    return {  # wrong task or a damaged file: fail before any folder work
        task: check_checkpoint(
            path, task=task, runtime=spec.runtime, cache=cache, hash_home=spec.checkpoint_dir
        )
        for task, path in paths.items()
    }


def _refuse_other_sizes(spec: JobSpec, paths: Mapping[str, Path], cache: ModelCache) -> None:
    """An asked size must be that size: an official file of another is refused (its header, read once)."""
    if spec.size is None:
        return
    for task, path in paths.items():
        if task not in spec.checkpoints and path.suffix.lower() == ".safetensors" and path.is_file():
            refuse_size_contradiction(cache.identity(path, hash_home=spec.checkpoint_dir), spec.size)


def _checkpoint_files(spec: JobSpec) -> dict[str, Path]:
    """Task → the given file, else the official one (downloaded unless forbidden); every missing one at once."""
    paths: dict[str, Path] = {}
    problems: list[hub.HubError] = []
    for task in spec.tasks:
        if task in spec.checkpoints:
            path = Path(spec.checkpoints[task]).expanduser()
            if not path.is_file():
                raise InputError(f"checkpoint for {task} not found: {path}")
            paths[task] = path
            continue
        try:
            paths[task] = hub.ensure_checkpoint(
                task, spec.size_for(task), spec.checkpoint_dir, allow_download=spec.allow_download
            )
        except hub.HubError as exc:  # keep going: the user should learn about every missing file at once
            problems.append(_forced_size_advice(exc, task, spec.size))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        first = problems[0]
        raise hub.HubError(
            f"{len(problems)} checkpoints are missing:\n  " + "\n  ".join(p.message for p in problems),
            hints={k: v.replace(f"{first_task(first)}=", "TASK=") for k, v in first.hints.items()},
        )
    return paths


def _forced_size_advice(error: hub.HubError, task: str, size: str | None) -> hub.HubError:
    """A forced size at which `task` was never released: say how to get the task's own size instead."""
    released = catalogue.RELEASED.get(task, ())
    if size is None or not released or size in released:
        return error
    return hub.HubError(
        error.message,
        hints={
            "cli": f"leave out --size (each task then uses its own default: {task} "
            f"{catalogue.default_size(task)}) or pass --checkpoint {task}=PATH",
            "python": f"leave size=None (each task then uses its own default size) or give a {task} checkpoint",
        },
    )


def first_task(error: hub.HubError) -> str:
    """The task a download error's CLI hint names (`--checkpoint seg=PATH` → 'seg')."""
    hint = error.hints.get("cli", "")
    return hint.split("--checkpoint ", 1)[-1].split("=", 1)[0] if "--checkpoint " in hint else ""


def load_models(
    spec: JobSpec, paths: Mapping[str, Path | CheckpointIdentity], cache: ModelCache | None = None
) -> dict[str, LoadedModel]:
    """Each task's model under the one execution rule, in run order; from its identity when given one (the
    header is then not read again)."""
    cache = cache if cache is not None else ModelCache()  # an empty cache is falsy (__len__)
    return {
        task: cache.get(
            paths[task],
            task=task,
            device=spec.device,
            dtype=spec.dtype,
            attention=spec.attention,
            compile=spec.compile,
            runtime=spec.runtime,
            hash_cache_dir=spec.checkpoint_dir,
        )
        for task in tasks_registry.run_order()
        if task in paths
    }


def auto_batch_size(models: dict[str, LoadedModel]) -> int:
    """The smallest batch that every loaded model fits in free GPU memory (1 on CPU)."""
    from ...arch.batching import auto_batch_size as measure

    sizes = [measure(m.model) for m in models.values()]
    return min(sizes) if sizes else 1
