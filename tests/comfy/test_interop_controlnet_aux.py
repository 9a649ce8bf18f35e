"""POSE_KEYPOINT and Draw Pose judged by their consumers: comfyui_controlnet_aux 1.1.5 and ComfyUI core's SDPose
nodes, running their own code in ComfyUI's Python (consumers.py / consumer_check.py).

The person is `core.testing.people.standing_person` with heatmap-like scores (0.45-0.98, below 1 as real scores
are). "legacy" is what the previous default ("core (real scores)") wrote for it: real scores and the jaw line as
(0, 0, 0). Runs once per host of the matrix (conftest.py), on the comfyui_controlnet_aux it set up.
"""

from __future__ import annotations

import io
import json
import sys
import urllib.parse

import numpy as np
import pytest
from PIL import Image
from sapiens2_studio.comfy_nodes.labels import POSE_FORMATS, first
from sapiens2_studio.core.formats import keypoints as kf
from sapiens2_studio.core.studio.views import openpose_render
from sapiens2_studio.core.testing.people import standing_person

pytestmark = pytest.mark.comfyui
WIDTH, HEIGHT = 512, 768
PARTS = {"body": 18, "face": 70, "hands": 42}
SDPOSE_SINCE = "0.33.0"  # the oldest host of the matrix with ComfyUI core's SDPose nodes


consumers = sys.modules["sapiens2_comfy_consumers"]  # loaded by conftest.py (tests are not a package)


def _person() -> np.ndarray:
    rng = np.random.default_rng(7)
    return standing_person(score=rng.uniform(0.45, 0.98, 308).astype(np.float32))


def _frame(person: dict) -> list[dict]:
    return [{"people": [person], "canvas_width": WIDTH, "canvas_height": HEIGHT}]


def _legacy(kp: np.ndarray) -> dict:
    """The previous default's person: real scores, and the 16 jaw points Goliath lacks written as (0, 0, 0)."""
    person = kf.person_to_openpose(kp, flavor="comfyui")
    face = np.array(person["face_keypoints_2d"]).reshape(70, 3)
    face[[k for k in range(17) if k != 8]] = 0.0
    person["face_keypoints_2d"] = face.ravel().tolist()
    return person


def _face_region(kp: np.ndarray, margin: float) -> tuple[float, float, float, float]:
    face = kf.to_face70(kp)
    return (*(face[:, :2].min(axis=0) - margin), *(face[:, :2].max(axis=0) + margin))


@pytest.fixture(scope="module")
def consumed(comfy_host, controlnet_aux, tmp_path_factory):
    kp = _person()
    cases = {
        "default": _frame(kf.person_to_openpose(kp)),
        "core": _frame(kf.person_to_openpose(kp, flavor="comfyui")),
        "core_midpoint_neck": _frame(kf.person_to_openpose(kp, flavor="comfyui", neck="shoulder_midpoint")),
        "controlnet_aux": _frame(kf.person_to_openpose(kp, flavor="controlnet_aux")),
        "legacy": _frame(_legacy(kp)),
    }
    report, images = consumers.run_consumers(
        comfy_host.checkout, comfy_host.python, controlnet_aux, cases, tmp_path_factory.mktemp("consumers")
    )
    return kp, cases, report, images


def test_controlnet_aux_keeps_every_point_of_the_default_output(consumed):
    _, _, report, _ = consumed
    kept = {
        name: report["cases"][name]["kept"][0] for name in ("default", "controlnet_aux", "core", "legacy")
    }
    # Before: real scores below 1 are all dropped by controlnet_aux's decoder. After: every point above 0.3.
    assert kept["core"] == kept["legacy"] == {"body": 0, "face": 0, "hands": 0}, kept
    assert kept["default"] == kept["controlnet_aux"] == PARTS, kept


def _no_sdpose_on_an_older_host(report: dict, comfy_host) -> bool:
    """True where the host predates ComfyUI core's SDPose nodes (0.33 has them, 0.3.64 not): nothing to check
    there but that they are indeed absent; a newer host without them fails."""
    if report["sdpose"]:
        return False
    assert comfy_host.older_than(SDPOSE_SINCE), f"{comfy_host.id} has no SDPose nodes"
    return True


def test_sdpose_draws_the_default_output_like_the_real_scores(consumed, comfy_host):
    """ComfyUI's own renderer thresholds real scores at 0.3; the 0/1 confidences draw exactly the same points
    (given the same neck: the real-score format's default neck is Sapiens2's anatomical one)."""
    _, _, report, images = consumed
    if _no_sdpose_on_an_older_host(report, comfy_host):
        return
    assert np.array_equal(images["default.sdpose_draw"], images["core_midpoint_neck.sdpose_draw"])
    assert consumers.drawn(images["default.sdpose_draw"]).sum() > 10_000


def test_face_box_covers_the_face_not_the_corner(consumed, comfy_host):
    kp, _, report, _ = consumed
    if _no_sdpose_on_an_older_host(report, comfy_host):
        return
    x1, y1, x2, y2 = _face_region(kp, 0.0)
    (box,) = report["cases"]["default"]["face_boxes"][0]
    (legacy,) = report["cases"]["legacy"]["face_boxes"][0]
    # Before: the (0, 0) jaw placeholders pull the box to the image corner.
    assert (legacy["x"], legacy["y"]) == (0, 0) and legacy["width"] >= x2, legacy
    # After: a square box around the face, 1.5x its area (SDPoseFaceBBoxes' default scale).
    assert (
        box["x"] <= x1 and box["y"] <= y1 and box["x"] + box["width"] >= x2 and box["y"] + box["height"] >= y2
    )
    face_w, face_h = x2 - x1, y2 - y1
    assert box["width"] * box["height"] < 2.5 * face_w * face_h, (box, face_w, face_h)


def test_face_colouring_stays_on_the_face(consumed):
    kp, _, _, images = consumed
    x1, y1, x2, y2 = (int(v) for v in _face_region(kp, 4.0))

    def outside(image: np.ndarray) -> int:
        mask = consumers.drawn(image).copy()
        mask[max(y1, 0) : y2 + 1, max(x1, 0) : x2 + 1] = False
        return int(mask.sum())

    assert outside(images["legacy.face_colouring"]) > 1000  # wedges from the face to (0, 0)
    assert outside(images["default.face_colouring"]) == 0
    assert consumers.drawn(images["default.face_colouring"]).sum() > 1500  # the skin polygon is drawn


@pytest.mark.parametrize("part", ["all", "body", "hands", "face"])
def test_draw_pose_matches_controlnet_aux_pixelwise(consumed, part):
    """Draw Pose against RenderPeopleKps on the same POSE_KEYPOINT (the default output)."""
    _, cases, _, images = consumed
    flags = {"all": {}, "body": {"hands": False, "face": False}, "hands": {"body": False, "face": False},
             "face": {"body": False, "hands": False}}[part]  # fmt: skip
    ours = openpose_render.draw_frame(np.zeros((HEIGHT, WIDTH, 3), np.uint8), cases["default"][0], **flags)
    result = consumers.agreement(ours, images[f"default.controlnet_aux.{part}"])
    minimum = {"all": 0.975, "body": 0.975, "hands": 0.985, "face": 0.999}[part]
    assert result["iou"] >= minimum and result["colour_error"] < 1.0, result


# ------------------------------------------------------------------ a real server with controlnet_aux beside us


def _pose_graph(label: str, with_sdpose: bool) -> dict:
    nodes = {
        "1": {"class_type": "LoadImage", "inputs": {"image": "sapiens2_example.png"}},
        "2": {"class_type": "Sapiens2ModelLoader",
              "inputs": {"checkpoint": "sapiens2_1b_pose.safetensors", "download_task": "pose",
                         "download_size": "1b", "dtype": "auto", "attention": "auto", "compile": False}},
        "3": {"class_type": "Sapiens2Pose",
              "inputs": {"model": ["2", 0], "image": ["1", 0], "flip_test": False, "keypoint_format": label,
                         "neck_mode": "auto", "score_threshold": 0.3, "chunk_size": 1}},
        "4": {"class_type": "RenderPeopleKps",
              "inputs": {"kps": ["3", 0], "render_body": True, "render_hand": True, "render_face": True}},
        "5": {"class_type": "SaveImage", "inputs": {"images": ["4", 0], "filename_prefix": "interop/aux"}},
        "6": {"class_type": "Sapiens2DrawPose",
              "inputs": {"keypoints": ["3", 0], "draw_body": True, "draw_hands": True, "draw_face": True,
                         "stick_width": 4, "point_radius": 4, "score_threshold": 0.3}},
        "7": {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "interop/ours"}},
    }  # fmt: skip
    if with_sdpose:
        nodes["8"] = {"class_type": "SDPoseDrawKeypoints",
                      "inputs": {"keypoints": ["3", 0], "draw_body": True, "draw_hands": True, "draw_face": True,
                                 "draw_feet": False, "stick_width": 4, "face_point_size": 3,
                                 "score_threshold": 0.3, "draw_head": True}}  # fmt: skip
        nodes["9"] = {
            "class_type": "SaveImage",
            "inputs": {"images": ["8", 0], "filename_prefix": "interop/sdpose"},
        }
    return nodes


def _real_scores(person: dict, midpoint_neck: bool) -> dict[str, np.ndarray]:
    """Per part, the scores of the real-score output; with `midpoint_neck` the neck's score is the smaller of the
    two shoulders' (the default output's shoulder-midpoint neck) instead of the anatomical neck's."""
    body = np.array(person["pose_keypoints_2d"]).reshape(18, 3)[:, 2]
    if midpoint_neck:
        body[1] = min(body[2], body[5])
    hands = [
        np.array(person[k]).reshape(21, 3)[:, 2]
        for k in ("hand_left_keypoints_2d", "hand_right_keypoints_2d")
    ]
    return {
        "body": body,
        "face": np.array(person["face_keypoints_2d"]).reshape(70, 3)[:, 2],
        "hands": np.concatenate(hands),
    }


def _saved(client, entry: dict, node: str) -> np.ndarray:
    (image,) = entry["outputs"][node]["images"]
    query = urllib.parse.urlencode({k: image[k] for k in ("filename", "subfolder", "type")})
    return np.asarray(Image.open(io.BytesIO(client.get_bytes(f"/view?{query}"))).convert("RGB"))


def test_sapiens2_pose_into_controlnet_aux_in_a_real_server(
    aux_server, client, comfy_harness, comfy_host, controlnet_aux, tmp_path
):
    """Sapiens2 Pose → RenderPeopleKps, Draw Pose (and SDPoseDrawKeypoints): the default format is drawn in full
    by every consumer, and Draw Pose agrees with controlnet_aux's rendering pixel by pixel."""
    info = client.get("/object_info")
    assert "RenderPeopleKps" in info, "controlnet_aux did not load:\n" + aux_server.log()[-3000:]
    with_sdpose = "SDPoseDrawKeypoints" in info
    entries, frames = {}, {}
    for name, label in (("default", first(POSE_FORMATS)), ("core", "core (real scores)")):
        entry = client.run(_pose_graph(label, with_sdpose), timeout=300)
        assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
        entries[name] = entry
        frames[f"server_{name}"] = json.loads(entry["outputs"]["3"]["openpose_json"][0])
    report, _ = consumers.run_consumers(
        comfy_host.checkout, comfy_host.python, controlnet_aux, frames, tmp_path
    )
    kept = {name: report["cases"][name]["kept"][0] for name in frames}
    core_person = frames["server_core"][0]["people"][0]
    # Before (real scores): controlnet_aux keeps only the points scored 1 or more. After (the default): every
    # point scored 0.3 or more, i.e. every point the real-score output says was found.
    real = _real_scores(core_person, midpoint_neck=False)
    assert kept["server_core"] == {part: int((s >= 1.0).sum()) for part, s in real.items()}, kept
    real = _real_scores(core_person, midpoint_neck=True)
    assert kept["server_default"] == {part: int((s >= 0.3).sum()) for part, s in real.items()}, kept
    assert sum(kept["server_default"].values()) > sum(kept["server_core"].values())
    theirs = _saved(client, entries["default"], "5")
    ours = _saved(client, entries["default"], "7")
    result = consumers.agreement(ours, theirs)
    # A tiny test model's skeleton is a tangle of overlapping limbs: edge pixels decide more of the score here.
    assert result["iou"] >= 0.96 and result["colour_error"] < 5.0, result
    assert consumers.drawn(_saved(client, entries["core"], "5")).sum() < 0.9 * consumers.drawn(theirs).sum()
    if with_sdpose:
        assert (
            consumers.drawn(_saved(client, entries["default"], "9")).sum()
            > 0.8 * consumers.drawn(theirs).sum()
        )
