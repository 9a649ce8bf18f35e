"""The task registry: the built-in tasks, and user tasks loaded from plug-ins once trusted.

Every list of tasks the project shows or runs (CLI choices, `info`, ComfyUI combos, the run order, the checkpoint
task by output conv) reads this registry, so a task is added by adding its module (built-in) or installing it
(plug-in), never by editing the consumers.

Plug-ins, as pytest and transformers do it: an installed package exposes an entry point in the group
`sapiens2_studio.tasks` (name = the task name, value `module:TaskClass`), or `SAPIENS2_TASK_MODULES` lists
modules or `.py` files (comma-separated). Their code runs only when trusted (like `trust_remote_code`): the CLI's
`--trust-task-code [NAME,...]`, the Python API's `trust_task_code=`, or `SAPIENS2_TRUST_TASKS=NAME,...|*` (ComfyUI
and Blender-driven runs). A plug-in found but not trusted is listed as refused; asking for it raises an
`UntrustedTaskError` that says how to trust it. Built-ins are always registered.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from .base import Task
from .errors import TaskError, UntrustedTaskError

ENTRY_POINT_GROUP = "sapiens2_studio.tasks"
MODULES_ENV = "SAPIENS2_TASK_MODULES"
TRUST_ENV = "SAPIENS2_TRUST_TASKS"
TRUST_FLAG = "--trust-task-code"

# Modules of this package that hold no task (the built-in tasks are every other module: a new one is its own file).
_SUPPORT_MODULES = ("base", "dense", "errors", "registry", "sizes", "values")

_tasks: dict[str, Task] = {}
_refused: dict[str, str] = {}  # plug-in trust key → why it was not loaded
_loaded_sources: set[str] = set()  # entry points and modules already imported
_builtins_done = False


def _ensure_builtins() -> None:
    global _builtins_done
    if _builtins_done:
        return
    _builtins_done = True
    package = importlib.import_module(__package__)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in _SUPPORT_MODULES:
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        for task in _tasks_of_module(module):
            register(task)


def _is_task_class(cls: type) -> bool:
    """A Task subclass, also of another import of this package (ComfyUI imports the repo under its folder's name,
    pip under `sapiens2_studio`; a plug-in subclasses whichever it imported)."""
    return any(
        base.__name__ == "Task" and base.__module__.endswith("core.tasks.base") for base in cls.__mro__
    )


def _instance(task: Task | type[Task]) -> Task:
    if isinstance(task, type):
        if not _is_task_class(task):
            raise TaskError(f"{task.__qualname__} is not a sapiens2 Task subclass")
        return task()
    if not _is_task_class(type(task)):
        raise TaskError(f"{task!r} is not a sapiens2 Task (subclass core.tasks.base.Task)")
    return task


def register(task: Task | type[Task], *, replace: bool = False) -> Task:
    """Register a task (class or instance); the same class again is a no-op. Another task of an existing name is
    refused unless `replace` (tests); one whose head output conv or results name (`field`) another task has, always."""
    _ensure_builtins()
    instance = _instance(task)
    old = _tasks.get(instance.name)
    if old is not None and not replace:
        if type(old) is type(instance):
            return old
        raise TaskError(
            f"a task named {instance.name!r} is already registered ({type(old).__module__}); "
            f"{type(instance).__module__} cannot replace it"
        )
    for other in _tasks.values():
        if other.name != instance.name and instance.output_conv and other.output_conv == instance.output_conv:
            raise TaskError(
                f"task {instance.name!r} claims the head output conv decode_head.{instance.output_conv}, which is "
                f"task {other.name!r}'s; give the head its own output conv name"
            )
        if other.name != instance.name and other.field == instance.field:
            raise TaskError(
                f"task {instance.name!r} names its results {instance.field!r}, as task {other.name!r} does; front-ends "
                "take each task's results under that name (a ComfyUI input, a Python argument), so set the task's "
                "batch_field to a name of its own"
            )
    _tasks[instance.name] = instance
    return instance


def unregister(name: str) -> None:
    """Remove a plug-in task (tests); built-ins stay."""
    task = _tasks.get(name)
    if task is not None and not task.builtin:
        del _tasks[name]


def reset_plugins() -> None:
    """Forget every plug-in task, refusal and imported source (tests; built-ins stay)."""
    for name in [name for name, task in _tasks.items() if not task.builtin]:
        del _tasks[name]
    _refused.clear()
    _loaded_sources.clear()


def all_tasks() -> tuple[Task, ...]:
    """Every registered task, in listing order (built-ins first)."""
    _ensure_builtins()
    return tuple(sorted(_tasks.values(), key=lambda t: (not t.builtin, t.list_rank)))


def names() -> tuple[str, ...]:
    """The registered task names, in listing order."""
    return tuple(t.name for t in all_tasks())


def _unknown(name: str) -> TaskError:
    if name in _refused:
        return UntrustedTaskError(_refused[name], hints=_trust_hints(name))
    if _refused:  # a module plug-in is refused before its task names are known: name the plug-ins found
        key = next(iter(_refused))
        return UntrustedTaskError(
            f"unknown task {name!r}; task plug-ins were found but not loaded, so their tasks are unknown: "
            + "; ".join(_refused.values()),
            hints=_trust_hints(key),
        )
    return TaskError(f"unknown task {name!r}; choose one of {', '.join(names())}")


def get(name: str) -> Task:
    """The task called `name`; an error listing the choices (or saying how to trust a refused plug-in)."""
    _ensure_builtins()
    task = _tasks.get(name)
    if task is None:
        raise _unknown(name)
    return task


def has(name: str) -> bool:
    _ensure_builtins()
    return name in _tasks


def run_order(tasks: Iterable[str] | None = None) -> tuple[str, ...]:
    """`tasks` (default: all) in the order a multi-task run executes them (by run_rank, then listing order)."""
    chosen = all_tasks() if tasks is None else [get(name) for name in dict.fromkeys(tasks)]
    return tuple(t.name for t in sorted(chosen, key=lambda t: (t.run_rank, not t.builtin, t.list_rank)))


def by_output_conv(conv: str) -> Task | None:
    """The task whose head ends in `decode_head.<conv>`, or None."""
    for task in all_tasks():
        if task.output_conv == conv:
            return task
    return None


def for_head(head_shapes: Any) -> Task | None:
    """The task whose output conv a checkpoint's head (keys without `decode_head.`) holds, or None."""
    for task in all_tasks():
        if task.matches_head(head_shapes):
            return task
    return None


def refused() -> dict[str, str]:
    """Plug-ins found but not loaded: trust key → the reason."""
    return dict(_refused)


# ------------------------------------------------------------------------------------------------- plug-ins
def _trust_hints(key: str) -> dict[str, str]:
    return {
        "cli": f"add {TRUST_FLAG} {key} (or {TRUST_FLAG} to trust every installed task)",
        "python": f"pass trust_task_code=[{key!r}] (or True)",
        "comfyui": f"start ComfyUI with {TRUST_ENV}={key} (or *) in its environment",
    }


def _refusal(key: str, what: str) -> str:
    return (
        f"the task plug-in {key!r} ({what}) was found but its code is not trusted, so it was not loaded; "
        f"run untrusted code only from sources you trust: pass {TRUST_FLAG} {key} (CLI), trust_task_code="
        f"[{key!r}] (Python) or set {TRUST_ENV}={key} (or *)"
    )


def _trusted_set(trust: bool | str | Iterable[str] | None) -> set[str] | bool:
    """True (trust all), or the set of trusted keys; None reads SAPIENS2_TRUST_TASKS when asked."""
    if trust is None:
        trust = os.environ.get(TRUST_ENV, "")
    if trust is True:
        return True
    if trust is False:
        return set()
    items = trust.split(",") if isinstance(trust, str) else list(trust)
    keys = {str(item).strip() for item in items if str(item).strip()}
    return True if "*" in keys else keys


def _is_trusted(trusted: set[str] | bool, *keys: str) -> bool:
    return trusted is True or any(key in trusted for key in keys)  # type: ignore[operator]


def _tasks_of_module(module: ModuleType) -> list[type[Task] | Task]:
    """The tasks a module offers: its `SAPIENS2_TASKS` list, else the named Task subclasses it defines."""
    declared = getattr(module, "SAPIENS2_TASKS", None)
    if declared is not None:
        return list(declared)
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and _is_task_class(value)
        and value.__module__ == module.__name__
        and value.name
    ]


def _import_module(spec: str) -> ModuleType:
    """A module by dotted name, or a `.py` file by path (imported under a private name)."""
    path = Path(spec).expanduser()
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        if not path.is_file():
            raise TaskError(f"{MODULES_ENV} names {spec!r}, which is not a file")
        name = f"sapiens2_task_plugin_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise TaskError(f"cannot import the task module {spec!r}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    return importlib.import_module(spec)


def _module_keys(spec: str) -> tuple[str, ...]:
    """The names that trust an explicit module: as given, its file stem or last dotted part."""
    stem = Path(spec).stem if spec.endswith(".py") else spec.rsplit(".", 1)[-1]
    return (spec, stem)


def _register_from(source: str, found: Iterable[Any], expect: str | None = None) -> list[str]:
    loaded = []
    for item in found:
        task = register(item)
        if expect is not None and task.name != expect:
            unregister(task.name)
            raise TaskError(
                f"the entry point {expect!r} in group {ENTRY_POINT_GROUP} loads a task named {task.name!r}; "
                "name the entry point after its task"
            )
        loaded.append(task.name)
    if not loaded:
        raise TaskError(f"the task plug-in {source} defines no Task subclass with a name")
    return loaded


def load_plugins(
    trust: bool | str | Iterable[str] | None = None,
    *,
    modules: str | Iterable[str] | None = None,
    entry_points: bool = True,
) -> list[str]:
    """Load trusted plug-in tasks; returns the names newly registered. Untrusted ones are remembered as refused.

    trust: True / "*" trusts all; names (a list or "a,b") trust those; None reads SAPIENS2_TRUST_TASKS.
    modules: explicit modules/`.py` files (default: SAPIENS2_TASK_MODULES); one is trusted by its name or stem.
    Safe to call again: each source is imported once.
    """
    _ensure_builtins()
    trusted = _trusted_set(trust)
    new: list[str] = []
    if entry_points:
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            source = f"entry point {ep.name} = {ep.value}"
            if source in _loaded_sources:
                continue
            if not _is_trusted(trusted, ep.name):
                _refused[ep.name] = _refusal(ep.name, f"entry point {ep.value}")
                continue
            try:
                obj = ep.load()
            except Exception as exc:
                raise TaskError(f"the task plug-in {source} failed to import: {exc}") from exc
            found = _tasks_of_module(obj) if isinstance(obj, ModuleType) else [obj]
            new += _register_from(source, found, expect=ep.name)
            _loaded_sources.add(source)
            _refused.pop(ep.name, None)
    if modules is None:
        modules = os.environ.get(MODULES_ENV, "")
    specs = modules.split(",") if isinstance(modules, str) else list(modules)
    for spec in (s.strip() for s in specs):
        if not spec or f"module {spec}" in _loaded_sources:
            continue
        keys = _module_keys(spec)
        if not _is_trusted(trusted, *keys):
            _refused[keys[-1]] = _refusal(keys[-1], f"module {spec}")
            continue
        try:
            module = _import_module(spec)
        except TaskError:
            raise
        except Exception as exc:
            raise TaskError(f"the task module {spec!r} failed to import: {exc}") from exc
        new += _register_from(f"module {spec}", _tasks_of_module(module))
        _loaded_sources.add(f"module {spec}")
        _refused.pop(keys[-1], None)
    return new
