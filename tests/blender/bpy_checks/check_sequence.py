"""Sequences: one keyframed armature per person (layered actions on 4.4+), heads on the joints every frame, options."""

from __future__ import annotations

import numpy as np
import pytest

FRAMES = 6


@pytest.fixture
def walk(bundles, read_json):
    """Per-frame keypoint names, 3D joints (OpenCV) and scores of the 6-frame sequence."""
    index = read_json(bundles / "walk.sequence.json")
    frames = [read_json(bundles / entry["json"]) for entry in index["frames"]]
    joints = np.array(
        [[np.nan] * 3 if xyz is None else xyz for f in frames for xyz in f["people"][0]["keypoints_3d"]]
    )
    return {
        "index": index,
        "names": frames[0]["keypoint_names"],
        "joints": joints.reshape(len(frames), -1, 3),
        "scores": np.array([f["people"][0]["keypoints"] for f in frames])[..., 2],
    }


def import_walk(bpy, bundles, **options):
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "walk.sequence.json"), **options) == {
        "FINISHED"
    }
    return bpy.data.objects["walk person 0"]


def test_scene_range_and_fps(bpy_empty, bundles, walk):
    import_walk(bpy_empty, bundles)
    scene = bpy_empty.context.scene
    assert (scene.frame_start, scene.frame_end) == (1, FRAMES)
    assert scene.render.fps / scene.render.fps_base == pytest.approx(walk["index"]["fps"])


def test_action_has_a_key_per_frame(bpy_empty, bundles):
    """A layered action with one slot where Blender has them (4.4+), the legacy fcurves of the action before."""
    arm = import_walk(bpy_empty, bundles)
    anim = arm.animation_data
    action = anim.action
    if hasattr(anim, "action_slot"):
        slot = anim.action_slot
        assert slot is not None and len(action.layers) == 1
        fcurves = action.layers[0].strips[0].channelbag(slot).fcurves
    else:  # Blender 4.2/4.3
        assert bpy_empty.app.version < (4, 4, 0)
        fcurves = action.fcurves
    bones = len(arm.data.bones)
    assert len(fcurves) == bones * (3 + 4 + 1)  # location, quaternion, confidence
    assert {len(fc.keyframe_points) for fc in fcurves} == {FRAMES}
    frames = np.empty(FRAMES * 2, dtype=np.float32)
    fcurves[0].keyframe_points.foreach_get("co", frames)
    np.testing.assert_array_equal(frames[0::2], np.arange(1, FRAMES + 1))


def test_bone_heads_follow_the_joints_every_frame(bpy_empty, bundles, walk, to_blender):
    bpy = bpy_empty
    arm = import_walk(bpy, bundles)
    names = walk["names"]
    assert np.nanmax(np.abs(np.diff(walk["joints"], axis=0))) > 0.01  # the figure really moves
    for t in range(FRAMES):
        bpy.context.scene.frame_set(t + 1)
        for k, name in enumerate(names):
            on_figure = walk["joints"][t, k, 2] < 3.5  # the backdrop is at 4 m; those joints are re-placed
            if np.isfinite(walk["joints"][t, k]).all() and walk["scores"][t, k] >= 0.3 and on_figure:
                np.testing.assert_allclose(
                    arm.pose.bones[name].head, to_blender(walk["joints"][t, k]), atol=1e-4
                )
        elbow, wrist = arm.pose.bones["left_elbow"], arm.pose.bones["left_wrist"]
        direction = np.array(elbow.tail - elbow.head)
        target = np.array(wrist.head - elbow.head)
        cosine = direction @ target / np.linalg.norm(direction) / np.linalg.norm(target)
        assert cosine > 0.9999  # the forearm bone turns to keep pointing at the wrist


def test_confidence_is_keyframed(bpy_empty, bundles, walk):
    bpy = bpy_empty
    arm = import_walk(bpy, bundles)
    k = walk["names"].index("left_knee")
    bpy.context.scene.frame_set(3)
    assert arm.pose.bones["left_knee"]["confidence"] == pytest.approx(walk["scores"][2, k], abs=1e-6)


def test_smoothing_averages_neighbouring_frames(bpy_empty, bundles, walk, to_blender):
    bpy = bpy_empty
    arm = import_walk(bpy, bundles, smoothing=3)
    k = walk["names"].index("left_wrist")
    bpy.context.scene.frame_set(3)
    expected = to_blender(walk["joints"][1:4, k].mean(axis=0))
    np.testing.assert_allclose(arm.pose.bones["left_wrist"].head, expected, atol=1e-4)


def test_mesh_per_frame_shows_one_mesh_per_frame(bpy_empty, bundles):
    bpy = bpy_empty
    import_walk(bpy, bundles, mesh_per_frame=True)
    meshes = sorted(o.name for o in bpy.data.objects if o.type == "MESH")
    assert meshes == [f"walk mesh {f:04d}" for f in range(1, FRAMES + 1)]
    # One material for the whole sequence: one look to edit, not one per frame.
    assert {o.data.materials[0] for o in bpy.data.objects if o.type == "MESH"} == {bpy.data.materials[0]}
    assert len(bpy.data.materials) == 1
    for frame in (1, 4, FRAMES):
        bpy.context.scene.frame_set(frame)
        visible = [
            o.name for o in bpy.data.objects if o.type == "MESH" and not o.hide_render and not o.hide_viewport
        ]
        assert visible == [f"walk mesh {frame:04d}"]


def test_without_mesh_per_frame_there_are_no_meshes(bpy_empty, bundles):
    bpy = bpy_empty
    import_walk(bpy, bundles)
    assert not [o for o in bpy.data.objects if o.type == "MESH"]
    assert {o.type for o in bpy.data.objects} == {"ARMATURE", "CAMERA"}


def test_points_on_a_sequence_say_they_are_not_built(addon, bpy_empty, bundles):
    options = addon.parse.options.ImportOptions(import_points=True)
    result = addon.build.scene.import_files(bpy_empty.context, [bundles / "walk.sequence.json"], options)
    assert any("'Points' is for single frames" in w for w in result.warnings)


def test_missing_and_low_score_joints_are_interpolated_in_time(
    bpy_empty, bundles, walk, walk_copy, to_blender
):
    """Frame 3 loses left_wrist's 3D and left_knee's score: both come from frames 2 and 4."""
    import json

    frame3 = json.loads((walk_copy / "walk_0003.json").read_text(encoding="utf-8"))
    wrist, knee = walk["names"].index("left_wrist"), walk["names"].index("left_knee")
    frame3["people"][0]["keypoints_3d"][wrist] = None
    frame3["people"][0]["keypoints"][knee][2] = 0.05
    (walk_copy / "walk_0003.json").write_text(json.dumps(frame3), encoding="utf-8")
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json")) == {
        "FINISHED"
    }
    arm = bpy.data.objects["walk person 0"]
    bpy.context.scene.frame_set(3)
    for k, name in ((wrist, "left_wrist"), (knee, "left_knee")):
        expected = to_blender((walk["joints"][1, k] + walk["joints"][3, k]) / 2)
        np.testing.assert_allclose(arm.pose.bones[name].head, expected, atol=1e-4)


def test_people_follow_their_track_id_and_hide_when_absent(bpy_empty, bundles, read_json, project_to_pixels):
    """Per-frame ``id`` is only an index: armatures follow ``track_id``, hidden on frames without the person."""
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tracked.sequence.json")) == {
        "FINISHED"
    }
    armatures = sorted(o.name for o in bpy.data.objects if o.type == "ARMATURE")
    assert armatures == ["tracked person 3", "tracked person 7"]
    assert bpy.data.collections["Sapiens2 tracked"]["sapiens2"]["people"] == 2  # the N-panel's count
    frames = [read_json(bundles / f"tracked_{t:04d}.json") for t in range(1, 6)]
    nose = frames[0]["keypoint_names"].index("nose")
    for track in (3, 7):
        arm = bpy.data.objects[f"tracked person {track}"]
        assert arm["sapiens2_person"] == track
        for t, frame in enumerate(frames):
            bpy.context.scene.frame_set(t + 1)
            person = next((p for p in frame["people"] if p["track_id"] == track), None)
            assert arm.hide_viewport == arm.hide_render == (person is None)
            if person is not None:
                head = np.array(arm.matrix_world @ arm.pose.bones["nose"].head)
                pixel = project_to_pixels(bpy.context.scene, bpy.context.scene.camera, head[None])[0]
                np.testing.assert_allclose(pixel, person["keypoints"][nose][:2], atol=1e-3)


def test_camera_follows_each_frames_intrinsics(bpy_empty, bundles, walk_copy, project_to_pixels):
    """Each frame's pointmap implies its own focal length: the camera's lens and shift are keyed per frame, so
    points of frame t (and its mesh and joints) land on frame t's pixels, not only on frame 1."""
    import json

    cameras = []
    for t in range(1, FRAMES + 1):
        path = walk_copy / f"walk_{t:04d}.json"
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["camera"].update(fx=meta["camera"]["fx"] * (1 + 0.04 * t), cx=meta["camera"]["cx"] + t)
        meta["camera"]["fy"] = meta["camera"]["fx"]
        path.write_text(json.dumps(meta), encoding="utf-8")
        cameras.append(meta["camera"])
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json")) == {
        "FINISHED"
    }
    scene = bpy.context.scene
    pixels = np.array([[0.5, 0.5], [95.5, 127.5], [40.25, 70.75]])
    depth = np.array([1.0, 2.5, 4.0])
    for t, cam in enumerate(cameras):
        scene.frame_set(t + 1)
        xyz = np.stack(
            [
                (pixels[:, 0] - cam["cx"]) / cam["fx"] * depth,
                (pixels[:, 1] - cam["cy"]) / cam["fy"] * depth,
                depth,
            ],
            axis=1,
        )
        world = xyz @ np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]]).T
        np.testing.assert_allclose(project_to_pixels(scene, scene.camera, world), pixels, atol=1e-3)


def test_plate_follows_the_frames_when_the_source_images_are_there(addon, bpy_empty, walk_copy):
    """With the frames' source images next to the bundle the plate is an image sequence on the scene frames
    (file numbers need not equal frame numbers); without them the plate is frame 1 and a warning says why."""
    import json

    bpy = bpy_empty
    for t in range(1, FRAMES + 1):
        image = bpy.data.images.new(f"src{t}", 4, 4)
        image.filepath_raw = str(walk_copy / f"plate_{t + 10:04d}.png")
        image.file_format = "PNG"
        image.save()
        path = walk_copy / f"walk_{t:04d}.json"
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["image"]["source"] = f"plate_{t + 10:04d}.png"
        path.write_text(json.dumps(meta), encoding="utf-8")
    bpy.ops.wm.read_homefile(use_empty=True)
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json")) == {
        "FINISHED"
    }
    plate = bpy.context.scene.camera.data.background_images[0]
    assert plate.image.source == "SEQUENCE"
    for t in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(t)
        shown = plate.image.filepath_from_user(image_user=plate.image_user)
        assert shown.endswith(f"plate_{t + 10:04d}.png"), (t, shown)

    (walk_copy / "plate_0013.png").unlink()  # one source frame missing: a still of the first frame
    result = addon.build.scene.import_files(
        bpy.context, [walk_copy / "walk.sequence.json"], addon.parse.options.ImportOptions()
    )
    plate = bpy.context.scene.camera.data.background_images[0]
    assert plate.image.source == "FILE" and plate.image.filepath.endswith("plate_0011.png")
    assert any("plate shows frame 1 only" in w for w in result.warnings)


def test_every_frame_places_joints_the_same_way(bpy_empty, bundles, walk, walk_copy, to_blender):
    """Frame 1's pixels are read (for the plate) but the other frames' are not: joints must still be judged
    alike, or a joint whose 3D lies on a background pixel pops on frame 1 only."""
    import json

    wrist = walk["names"].index("left_wrist")
    meta = json.loads((walk_copy / "walk_0001.json").read_text(encoding="utf-8"))
    cam = meta["camera"]
    ray = np.array([(0.5 - cam["cx"]) / cam["fx"], (0.5 - cam["cy"]) / cam["fy"], 1.0])  # a background corner
    for t in range(1, FRAMES + 1):
        path = walk_copy / f"walk_{t:04d}.json"
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["people"][0]["keypoints"][wrist] = [0.5, 0.5, 0.9]
        meta["people"][0]["keypoints_3d"][wrist] = (ray * (2.0 + 0.1 * t)).tolist()
        path.write_text(json.dumps(meta), encoding="utf-8")
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json")) == {
        "FINISHED"
    }
    arm = bpy.data.objects["walk person 0"]
    for t in (1, 2, FRAMES):
        bpy.context.scene.frame_set(t)
        expected = to_blender(ray * (2.0 + 0.1 * t))
        np.testing.assert_allclose(arm.pose.bones["left_wrist"].head, expected, atol=1e-4)


def test_gaps_in_frame_numbers_interpolate_by_frame(bpy_empty, walk, walk_copy, to_blender):
    """The CLI keeps a numbered plate's gaps (1001, 1003, …): a missing joint is interpolated by frame number."""
    import json

    index = json.loads((walk_copy / "walk.sequence.json").read_text(encoding="utf-8"))
    numbers = [1, 2, 4, 10, 11, 12]
    for entry, number in zip(index["frames"], numbers):
        entry["frame"] = number
    (walk_copy / "walk.sequence.json").write_text(json.dumps(index), encoding="utf-8")
    wrist = walk["names"].index("left_wrist")
    frame = json.loads((walk_copy / "walk_0003.json").read_text(encoding="utf-8"))
    frame["people"][0]["keypoints_3d"][wrist] = None
    (walk_copy / "walk_0003.json").write_text(json.dumps(frame), encoding="utf-8")
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json")) == {
        "FINISHED"
    }
    scene = bpy.context.scene
    assert (scene.frame_start, scene.frame_end) == (1, 12)
    scene.frame_set(4)
    before, after = walk["joints"][1, wrist], walk["joints"][3, wrist]
    expected = to_blender(before + (4 - 2) / (10 - 2) * (after - before))
    np.testing.assert_allclose(
        bpy.data.objects["walk person 0"].pose.bones["left_wrist"].head, expected, atol=1e-4
    )


def test_plate_plays_the_source_video(bpy_empty, bundles, walk_copy):
    """A sequence the CLI read from a video names the video in every frame: the plate plays it, frame n of the
    bundle on frame n of the video."""
    import json
    import shutil

    if not (bundles / "walkclip.mp4").is_file():
        pytest.skip("PyAV (test extra) is needed to write the test video")
    shutil.copy(bundles / "walkclip.mp4", walk_copy / "walkclip.mp4")
    for t in range(1, FRAMES + 1):
        path = walk_copy / f"walk_{t:04d}.json"
        meta = json.loads(path.read_text(encoding="utf-8"))
        meta["image"]["source"] = "walkclip.mp4"
        path.write_text(json.dumps(meta), encoding="utf-8")
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json")) == {
        "FINISHED"
    }
    plate = bpy.context.scene.camera.data.background_images[0]
    assert plate.image.source == "MOVIE"
    for t in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(t)
        assert plate.image_user.frame_current == t


def _set_run(path, run_id):
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    if run_id is None:
        data.pop("run", None)
    else:
        data["run"] = {**(data.get("run") or {}), "id": run_id}
    path.write_text(json.dumps(data), encoding="utf-8")


def test_frames_of_different_runs_are_refused(bpy_empty, walk_copy, read_json):
    """One frame re-written by another run: the operator reports the mix and imports nothing."""
    bpy = bpy_empty
    index = read_json(walk_copy / "walk.sequence.json")
    first = read_json(walk_copy / index["frames"][0]["json"])
    assert index["run"]["id"] == first["run"]["id"]  # the writer stamps the index and every frame
    _set_run(walk_copy / index["frames"][2]["json"], "20250101T000000Z-00000000")
    objects = len(bpy.data.objects)
    with pytest.raises(
        RuntimeError, match=r"frames come from different runs .*walk_0003\.json from run 2025"
    ):
        bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json"))
    assert len(bpy.data.objects) == objects


def test_frames_without_run_ids_still_import(bpy_empty, walk_copy, read_json):
    """Version 1.0 files name no run: a sequence of them is not refused for lacking one."""
    index = read_json(walk_copy / "walk.sequence.json")
    for path in [walk_copy / "walk.sequence.json", *(walk_copy / e["json"] for e in index["frames"])]:
        _set_run(path, None)
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk.sequence.json")) == {
        "FINISHED"
    }
    assert "walk person 0" in bpy.data.objects
