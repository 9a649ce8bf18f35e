"""Every consumer of normals, re-verified with analytic scenes in the canonical (OpenCV) frame.

The scenes' normals are exact (and, for the colour patches, re-derived from their pointmaps), so each consumer's
answer is known: a sphere lit from above is bright on top, its shadow falls below it, a camera-facing patch is
lilac in every colour convention and an up-facing one green in OpenGL/BAE colours (docs/conventions.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sapiens2_studio.comfy_nodes.labels import NORMAL_CONVENTIONS
from sapiens2_studio.core.pipeline.results import NormalResult, PointmapResult
from sapiens2_studio.core.shading.conventions import normals_to_rgb
from sapiens2_studio.core.shading.relight import (
    DirectionalLight,
    direction_from_angles,
    linear_to_srgb,
    relight,
)
from sapiens2_studio.core.shading.shadows import shadow_visibility
from sapiens2_studio.core.studio.compute.geometry_checks import normals_from_pointmap
from sapiens2_studio.core.studio.sources.batches import TaskBatch
from sapiens2_studio.core.studio.views import relighting as relight_logic
from sapiens2_studio.core.studio.views.previews import normal_map, normal_map_batch, to_uint8
from sapiens2_studio.core.testing.scenes import ellipsoid_scene, plane_scene

ABOVE = DirectionalLight.from_angles(0.0, 90.0)  # straight above the subject, as seen from the camera


def _sphere(**kwargs):
    return ellipsoid_scene(64, 64, center=(0.0, 0.0, 3.0), semi_axes=(0.4, 0.4, 0.4), focal=200.0, **kwargs)


def _rows_of(mask: np.ndarray) -> tuple[int, int]:
    rows = np.nonzero(mask.any(axis=1))[0]
    return int(rows.min()), int(rows.max())


def test_light_from_above_points_up_in_the_canonical_frame():
    assert direction_from_angles(0.0, 90.0) == pytest.approx((0.0, -1.0, 0.0))  # up = −y in OpenCV
    assert direction_from_angles(0.0, 0.0) == pytest.approx((0.0, 0.0, -1.0))  # toward the camera = −z


def test_sphere_lit_from_above_is_bright_on_top_in_core_relight():
    scene = _sphere()
    n = torch.from_numpy(scene.normals)
    out = relight(n, torch.ones_like(n), lights=[ABOVE]).radiance[..., 0].numpy()
    np.testing.assert_allclose(out[scene.mask], np.maximum(-scene.normals[scene.mask, 1], 0.0), atol=1e-6)
    top, bottom = _rows_of(scene.mask)
    assert out[top + 2][scene.mask[top + 2]].min() > 0.85  # measured 0.856–0.886 two rows below the top
    assert out[bottom - 2][scene.mask[bottom - 2]].max() == 0.0  # the lower half faces away from the light
    upper, lower = scene.mask.copy(), scene.mask.copy()
    upper[32:], lower[:32] = False, False
    # mean of −n_y over the upper half of the disc: 4 / (3π) = 0.42 seen orthographically, 0.391 in perspective
    assert out[upper].mean() == pytest.approx(0.391, abs=0.002) and out[lower].mean() == 0.0


def test_sphere_lit_from_above_is_bright_on_top_through_the_relight_node_logic():
    scene = _sphere()
    normals = TaskBatch(
        "normal", [NormalResult(torch.from_numpy(scene.normals), torch.from_numpy(scene.mask))]
    )
    white = torch.ones(1, 64, 64, 3)
    lights = relight_logic.add_light(None, 0.0, 90.0, "#ffffff", 1.0)
    relit, light_map = relight_logic.relight_batch(normals, white, lights=lights)
    expected = linear_to_srgb(torch.from_numpy(np.maximum(-scene.normals[..., 1], 0.0)))
    got = relit[0, ..., 0]
    mask = torch.from_numpy(scene.mask)
    torch.testing.assert_close(got[mask], expected[mask], atol=1e-5, rtol=0)
    top, bottom = _rows_of(scene.mask)
    assert (
        float(got[top + 2][mask[top + 2]].min()) > 0.93
        and float(got[bottom - 2][mask[bottom - 2]].max()) == 0.0
    )
    assert float(got[~mask].min()) == 1.0  # outside the mask: the original (white) image
    assert float(light_map[0, top + 2, 32, 0]) > 0.93 and float(light_map[0, bottom - 2, 32, 0]) == 0.0


def test_a_light_from_above_casts_the_spheres_shadow_below_it():
    scene = _sphere(background_depth=3.3)
    light = DirectionalLight.from_angles(
        0.0, 60.0
    )  # above and in front: the wall behind is lit (n · l = 0.5)
    visibility = shadow_visibility(torch.from_numpy(scene.points), light.direction, scene.intrinsics).numpy()
    top, bottom = _rows_of(scene.mask)
    column = 32
    assert visibility[bottom + 3, column] == 0.0  # the wall just below the sphere: in its shadow
    assert visibility[top - 3, column] == 1.0  # above it: lit
    assert visibility[bottom + 3, 2] == 1.0  # far to the side: lit
    lit_side = scene.mask & ((scene.normals @ np.asarray(light.unit_direction())) > 0.2)
    assert visibility[lit_side].min() == 1.0  # the side facing the light is not shadowed by the sphere itself
    normals = TaskBatch("normal", [NormalResult(torch.from_numpy(scene.normals))])
    pointmap = TaskBatch("pointmap", [PointmapResult(torch.from_numpy(scene.points), 1.0, scene.intrinsics)])
    relit, _ = relight_logic.relight_batch(
        normals,
        torch.ones(1, 64, 64, 3),
        lights=(light,),
        pointmap=pointmap,
        settings=relight_logic.RelightSettings(shadow_softness=0.0),
        mask=torch.ones(1, 64, 64),
    )
    assert float(relit[0, bottom + 3, column, 0]) == 0.0 and float(relit[0, top - 3, column, 0]) > 0.7


# Documented colours (docs/conventions.md): (n' + 1) / 2 in each convention, for canonical normals.
FACING = (0.0, 0.0, -1.0)  # toward the camera
UP = (0.0, -1.0, 0.0)  # the top of a head, a floor
RIGHT = (1.0, 0.0, 0.0)  # the image's right
COLOURS = {
    "opengl": {FACING: (0.5, 0.5, 1.0), UP: (0.5, 1.0, 0.5), RIGHT: (1.0, 0.5, 0.5)},
    "controlnet": {FACING: (0.5, 0.5, 1.0), UP: (0.5, 1.0, 0.5), RIGHT: (0.0, 0.5, 0.5)},
    "directx": {FACING: (0.5, 0.5, 1.0), UP: (0.5, 0.0, 0.5), RIGHT: (1.0, 0.5, 0.5)},
    "opencv": {FACING: (0.5, 0.5, 0.0), UP: (0.5, 0.0, 0.5), RIGHT: (1.0, 0.5, 0.5)},
}
PATCHES = {
    FACING: {"normal": FACING},  # a wall in front of the camera
    UP: {"normal": UP, "through": (0.0, 1.0, 0.0)},  # a floor 1 m below the camera
    RIGHT: {"normal": RIGHT, "through": (-1.0, 0.0, 0.0)},  # a wall on the left, facing right
}


@pytest.mark.parametrize("direction", list(PATCHES), ids=["facing", "up", "right"])
def test_patch_colours_from_the_pointmap_geometry(direction):
    """Normals re-derived from each patch's pointmap, then coloured by core, the Normals node and the CLI."""
    scene = plane_scene(64, 48, **PATCHES[direction])
    derived, valid = normals_from_pointmap(scene.points)
    valid &= scene.mask
    assert valid.sum() > 300  # measured 360–2852 (grazing floor/wall rows are depth steps, not surface)
    np.testing.assert_allclose(derived[valid], np.broadcast_to(direction, derived[valid].shape), atol=1e-5)
    patch = torch.from_numpy(derived[valid].astype(np.float32))
    for convention, colours in COLOURS.items():
        rgb = normals_to_rgb(patch, convention)
        torch.testing.assert_close(rgb, torch.tensor(colours[direction]).expand_as(rgb), atol=1e-5, rtol=0)
    node_labels = {
        "opengl": "opengl (blender camera, y up)",
        "controlnet": "controlnet (BAE colours)",
        "directx": "directx (y down)",
    }
    batch = TaskBatch("normal", [NormalResult(torch.from_numpy(scene.normals))])
    row, col = (int(i[0]) for i in np.nonzero(valid))
    for convention, label in node_labels.items():
        image = normal_map_batch(batch, NORMAL_CONVENTIONS[label])[0, row, col]
        assert image.tolist() == pytest.approx(COLOURS[convention][direction])
    preview = to_uint8(normal_map(scene.normals))[row, col]  # CLI preview: OpenGL colours
    assert preview.tolist() == [round(255 * c) for c in COLOURS["opengl"][direction]]
