"""Smoke test of the pack people wire our pose into: comfyui_controlnet_aux (real code, from ../shared/hosts).

On each host's server with both packs (the ``aux_server`` fixture): the pack imports next to ours, and its
POSE_KEYPOINT nodes (render, save, face colouring, upper-body tracking) accept our Pose output and run on it in
both keypoint flavours.  Deeper checks of what they read from it belong in their own tests on the same fixture.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.comfyui
POSE_NODES = ("RenderPeopleKps", "SavePoseKpsAsJsonFile", "FacialPartColoringFromPoseKps",
              "UpperBodyTrackingFromPoseKps")  # fmt: skip


def _node(class_type: str, **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs}


def _pose_prompt(flavour: str, prefix: str) -> dict:
    """Our Pose (whole picture as one person) into the pack's renderer and its JSON writer."""
    return {
        "1": _node("LoadImage", image="sapiens2_example.png"),
        "2": _node("Sapiens2ModelLoader", checkpoint="sapiens2_1b_pose.safetensors", download_task="pose",
                   download_size="1b", dtype="auto", attention="auto", compile=False),
        "3": _node("Sapiens2Pose", model=["2", 0], image=["1", 0], flip_test=False, keypoint_format=flavour,
                   neck_mode="auto", score_threshold=0.0, chunk_size=1),
        "4": _node("RenderPeopleKps", kps=["3", 0], render_body=True, render_hand=True, render_face=True),
        "5": _node("SaveImage", images=["4", 0], filename_prefix=f"{prefix}/render"),
        "6": _node("SavePoseKpsAsJsonFile", pose_kps=["3", 0], filename_prefix=f"{prefix}/kps"),
    }  # fmt: skip


def test_the_pack_imports_next_to_ours_with_its_pose_keypoint_nodes(aux_server, object_info):
    assert aux_server.import_failures() == []
    for name in POSE_NODES:
        assert name in object_info, name
        inputs = object_info[name]["input"]["required"]
        assert "POSE_KEYPOINT" in [spec[0] for spec in inputs.values()], (name, inputs)
    assert object_info["Sapiens2Pose"]["output"][0] == "POSE_KEYPOINT"


def _flavours(object_info) -> list[str]:
    spec = object_info["Sapiens2Pose"]["input"]["required"]["keypoint_format"]
    return spec[1]["options"] if spec[0] == "COMBO" else spec[0]


def test_its_render_and_save_nodes_run_on_our_pose(aux_server, client, object_info, comfy_harness):
    """Every flavour our Pose offers renders at the picture's size and saves as the pack's JSON file."""
    from PIL import Image

    flavours = _flavours(object_info)
    assert len(flavours) >= 2 and any("controlnet_aux" in f for f in flavours), flavours
    for i, flavour in enumerate(flavours):
        prefix = f"aux_smoke_{i}"
        entry = client.run(_pose_prompt(flavour, prefix))
        error = comfy_harness.execution_error(entry)
        assert error is None, (flavour, error and f"{error['node_type']}: {error['exception_message']}")
        rendered = entry["outputs"]["5"]["images"][0]
        with Image.open(aux_server.base / "output" / rendered["subfolder"] / rendered["filename"]) as im:
            assert im.size == (96, 128), (flavour, im.size)
        saved = sorted((aux_server.base / "output" / prefix).glob("kps_*.json"))
        assert len(saved) == 1, saved
        frames = json.loads(saved[0].read_text(encoding="utf-8"))
        assert frames[0]["canvas_width"] == 96 and frames[0]["canvas_height"] == 128
        assert len(frames[0]["people"]) == 1, (flavour, frames[0]["people"])


def test_its_face_and_body_tracking_nodes_run_on_our_pose(aux_server, client, object_info, comfy_harness):
    """The pack's other POSE_KEYPOINT consumers take our output without an error (the defaults of each)."""
    prompt = _pose_prompt(next(f for f in _flavours(object_info) if "controlnet_aux" in f), "aux_more")
    for name, node_id in (("FacialPartColoringFromPoseKps", "7"), ("UpperBodyTrackingFromPoseKps", "8")):
        info = object_info[name]
        inputs = {}
        for key, spec in info["input"]["required"].items():
            if spec[0] == "POSE_KEYPOINT":
                inputs[key] = ["3", 0]
            elif isinstance(spec[0], list):
                inputs[key] = spec[0][0]
            else:
                inputs[key] = (spec[1] if len(spec) > 1 else {}).get("default")
        prompt[node_id] = _node(name, **inputs)
        prompt[f"{node_id}9"] = _node("PreviewAny", source=[node_id, 0])
    entry = client.run(prompt)
    error = comfy_harness.execution_error(entry)
    assert error is None, f"{error['node_type']}: {error['exception_message']}" if error else ""
