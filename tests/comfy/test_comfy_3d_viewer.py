"""GLB and PLY exports in ComfyUI's 3D preview: the frontend's own three.js (GLTFLoader, PLYLoader, WebGLRenderer)
in headless Chromium, lit like Load 3D / Preview 3D, looking from the capture's camera.

Runs per host and frontend of the matrix (the host's pinned frontend, then the newest). The classes are found by
their shape among the exports of the build's three.js module, the same way on every frontend; 1.27.10 (ComfyUI
0.3.64's pinned) inlines three.js in its extensions chunk without exporting it, so that chunk is imported with its
app imports stood in for (consumers.importable_three). 1.27.10 has no PLY reader at all (its Load 3D takes
.gltf/.glb/.obj/.fbx/.stl): there the PLY case asserts that the build indeed cannot read PLY.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from sapiens2_studio.core.formats.mesh import pointmap_to_mesh, write_mesh

pytestmark = pytest.mark.comfyui
H, W, FOCAL, DEPTH = 48, 64, 60.0, 2.0
RED, BLUE = (220, 40, 40), (40, 40, 220)


consumers = sys.modules["sapiens2_comfy_consumers"]  # loaded by conftest.py (tests are not a package)


@pytest.fixture(scope="module")
def viewed(comfy_host, frontend, chromium_binary, tmp_path_factory):
    assets = consumers.frontend_assets(comfy_host.python, frontend.root)
    assert not isinstance(assets, str), assets
    three = consumers.frontend_three(assets)
    assert not isinstance(three, str), three
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
    result = consumers.view_in_comfy_viewer(chromium_binary, three, files, camera, work)
    result["reads_ply"] = consumers.frontend_reads_ply(assets)
    return result


def test_glb_shows_its_colours_upright_in_the_comfy_viewer(viewed):
    glb = viewed["glb"]
    assert glb["type"] == "MeshStandardMaterial" and glb["map"] and glb["metalness"] == 0
    assert not glb["vertexColors"]  # the texture alone: no vertex colours multiplied in
    top, bottom = np.array(glb["samples"][0]), np.array(glb["samples"][1])
    # Lit by the preview's lights the colours stay within a few levels of the image's (measured: 220, 47, 47).
    assert np.abs(top - RED).max() <= 16 and np.abs(bottom - BLUE).max() <= 16, glb["samples"]


def test_ply_has_colours_and_the_image_top_up_for_the_comfy_viewer(viewed):
    ply = viewed["ply"]
    # A frontend has a PLYLoader exactly when some script of it can read a PLY header: the lookup missed nothing.
    assert ply["loader"] == viewed["reads_ply"], ply
    if not ply["loader"]:  # 1.27.10: no PLY reader anywhere, so its 3D preview cannot show a PLY at all
        return
    assert ply["colors"] and ply["red"] == H * W // 2
    assert ply["mean_y_red"] > 0 > ply["mean_y_other"]  # y up: the image's top half is above
