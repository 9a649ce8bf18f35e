"""Fixtures for the real-ComfyUI tests: one server per session with this pack and tiny checkpoints.

Skipped with the reason when COMFYUI_PATH / COMFYUI_PYTHON do not point at a ComfyUI checkout (docs/testing.md).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _load(name: str):
    """Load a helper module of this folder by path (tests are not a package; no sys.path edits)."""
    key = f"sapiens2_comfy_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


harness = _load("harness")
workflow_builder = _load("workflow_builder")


@pytest.fixture(scope="session")
def comfy_harness():
    return harness


@pytest.fixture(scope="session")
def builder():
    return workflow_builder


@pytest.fixture(scope="session")
def comfy_paths():
    found = harness.comfy_paths()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def comfy_server(comfy_paths, tmp_path_factory):
    """A running ComfyUI (CPU) with this repository linked into custom_nodes and tiny checkpoints in models/."""
    checkout, python = comfy_paths
    root = tmp_path_factory.mktemp("comfyui")
    models = root / "models"
    harness.write_models(models)
    server = harness.ComfyServer(checkout, python, root / "base", harness.free_port())
    server.start(models)
    client = harness.Client(server.url)
    client.upload_image(harness.write_example_image(root / "example.png"), harness.EXAMPLE_IMAGE)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def client(comfy_server):
    return harness.Client(comfy_server.url)


@pytest.fixture(scope="session")
def object_info(client):
    return client.get("/object_info")
