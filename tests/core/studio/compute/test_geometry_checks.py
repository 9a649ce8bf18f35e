"""Cross-task geometry checks on analytic scenes: consistent predictions pass, a flipped convention is caught.

Scenes come from `core.testing.scenes` (exact pointmaps and normals in the canonical OpenCV frame). "Flipped"
means the y and z signs of the normals are wrong — what storing the model's OpenGL-frame output as OpenCV does.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sapiens2_studio.core.pipeline.results import (
    NormalResult,
    PersonPose,
    PointmapResult,
    PoseResult,
    SegResult,
)
from sapiens2_studio.core.studio.compute import geometry_checks as checks
from sapiens2_studio.core.studio.compute.geometry_checks import (
    CheckError,
    CheckThresholds,
    GeometryReport,
    camera_facing_share,
    check_geometry,
    compare_normals_to_pointmap,
    keypoints_in_mask_share,
    normals_from_pointmap,
)
from sapiens2_studio.core.testing.scenes import ellipsoid_scene, plane_scene

FLIP_YZ = np.array([1.0, -1.0, -1.0], np.float32)


def torso():
    """A person-like surface: a flattened ellipsoid (wide, tall, shallow) at 3 m, mostly facing the camera."""
    return ellipsoid_scene(96, 128, semi_axes=(0.35, 0.55, 0.12), focal=300.0)


def test_pointmap_normals_of_a_plane_are_exact_and_face_the_camera():
    scene = plane_scene(normal=(0.3, -0.4, -0.8))
    normals, valid = normals_from_pointmap(scene.points)
    assert valid[1:-1, 1:-1].all() and not valid[0].any() and not valid[:, -1].any()  # border: no neighbours
    expected = np.array([0.3, -0.4, -0.8]) / np.linalg.norm([0.3, -0.4, -0.8])
    np.testing.assert_allclose(normals[valid], np.broadcast_to(expected, normals[valid].shape), atol=1e-5)
    fronto, _ = normals_from_pointmap(plane_scene().points)
    np.testing.assert_allclose(
        fronto[5, 5], (0.0, 0.0, -1.0), atol=1e-6
    )  # (P_down − P_up) × (P_right − P_left)


def test_consistent_normals_pass_with_cosine_one():
    scene = torso()
    report = check_geometry(normals=scene.normals, pointmap=scene.points, mask=scene.mask)
    agreement = report.normals_vs_pointmap
    assert agreement.mean_cosine == pytest.approx(1.0, abs=2e-4)  # measured 0.99993 (finite differences)
    assert agreement.best_signs == (1, 1, 1) and agreement.samples == 5808
    assert report.normals_facing_camera.share == 1.0
    assert report.pointmap_valid_in_mask.share == 1.0
    assert report.ok and report.warnings == () and report.mask_source == "mask"


def test_flipped_normals_give_cosine_minus_one_and_every_warning():
    scene = torso()
    report = check_geometry(normals=scene.normals * FLIP_YZ, pointmap=scene.points, mask=scene.mask)
    agreement = report.normals_vs_pointmap
    assert agreement.mean_cosine == pytest.approx(-0.850, abs=1e-3)  # = 2·mean(n_x²) − 1: the sides keep x
    assert agreement.best_signs == (1, -1, -1) and agreement.best_mean_cosine == pytest.approx(1.0, abs=2e-4)
    assert report.normals_facing_camera.share == 0.0
    assert report.warnings[0].startswith("normals look flipped against the pointmap (mean cosine -0.85)")
    assert report.warnings[0].endswith("convention or checkpoint mismatch")
    assert "axes multiplied by (1, -1, -1)" in report.warnings[1] and "'opengl'" in report.warnings[1]
    assert report.warnings[2].startswith("only 0% of the person's normals face the camera")
    plane = plane_scene()
    flat = check_geometry(normals=plane.normals * FLIP_YZ, pointmap=plane.points)
    assert flat.normals_vs_pointmap.mean_cosine == pytest.approx(-1.0, abs=1e-6)
    sphere = ellipsoid_scene()
    round_ = check_geometry(normals=sphere.normals * FLIP_YZ, pointmap=sphere.points, mask=sphere.mask)
    assert round_.normals_vs_pointmap.mean_cosine == pytest.approx(-0.62, abs=0.01)  # a sphere has more x
    assert not round_.ok


def test_weak_agreement_warns_without_calling_it_flipped():
    scene = torso()
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 1.2, scene.normals.shape).astype(np.float32)
    report = check_geometry(normals=scene.normals + noise, pointmap=scene.points, mask=scene.mask)
    cosine = report.normals_vs_pointmap.mean_cosine
    assert cosine == pytest.approx(0.41, abs=0.01)  # measured 0.4096
    assert len(report.warnings) == 1 and report.warnings[0].startswith("normals disagree with the pointmap")


def test_depth_discontinuities_and_background_do_not_count():
    """A sphere before a wall without a person mask: the silhouette's steps are not surface."""
    scene = ellipsoid_scene(96, 128, background_depth=3.2)
    filtered = compare_normals_to_pointmap(scene.normals, scene.points)
    unfiltered = compare_normals_to_pointmap(
        scene.normals, scene.points, max_slant_deg=89.999, max_depth_jump=1e9
    )
    assert filtered.mean_cosine == pytest.approx(0.9985, abs=5e-4)
    assert unfiltered.mean_cosine < filtered.mean_cosine - 0.005  # measured 0.9903 vs 0.9985
    assert unfiltered.samples - filtered.samples == 268  # the samples on the sphere/wall step
    invalid_background = ellipsoid_scene(96, 128)  # zeros outside: never a sample, no mask needed
    assert compare_normals_to_pointmap(
        invalid_background.normals, invalid_background.points
    ).mean_cosine == pytest.approx(1.0, abs=1e-4)


def test_noisy_pointmap_still_agrees():
    scene = torso()
    rng = np.random.default_rng(1)
    noisy = scene.points + rng.normal(0.0, 0.002, scene.points.shape).astype(np.float32)  # 2 mm at 3 m
    report = check_geometry(normals=scene.normals, pointmap=noisy, mask=scene.mask)
    assert report.normals_vs_pointmap.mean_cosine > 0.9 and report.ok


def test_large_images_are_checked_on_a_bounded_grid():
    """A 4096×3072 frame made of 16×16 blocks of a 256×192 scene: the 16-pixel grid reads one pixel per block,
    so the 4K report equals the small scene's exactly (and the big maps never leave torch whole)."""
    small = ellipsoid_scene(192, 256, semi_axes=(0.5, 0.7, 0.2), focal=300.0)

    def blow_up(a: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(a)
        return t.repeat_interleave(16, dim=0).repeat_interleave(16, dim=1)

    report = check_geometry(
        normals=blow_up(small.normals), pointmap=blow_up(small.points), mask=blow_up(small.mask)
    )
    reference = check_geometry(normals=small.normals, pointmap=small.points, mask=small.mask)
    assert report.grid_stride == 16 and reference.grid_stride == 1  # ⌈4096 / 256⌉: at most 256 × 192 samples
    assert report.normals_vs_pointmap == reference.normals_vs_pointmap
    assert report.normals_facing_camera == reference.normals_facing_camera
    assert report.normals_vs_pointmap.samples == 10708
    assert report.normals_vs_pointmap.mean_cosine == pytest.approx(1.0, abs=1e-4)
    assert checks.grid_stride(100, 80) == 1 and checks.grid_stride(4096, 3072, max_side=512) == 8


def test_camera_facing_uses_the_view_rays():
    """At the image edge a normal can point away from the optical axis yet face the camera."""
    scene = plane_scene(64, 48, normal=(0.6, 0.0, -0.8), focal=20.0)  # wide angle, plane turned to the right
    with_rays = camera_facing_share(scene.normals, points=scene.points)
    orthographic = camera_facing_share(scene.normals)
    assert with_rays.share == 1.0 and orthographic.share == 1.0
    side = np.broadcast_to(
        np.array([1.0, 0.0, 0.0], np.float32), scene.normals.shape
    )  # +x: away on the right
    share = camera_facing_share(side, points=scene.points).share
    assert share == pytest.approx(0.5)  # faces the camera exactly on the left half of the image (x < 0)
    assert camera_facing_share(side).share == 0.0  # n_z = 0 is not facing


def test_keypoints_in_mask():
    scene = torso()
    rows, cols = np.nonzero(scene.mask)
    inside = np.stack([cols[::50] + 0.5, rows[::50] + 0.5, np.full(len(rows[::50]), 0.9)], axis=1)
    outside = np.array([[2.5, 2.5, 0.9], [93.5, 125.5, 0.9], [-4.0, 10.0, 0.9], [50.0, 500.0, 0.9]])
    unsure = np.array([[2.5, 2.5, 0.1]] * 10)  # below the score threshold: ignored
    share = keypoints_in_mask_share(np.concatenate([inside, outside, unsure]), scene.mask)
    assert share.samples == len(inside) + 4 and share.share == pytest.approx(len(inside) / (len(inside) + 4))
    top = rows.min()
    just_above = np.array([[cols[rows == top][0] + 0.5, top - 0.5, 0.9]])  # one pixel off the silhouette
    assert keypoints_in_mask_share(just_above, scene.mask).share == 0.0
    assert keypoints_in_mask_share(just_above, scene.mask, radius=1.28).share == 1.0
    assert keypoints_in_mask_share(unsure, scene.mask) == checks.Share(None, 0)


def test_typed_results_and_warnings_for_pose_and_pointmap():
    scene = torso()
    labels = torch.from_numpy(scene.mask.astype(np.int64) * 22)  # Torso
    rows, cols = np.nonzero(scene.mask)
    kp = np.zeros((308, 3), np.float32)
    kp[:, 0], kp[:, 1], kp[:, 2] = cols[::19][:308] + 0.5, rows[::19][:308] + 0.5, 0.8
    good = PoseResult([PersonPose((0, 0, 96, 128), kp)], (96, 128))
    points = torch.from_numpy(scene.points.copy())
    report = check_geometry(
        normals=NormalResult(torch.from_numpy(scene.normals)),
        pointmap=PointmapResult(points, 1.0, scene.intrinsics),
        pose=good,
        seg=SegResult(labels),
    )
    assert report.mask_source == "seg" and report.ok
    assert report.keypoints_in_mask == checks.Share(1.0, 308)
    assert report.normals_vs_pointmap.mean_cosine == pytest.approx(1.0, abs=2e-4)
    wrong = kp.copy()
    wrong[:, :2] = wrong[:, :2] * 0.1  # squeezed into the top-left corner, off the person
    points[:64] = 0.0  # top half of the pointmap invalid
    bad = check_geometry(pointmap=points, pose=[PersonPose((0, 0, 9, 12), wrong)], seg=labels)
    assert bad.keypoints_in_mask.share == 0.0 and bad.pointmap_valid_in_mask.share == 0.5
    assert bad.warnings[0].startswith("only 0% of confident keypoints lie on the segmented person")
    assert bad.warnings[1].startswith("the pointmap is valid (finite, Z > 0) on only 50% of the person")
    assert bad.normals_vs_pointmap is None and bad.normals_facing_camera is None


def test_few_samples_never_warn():
    scene = plane_scene(6, 6)
    report = check_geometry(normals=scene.normals * FLIP_YZ, pointmap=scene.points)
    assert report.normals_vs_pointmap.samples == 16 and report.normals_vs_pointmap.mean_cosine < -0.99
    assert report.ok  # 16 < min_samples: reported, not judged
    strict = check_geometry(
        normals=scene.normals * FLIP_YZ, pointmap=scene.points, thresholds=CheckThresholds(min_samples=4)
    )
    assert not strict.ok


def test_report_serialises_to_json_and_back():
    scene = torso()
    report = check_geometry(normals=scene.normals * FLIP_YZ, pointmap=scene.points, mask=scene.mask)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["version"] == 1 and data["normals_vs_pointmap"]["best_signs"] == [1, -1, -1]
    assert data["thresholds"]["min_normal_cosine"] == 0.5 and len(data["warnings"]) == 3
    assert GeometryReport.from_dict(data) == report
    lines = report.lines()
    assert lines[1].startswith(
        "normals vs pointmap: mean cosine -0.850 over 5808 samples, best signs (1, -1, -1)"
    )
    assert lines[-1].startswith("WARNING: ")
    with pytest.raises(CheckError, match="not a geometry check report"):
        GeometryReport.from_dict({"grid_stride": 1})


def test_inputs_of_different_images_are_refused():
    a, b = plane_scene(64, 48), plane_scene(32, 24)
    with pytest.raises(CheckError, match=r"different image sizes \(normals 64x48, pointmap 32x24\)"):
        check_geometry(normals=a.normals, pointmap=b.points)
    with pytest.raises(ValueError, match="channel-last"):
        check_geometry(normals=np.zeros((3, 4, 4)))
    with pytest.raises(CheckError, match=r"for one image, got shape \(1, 48, 64, 3\)"):
        check_geometry(normals=NormalResult(torch.from_numpy(a.normals)[None]))
    with pytest.raises(CheckError, match=r"must be \(H, W\), got shape \(1, 48, 64\)"):
        check_geometry(normals=a.normals, seg=a.mask[None])
    listed = check_geometry(normals=a.normals, mask=a.mask.tolist())  # plain nested lists work too
    assert listed.mask_source == "mask" and listed.normals_facing_camera.share == 1.0
    assert check_geometry().mask_source == "none" and check_geometry().ok
