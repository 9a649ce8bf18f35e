"""Run inside ComfyUI's Python: what the POSE_KEYPOINT consumers people wire Sapiens2 into make of given frames.

The consumers are the real code: comfyui_controlnet_aux's decoder (`decode_json_as_poses`, which its render and
edit nodes use), its RenderPeopleKps and FacialPartColoringFromPoseKps nodes, and ComfyUI core's
SDPoseDrawKeypoints and SDPoseFaceBBoxes where the host has them (0.33; not 0.3.64). Nothing of this project is
imported here: the test process builds the frames and compares the results.

Usage: COMFYUI_PYTHON consumer_check.py COMFYUI_PATH CONTROLNET_AUX_PATH CASES_JSON OUT_DIR
CASES_JSON: {"<case>": <POSE_KEYPOINT: a list of frame dicts>, ...}. Writes OUT_DIR/images.npz (uint8 images
named "<case>.<consumer>") and prints one JSON object: per case the points each decoder kept, face boxes, ...
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np


def _load_controlnet_aux(path: Path):
    """controlnet_aux's pose post-processing module, without running the pack's __init__ (which imports every
    preprocessor); its own modules import `custom_controlnet_aux` from src/, as the pack arranges at start-up."""
    sys.path.insert(0, str(path / "src"))
    spec = importlib.util.spec_from_file_location(
        "cn_aux_pack", path / "__init__.py", submodule_search_locations=[str(path)]
    )
    sys.modules["cn_aux_pack"] = importlib.util.module_from_spec(spec)
    return importlib.import_module("cn_aux_pack.node_wrappers.pose_keypoint_postprocess")


def _uint8(image) -> np.ndarray:
    arr = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
    return np.clip(np.rint(arr * 255.0), 0, 255).astype(np.uint8)


def main() -> None:
    comfy, aux_path, cases_path, out_dir = sys.argv[1:5]
    os.chdir(comfy)
    sys.path.insert(0, comfy)
    from comfy.cli_args import args

    args.cpu = True
    post = _load_controlnet_aux(Path(aux_path))
    from custom_controlnet_aux.dwpose import decode_json_as_poses

    try:
        from comfy_extras import nodes_sdpose
    except ImportError:  # 0.3.64 has no SDPose nodes
        nodes_sdpose = None
    cases = json.loads(Path(cases_path).read_text())
    images: dict[str, np.ndarray] = {}
    report: dict = {"sdpose": nodes_sdpose is not None, "cases": {}}
    for name, frames in cases.items():
        entry: dict = {}
        poses, _, height, width = decode_json_as_poses(frames[0])
        entry["kept"] = [
            {
                "body": sum(k is not None for k in (p.body.keypoints or [])),
                "face": sum(k is not None for k in (p.face or [])),
                "hands": sum(k is not None for k in (p.left_hand or []))
                + sum(k is not None for k in (p.right_hand or [])),
            }
            for p in poses
        ]
        entry["canvas"] = [width, height]
        render = post.RenderPeopleKps()
        for part, flags in (("all", (True, True, True)), ("body", (True, False, False)),
                            ("hands", (False, True, False)), ("face", (False, False, True))):  # fmt: skip
            images[f"{name}.controlnet_aux.{part}"] = _uint8(render.render(frames, *flags)[0][0])
        colouring = post.FacialPartColoringFromPoseKps()
        colours = {part: post.LAPA_COLORS[part] for part in post.FACIAL_PARTS}
        images[f"{name}.face_colouring"] = _uint8(colouring.colorize(frames, "polygon", **colours)[0][0])
        if nodes_sdpose is not None:
            drawn = nodes_sdpose.SDPoseDrawKeypoints.execute(
                keypoints=frames, draw_body=True, draw_hands=True, draw_face=True, draw_feet=False,
                stick_width=4, face_point_size=3, score_threshold=0.3, draw_head=True,
            )  # fmt: skip
            images[f"{name}.sdpose_draw"] = _uint8(drawn.args[0][0])
            boxes = nodes_sdpose.SDPoseFaceBBoxes.execute(keypoints=frames, scale=1.5, force_square=True)
            entry["face_boxes"] = boxes.args[0]
        report["cases"][name] = entry
    np.savez_compressed(Path(out_dir) / "images.npz", **images)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
