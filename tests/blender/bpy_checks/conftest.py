"""Blender-side harness: install the built extension zip, reset the scene per test, always unregister at the end.

Runs inside the bpy subprocess started by ``tests/blender/test_blender_addon.py``; bpy is imported lazily so the
outer pytest run (which also sees this file) never imports it.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

# Must be set before bpy is imported anywhere, or Blender writes to ~/.config/blender (the outer runner sets it;
# this covers running a check module by hand). The outer pytest run also reads this file but never imports bpy.
if os.environ.get("SAPIENS2_EXTENSION_ZIP") and not os.environ.get("BLENDER_USER_RESOURCES"):
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="sapiens2_blender_user_")

MODULE = "bl_ext.user_default.sapiens2_capture"
OPENCV_TO_Z_UP = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]])  # (x, y, z)_cv -> (x, z, -y)
OPENCV_TO_Y_UP = np.diag([1.0, -1.0, -1.0])  # 180° about X


def _disable() -> None:
    import addon_utils

    if MODULE in sys.modules and addon_utils.check(MODULE)[1]:
        addon_utils.disable(MODULE)


@pytest.fixture(scope="session")
def addon():
    """The installed, enabled extension module; disabled (all classes unregistered) at session end."""
    zip_path = os.environ.get("SAPIENS2_EXTENSION_ZIP")
    if not zip_path:
        pytest.skip(
            "run these through tests/blender/test_blender_addon.py (it builds the zip and the bundles)"
        )
    import bpy

    result = bpy.ops.extensions.package_install_files(
        filepath=zip_path, repo="user_default", enable_on_install=True
    )
    assert result == {"FINISHED"}
    atexit.register(_disable)  # safety net if the session dies before teardown
    yield sys.modules[MODULE]
    _disable()


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """bpy 4.2 crashes (SIGSEGV) while it tears itself down at exit once Rigify has generated a rig, after every
    check passed; where a check asked for it (``fast_exit``), leave without Blender's exit code, keeping pytest's
    status. The reports (terminal, JUnit) are written by then."""
    if os.environ.get("SAPIENS2_BPY_FAST_EXIT") == "1" and _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])


@pytest.fixture
def fast_exit():
    """Mark this process to end without bpy 4.2's crashing exit (see ``pytest_unconfigure``); newer bpy exit
    normally, so the check still sees their real exit."""
    import bpy

    if bpy.app.version < (4, 5, 0):
        os.environ["SAPIENS2_BPY_FAST_EXIT"] = "1"


@pytest.fixture
def bpy_empty(addon):
    """bpy with an empty scene (add-ons stay enabled)."""
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    return bpy


@pytest.fixture(scope="session")
def bundles() -> Path:
    return Path(os.environ["SAPIENS2_BLENDER_BUNDLES"])


@pytest.fixture
def walk_copy(bundles, tmp_path) -> Path:
    """A private copy of the 6-frame ``walk`` sequence (tests edit its JSON files)."""
    import shutil

    for path in bundles.glob("walk*"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


@pytest.fixture(scope="session")
def expected_tiny(bundles) -> dict[str, np.ndarray]:
    with np.load(bundles / "expected_tiny.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def read_json():
    return lambda path: json.loads(Path(path).read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def to_blender():
    """Independent OpenCV -> Blender conversion for expectations."""

    def convert(points, up_axis: str = "Z", scale: float = 1.0) -> np.ndarray:
        matrix = OPENCV_TO_Z_UP if up_axis == "Z" else OPENCV_TO_Y_UP
        return np.asarray(points, dtype=np.float64) @ matrix.T * scale

    return convert


@pytest.fixture(scope="session")
def project_to_pixels():
    """World points -> corner-origin image pixels through Blender's own camera maths."""

    def project(scene, camera, points: np.ndarray) -> np.ndarray:
        from bpy_extras.object_utils import world_to_camera_view
        from mathutils import Vector

        width, height = scene.render.resolution_x, scene.render.resolution_y
        out = []
        for p in np.asarray(points, dtype=np.float64):
            ndc = world_to_camera_view(scene, camera, Vector(p.tolist()))
            out.append((ndc.x * width, (1.0 - ndc.y) * height))
        return np.array(out)

    return project


def mesh_arrays(mesh) -> dict[str, np.ndarray]:
    """Vertex positions and face vertex indices of a mesh, read with foreach_get."""
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    loops = np.empty(len(mesh.loops), dtype=np.int32)
    mesh.loops.foreach_get("vertex_index", loops)
    return {"co": co.reshape(-1, 3), "loops": loops}


@pytest.fixture(scope="session")
def mesh_data():
    return mesh_arrays
