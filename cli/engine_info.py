"""`sapiens2 info` without a checkpoint: what this install is — version, Python, torch, the device `auto` picks,
the optional extras and the checkpoints found — for a user checking a set-up and for callers such as the Blender
add-on's *Test* button (`--json`: one object on stdout)."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import platform
import sys
from pathlib import Path
from typing import Any

EXTRAS = {"exr": "OpenEXR", "hub": "huggingface_hub", "video": "av", "ray": "ray"}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def install_report(checkpoint_dir: str | None) -> dict[str, Any]:
    from .. import __version__
    from ..core.catalogue import PRETRAIN, TASKS
    from ..core.checkpoints.hub import checkpoint_home
    from ..core.studio.runtime.execution import resolve_device
    from ..core.tasks import registry

    device, reason = resolve_device("auto")
    home = checkpoint_home(checkpoint_dir)
    found = []
    for task in dict.fromkeys((*TASKS, *registry.names(), PRETRAIN)):
        for path in sorted((home / task).glob("*.safetensors")) if (home / task).is_dir() else []:
            found.append({"task": task, "file": path.name, "path": str(path), "bytes": path.stat().st_size})
    return {
        "version": __version__,
        "python": sys.executable,
        "python_version": platform.python_version(),
        "torch": _version("torch"),
        "device": str(device),
        "device_reason": reason,
        "extras": {name: importlib.util.find_spec(module) is not None for name, module in EXTRAS.items()},
        "checkpoint_dir": str(home),
        "checkpoints": found,
        # every task this install runs (plug-ins once trusted) and the plug-ins found but not trusted
        "tasks": [
            {"name": t.name, "label": t.label, "builtin": t.builtin, "module": type(t).__module__}
            for t in registry.all_tasks()
        ],
        "refused_tasks": registry.refused(),
    }


def run_install_info(args: argparse.Namespace) -> int:
    report = install_report(args.checkpoint_dir)
    if args.json:
        print(json.dumps(report))
        return 0
    extras = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in report["extras"].items())
    print(f"sapiens2-studio {report['version']} (Python {report['python_version']}, torch {report['torch']})")
    print(f"  python: {report['python']}")
    print(f"  device (auto): {report['device']} — {report['device_reason']}")
    print(f"  extras: {extras}")
    plugins = [t for t in report["tasks"] if not t["builtin"]]
    print(f"  tasks: {', '.join(t['name'] for t in report['tasks'])}")
    for task in plugins:
        print(f"    plug-in {task['name']}: {task['label']} ({task['module']})")
    for name, why in report["refused_tasks"].items():
        print(f"    plug-in {name} not loaded: {why}")
    print(f"  checkpoints in {report['checkpoint_dir']}: {len(report['checkpoints'])}")
    for entry in report["checkpoints"]:
        print(f"    {entry['task']}: {Path(entry['path']).name} ({entry['bytes'] / 1e6:.1f} MB)")
    return 0
