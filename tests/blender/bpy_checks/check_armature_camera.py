"""People -> armatures (heads at the 3D keypoints, hierarchy, confidence) and the camera (pixels reproject)."""

from __future__ import annotations

import numpy as np
import pytest


def import_bundle(bpy, path, **options):
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(path), **options) == {"FINISHED"}


def test_bone_heads_sit_on_the_3d_keypoints(bpy_empty, bundles, read_json, to_blender):
    bpy = bpy_empty
    import_bundle(bpy, bundles / "tiny.json")
    meta = read_json(bundles / "tiny.json")
    arm = bpy.data.objects["tiny person 0"]
    assert np.allclose(np.array(arm.matrix_world), np.eye(4))
    names = meta["keypoint_names"]
    kps3d = meta["people"][0]["keypoints_3d"]
    checked = 0
    for k, (name, xyz) in enumerate(zip(names, kps3d)):
        if xyz is not None and k != 6:  # 6 sits on a background pixel (see the next test)
            np.testing.assert_allclose(arm.data.bones[name].head_local, to_blender(xyz), atol=1e-5)
            checked += 1
    assert checked >= 300
    hips = [np.array(kps3d[names.index(n)]) for n in ("left_hip", "right_hip")]
    np.testing.assert_allclose(
        arm.data.bones["pelvis"].head_local, to_blender((hips[0] + hips[1]) / 2), atol=1e-5
    )


def test_joint_without_3d_goes_on_its_pixel_ray_at_the_median_depth(
    bpy_empty, bundles, read_json, project_to_pixels
):
    bpy = bpy_empty
    import_bundle(bpy, bundles / "tiny.json")
    person = read_json(bundles / "tiny.json")["people"][0]
    assert person["keypoints_3d"][5] is None  # left_shoulder lies outside the image
    head = np.array(bpy.data.objects["tiny person 0"].data.bones["left_shoulder"].head_local)
    pixel = project_to_pixels(bpy.context.scene, bpy.data.objects["tiny camera"], head[None])[0]
    np.testing.assert_allclose(pixel, person["keypoints"][5][:2], atol=1e-4)
    depths = [xyz[2] for xyz in person["keypoints_3d"] if xyz is not None]
    assert head[1] == pytest.approx(np.median(depths), abs=1e-5)  # Z-up: depth is Blender +Y


@pytest.mark.parametrize("up_axis", ["Z", "Y"])
def test_bone_heads_reproject_onto_their_pixels(bpy_empty, bundles, read_json, project_to_pixels, up_axis):
    """Through the imported camera every joint lands on the plate pixel its 3D was sampled from (Z and Y up)."""
    bpy = bpy_empty
    import_bundle(bpy, bundles / "tiny.json", up_axis=up_axis, global_scale=2.0)
    meta = read_json(bundles / "tiny.json")
    person = meta["people"][0]
    arm = bpy.data.objects["tiny person 0"]
    names = [n for k, n in enumerate(meta["keypoint_names"]) if person["keypoints_3d"][k] is not None]
    heads = np.array([arm.matrix_world @ arm.data.bones[n].head_local for n in names])
    pixels = project_to_pixels(bpy.context.scene, bpy.data.objects["tiny camera"], heads)
    index = {n: k for k, n in enumerate(meta["keypoint_names"])}
    expected = np.array([np.floor(person["keypoints"][index[n]][:2]) + 0.5 for n in names])
    expected[names.index("right_shoulder")] = person["keypoints"][6][:2]  # re-placed on its own ray
    np.testing.assert_allclose(pixels, expected, atol=1e-4)


def test_hierarchy_names_and_bone_collections(bpy_empty, bundles, read_json):
    bpy = bpy_empty
    import_bundle(bpy, bundles / "tiny.json")
    bones = bpy.data.objects["tiny person 0"].data.bones
    names = read_json(bundles / "tiny.json")["keypoint_names"]
    assert set(bones.keys()) == set(names) | {"pelvis"}
    assert bones["pelvis"].parent is None
    assert [b.name for b in bones if b.parent is None] == ["pelvis"]
    chain = {"left_knee": "left_hip", "left_ankle": "left_knee", "left_wrist": "left_elbow", "neck": "pelvis"}
    for child, parent in chain.items():
        assert bones[child].parent.name == parent
    ancestors, bone = [], bones["right_thumb4"]
    while bone.parent:
        bone = bone.parent
        ancestors.append(bone.name)
    assert ancestors[:4] == ["right_thumb3", "right_thumb2", "right_thumb_third_joint", "right_wrist"]
    assert ancestors[-1] == "pelvis"
    collections = bpy.data.objects["tiny person 0"].data.collections
    assert set(collections.keys()) == {"Body", "Hands", "Feet", "Face"}
    face = {b.name for b in collections["Face"].bones}
    assert len(face) == 238 and "tip_of_chin" in face and "left_wrist" not in face
    assert len(collections["Hands"].bones) == 40 and "left_heel" in {
        b.name for b in collections["Feet"].bones
    }
    assert all(b.length > 0 for b in bones)


@pytest.mark.parametrize("scale", [1e-4, 1e4])  # the operator's Scale limits
def test_every_bone_survives_extreme_scales(bpy_empty, bundles, scale):
    """Blender silently deletes bones shorter than 1e-6 units: at a tiny Scale short finger/face bones vanished
    and the import failed with a KeyError."""
    bpy = bpy_empty
    import_bundle(bpy, bundles / "figure.json", import_mesh=False, global_scale=scale)
    bones = bpy.data.objects["figure person 0"].data.bones
    assert len(bones) == 309 and all(b.length > 0 for b in bones)


def test_confidence_property_and_low_scores_hidden(bpy_empty, bundles, read_json):
    bpy = bpy_empty
    import_bundle(bpy, bundles / "tiny.json", keypoint_threshold=0.3)
    arm = bpy.data.objects["tiny person 0"]
    keypoints = read_json(bundles / "tiny.json")["people"][0]["keypoints"]
    names = read_json(bundles / "tiny.json")["keypoint_names"]
    for name, (_, _, score) in zip(names, keypoints):
        assert arm.pose.bones[name]["confidence"] == pytest.approx(score, abs=1e-6)
        assert arm.data.bones[name].hide == (score < 0.3)
    assert arm.data.bones["nose"].hide  # score 0.1


def test_keypoints_without_any_depth_use_the_chosen_plane(
    bpy_empty, bundles, tmp_path, read_json, to_blender
):
    """A bundle without pointmap or keypoints_3d: joints on their pixel rays at `keypoint_depth`."""
    import json

    meta = read_json(bundles / "tiny.json")
    meta["exr"], meta["layers"] = None, []
    for person in meta["people"]:
        person.pop("keypoints_3d")
    path = tmp_path / "pose_only.json"
    path.write_text(json.dumps(meta), encoding="utf-8")
    bpy = bpy_empty
    import_bundle(bpy, path, keypoint_depth=4.0)
    bones = bpy.data.objects["tiny person 0"].data.bones
    cam = meta["camera"]
    x, y, _ = meta["people"][0]["keypoints"][10]
    xyz = ((x - cam["cx"]) / cam["fx"] * 4.0, (y - cam["cy"]) / cam["fy"] * 4.0, 4.0)
    np.testing.assert_allclose(bones[meta["keypoint_names"][10]].head_local, to_blender(xyz), atol=1e-5)
    assert bpy.data.objects.get("tiny mesh") is None  # no pointmap: no mesh (a warning, not an error)


def test_keypoints_without_finite_coordinates_give_no_nan_bones(bpy_empty, bundles, tmp_path, read_json):
    """NaN keypoints (a writer that did not find a joint; Python's json writes NaN) become hidden bones at a
    finite place: a NaN head breaks the viewport, FBX/glTF export and retargeting."""
    import json
    import math
    import shutil

    meta = read_json(bundles / "tiny.json")
    shutil.copy(bundles / "tiny.exr", tmp_path / "tiny.exr")
    person = meta["people"][0]
    person["keypoints"][3] = [math.nan, math.nan, 0.9]  # left_ear: no pixel at all
    person["keypoints"][4] = [2.5, 3.5, math.nan]  # right_ear: no score
    person["keypoints_3d"][3] = person["keypoints_3d"][4] = None
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(meta), encoding="utf-8")
    bpy = bpy_empty
    import_bundle(bpy, path)
    arm = bpy.data.objects["tiny person 0"]
    heads = np.array([b.head_local for b in arm.data.bones])
    tails = np.array([b.tail_local for b in arm.data.bones])
    assert np.isfinite(heads).all() and np.isfinite(tails).all()
    assert len(arm.data.bones) == 309
    for name in ("left_ear", "right_ear"):
        assert arm.data.bones[name].hide and arm.pose.bones[name]["confidence"] == 0.0


@pytest.mark.parametrize("up_axis", ["Z", "Y"])
def test_camera_reprojects_every_vertex_to_its_pixel(
    bpy_empty, bundles, up_axis, project_to_pixels, mesh_data
):
    bpy = bpy_empty
    import_bundle(bpy, bundles / "tiny.json", up_axis=up_axis, global_scale=3.0)
    scene, camera = bpy.context.scene, bpy.data.objects["tiny camera"]
    assert scene.camera == camera
    assert (scene.render.resolution_x, scene.render.resolution_y) == (8, 6)
    co = mesh_data(bpy.data.objects["tiny mesh"].data)["co"]
    rows, cols = np.mgrid[1:6, 0:8]
    expected = np.stack([cols.ravel() + 0.5, rows.ravel() + 0.5], axis=1)
    np.testing.assert_allclose(project_to_pixels(scene, camera, co), expected, atol=1e-4)


@pytest.mark.parametrize(
    ("width", "height", "fx", "fy", "cx", "cy"),
    [
        (640, 360, 500.0, 500.0, 300.0, 200.0),  # landscape, principal point off centre
        (360, 640, 450.0, 450.0, 150.0, 300.0),  # portrait (vertical sensor fit)
        (640, 360, 500.0, 400.0, 300.0, 200.0),  # non-square pixels, both ways round
        (360, 640, 400.0, 500.0, 150.0, 300.0),
    ],
)
def test_camera_intrinsics_reproject_exactly(
    bpy_empty, tmp_path, bundles, read_json, project_to_pixels, width, height, fx, fy, cx, cy
):
    """Lens, sensor fit, shift and pixel aspect together send known 3D points back to their pixels."""
    import json

    meta = read_json(bundles / "tiny.json")
    meta.update(
        name="cam",
        exr=None,
        layers=[],
        people=[],
        image={"width": width, "height": height, "source": "cam.png"},
    )
    meta["camera"].update(fx=fx, fy=fy, cx=cx, cy=cy)
    path = tmp_path / "cam.json"
    path.write_text(json.dumps(meta), encoding="utf-8")
    bpy = bpy_empty
    photo = bpy.data.images.new("photo", width, height)
    photo.filepath_raw = str(tmp_path / "cam.png")
    photo.file_format = "PNG"
    photo.save()
    import_bundle(bpy, path)
    camera = bpy.data.objects["cam camera"]
    assert camera.data.sensor_fit == ("HORIZONTAL" if width > height else "VERTICAL")
    # The plate must fill the camera frame exactly, also when pixels are not square (FIT would letterbox it).
    assert [p.frame_method for p in camera.data.background_images] == ["STRETCH"]
    pixels = np.array([[0.5, 0.5], [width - 0.5, height - 0.5], [cx, cy], [17.25, 101.75]])
    depth = np.array([1.0, 2.0, 3.0, 7.5])
    xyz = np.stack([(pixels[:, 0] - cx) / fx * depth, (pixels[:, 1] - cy) / fy * depth, depth], axis=1)
    world = xyz @ np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]]).T
    np.testing.assert_allclose(project_to_pixels(bpy.context.scene, camera, world), pixels, atol=1e-3)


def test_background_plate_is_the_source_image(bpy_empty, bundles, expected_tiny):
    bpy = bpy_empty
    import_bundle(bpy, bundles / "tiny.json")
    cam = bpy.data.objects["tiny camera"].data
    assert cam.show_background_images and len(cam.background_images) == 1
    image = cam.background_images[0].image
    assert tuple(image.size) == (8, 6)
    pixels = np.empty(8 * 6 * 4, dtype=np.float32)
    image.pixels.foreach_get(pixels)
    top_down = pixels.reshape(6, 8, 4)[::-1, :, :3]
    linear = np.clip(expected_tiny["color"], 0, 1)
    srgb = np.where(linear <= 0.0031308, linear * 12.92, 1.055 * linear ** (1 / 2.4) - 0.055)
    np.testing.assert_allclose(top_down, srgb, atol=0.5 / 255 + 1e-6)  # an 8-bit sRGB plate
    assert image.packed_file is not None  # survives saving the .blend


def test_full_size_armature_follows_the_figure(bpy_empty, bundles, read_json, to_blender):
    bpy = bpy_empty
    import_bundle(bpy, bundles / "figure.json", import_mesh=False)
    meta = read_json(bundles / "figure.json")
    bones = bpy.data.objects["figure person 0"].data.bones
    for name in ("left_wrist", "right_knee", "neck", "left_big_toe"):
        xyz = meta["people"][0]["keypoints_3d"][meta["keypoint_names"].index(name)]
        np.testing.assert_allclose(bones[name].head_local, to_blender(xyz), atol=1e-5)
    shin = np.array(bones["left_knee"].tail_local - bones["left_knee"].head_local)
    thigh = np.array(bones["left_hip"].tail_local - bones["left_hip"].head_local)
    assert shin[2] < -0.3 and thigh[2] < -0.3  # Z-up: both leg bones point down towards the feet


def test_other_keypoint_sets_with_their_own_pelvis(bpy_empty, bundles, tmp_path, read_json):
    """A keypoint set that has a 'pelvis' of its own: it is the root (no second, synthetic pelvis whose name
    would clash and shuffle the bones); duplicate names are refused because they become bone names."""
    import json

    meta = read_json(bundles / "tiny.json")
    names = ["pelvis", "left_hip", "right_hip", "left_knee", "right_knee", "neck", "nose"]
    keypoints = [[1.5 + k, 2.5, 0.9] for k in range(len(names))]
    meta.update(name="custom", exr=None, layers=[], keypoint_names=names, skeleton=[[1, 3], [2, 4]])
    meta["people"] = [{"id": 0, "bbox": [0, 0, 8, 6], "keypoints": keypoints}]
    (tmp_path / "custom.json").write_text(json.dumps(meta), encoding="utf-8")
    bpy = bpy_empty
    import_bundle(bpy, tmp_path / "custom.json")
    bones = bpy.data.objects["custom person 0"].data.bones
    assert sorted(bones.keys()) == sorted(names)
    assert [b.name for b in bones if b.parent is None] == ["pelvis"]
    assert bones["left_knee"].parent.name == "left_hip" and bones["left_hip"].parent.name == "pelvis"
    assert bones["neck"].parent.name == "pelvis" and bones["nose"].parent.name == "neck"
    head = np.array(bones["pelvis"].head_local)
    assert head[1] == pytest.approx(3.0)  # no 3D at all: on the default 3 m plane (Z-up: depth is +Y)
    meta["keypoint_names"] = [*names[:-1], "neck"]
    (tmp_path / "dupes.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(RuntimeError, match="distinct names"):
        import_bundle(bpy, tmp_path / "dupes.json")
    meta["keypoint_names"] = [*names[:-1], "nose_" + "x" * 70]  # Blender would cut the bone name
    (tmp_path / "long.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(RuntimeError, match="63 bytes"):
        import_bundle(bpy, tmp_path / "long.json")
