"""GLB and PLY exports in ComfyUI's 3D preview: the frontend's own three.js (GLTFLoader, PLYLoader, WebGLRenderer)
in headless Chromium, lit like Load 3D / Preview 3D, looking from the capture's camera.

Runs per host and frontend of the matrix (the host's pinned frontend, then the newest); skipped on a frontend that
bundles three.js without named exports (ComfyUI 0.3.64's pinned 1.27), and only there.
"""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest
from sapiens2_studio.core.formats.mesh import pointmap_to_mesh, write_mesh

pytestmark = pytest.mark.comfyui
H, W, FOCAL, DEPTH = 48, 64, 60.0, 2.0
RED, BLUE = (220, 40, 40), (40, 40, 220)
NAMED_THREE_SINCE = (1, 30)  # frontends before ~1.30 (0.3.64's 1.27) bundle three.js without named exports


consumers = sys.modules["sapiens2_comfy_consumers"]  # loaded by conftest.py (tests are not a package)


@pytest.fixture(scope="module")
def viewed(comfy_host, frontend, chromium_binary, tmp_path_factory):
    found = consumers.frontend_three(comfy_host.python, frontend.root)
    if isinstance(found, str):
        # Only a frontend older than the first one with named three.js exports may lack them.
        known = tuple(int(n) for n in re.findall(r"\d+", frontend.version)[:2])
        assert known and known < NAMED_THREE_SINCE, found
        pytest.skip(f"{found} (frontend {frontend.version} predates named three.js exports)")
    three, aliases = found
    work = tmp_path_factory.mktemp("viewer")
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    z = np.full((H, W), DEPTH, np.float32)
    points = np.stack([(u - W / 2) * z / FOCAL, (v - H / 2) * z / FOCAL, z], axis=-1).astype(np.float32)
    colors = np.zeros((H, W, 3), np.uint8)
    colors[: H // 2], colors[H // 2 :] = RED, BLUE  # the top of the image red
    mesh = pointmap_to_mesh(points, colors=colors)
    files = {suffix: write_mesh(work / f"capture.{suffix}", mesh) for suffix in ("glb", "ply")}
    camera = {"fov_y": math.degrees(2 * math.atan(H / 2 / FOCAL)), "width": W, "height": H,
              "samples": [[W // 2, H // 4], [W // 2, 3 * H // 4]]}  # fmt: skip
    return consumers.view_in_comfy_viewer(chromium_binary, three, aliases, files, camera, work)


def test_glb_shows_its_colours_upright_in_the_comfy_viewer(viewed):
    glb = viewed["glb"]
    assert glb["type"] == "MeshStandardMaterial" and glb["map"] and glb["metalness"] == 0
    assert not glb["vertexColors"]  # the texture alone: no vertex colours multiplied in
    top, bottom = np.array(glb["samples"][0]), np.array(glb["samples"][1])
    # Lit by the preview's lights the colours stay within a few levels of the image's (measured: 220, 47, 47).
    assert np.abs(top - RED).max() <= 16 and np.abs(bottom - BLUE).max() <= 16, glb["samples"]


def test_ply_has_colours_and_the_image_top_up_for_the_comfy_viewer(viewed):
    ply = viewed["ply"]
    assert ply["colors"] and ply["red"] == H * W // 2
    assert ply["mean_y_red"] > 0 > ply["mean_y_other"]  # y up: the image's top half is above
