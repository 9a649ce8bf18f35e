"""Integration tests against real ComfyUI servers, once per host of the matrix (tests/comfy/hosts.py).

One server per host: the pack must import, /object_info must list every node with the declared socket types,
every shipped API workflow must run on tiny synthetic checkpoints, every UI workflow must type-check and carry
its model requirements, and bad input must give a node error with a clear message while the server keeps serving.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.comfyui

M, IMG, MASK = "SAPIENS2_MODEL", "IMAGE", "MASK"
FRAMES = (
    "IMAGE,VIDEO"  # a frames socket: an IMAGE batch or ComfyUI's core VIDEO (both supported hosts have it)
)
# node id -> (input name -> socket type, output types); combos show as COMBO.
EXPECTED = {
    "Sapiens2ModelLoader": (
        {"checkpoint": "COMBO", "download_task": "COMBO", "download_size": "COMBO", "dtype": "COMBO",
         "attention": "COMBO", "compile": "BOOLEAN"},
        [M, "STRING"],
    ),
    "Sapiens2Pose": (
        {"model": M, "image": FRAMES, "bboxes": "(boxes)", "seg_model": M, "flip_test": "BOOLEAN",
         "keypoint_format": "COMBO", "neck_mode": "COMBO", "score_threshold": "FLOAT", "chunk_size": "INT",
         "when_nobody_found": "COMBO", "smooth": "BOOLEAN", "fps": "FLOAT"},
        ["POSE_KEYPOINT", "SAPIENS2_POSE"],
    ),
    "Sapiens2DrawPose": (
        {"keypoints": "POSE_KEYPOINT", "pose": "SAPIENS2_POSE", "image": IMG, "draw_body": "BOOLEAN",
         "draw_hands": "BOOLEAN", "draw_face": "BOOLEAN", "stick_width": "INT", "point_radius": "INT",
         "score_threshold": "FLOAT", "draw_feet": "BOOLEAN"},
        [IMG],
    ),
    "Sapiens2Segment": ({"model": M, "image": IMG, "chunk_size": "INT"}, ["SAPIENS2_SEG", IMG, MASK]),
    "Sapiens2BodyPartMask": (
        {"seg": "SAPIENS2_SEG", "preset": "COMBO", "classes": "STRING", "exclude": "STRING", "grow": "INT",
         "feather": "FLOAT", "invert": "BOOLEAN", "person": "INT", "person_mask": MASK},
        [MASK],
    ),
    "Sapiens2Matte": (
        {"model": M, "image": IMG, "chunk_size": "INT", "background_color": "STRING", "background": IMG},
        ["SAPIENS2_MATTING", MASK, IMG, IMG],
    ),
    "Sapiens2Normals": (
        {"model": M, "image": IMG, "mask": MASK, "chunk_size": "INT", "convention": "COMBO"},
        ["SAPIENS2_NORMAL", IMG],
    ),
    "Sapiens2Albedo": ({"model": M, "image": IMG, "mask": MASK, "chunk_size": "INT"}, [IMG]),
    "Sapiens2Pointmap": (
        {"model": M, "image": IMG, "mask": MASK, "chunk_size": "INT", "near_is_bright": "BOOLEAN",
         "normalize_per_image": "BOOLEAN"},
        ["SAPIENS2_POINTMAP", IMG, MASK],
    ),
    "Sapiens2DirectionalLight": (
        {"azimuth": "FLOAT", "elevation": "FLOAT", "color": "STRING", "intensity": "FLOAT",
         "lights": "SAPIENS2_LIGHTS"},
        ["SAPIENS2_LIGHTS"],
    ),
    "Sapiens2Relight": (
        {"normals": "SAPIENS2_NORMAL", "image": IMG, "albedo": IMG, "mask": MASK, "lights": "SAPIENS2_LIGHTS",
         "environment": IMG, "environment_intensity": "FLOAT", "environment_rotation": "FLOAT",
         "environment_is_linear": "BOOLEAN", "ambient": "FLOAT", "ambient_color": "STRING", "specular": "FLOAT",
         "shininess": "FLOAT", "pointmap": "SAPIENS2_POINTMAP", "shadows": "BOOLEAN", "shadow_softness": "FLOAT",
         "exposure": "FLOAT", "background": IMG, "foreground": IMG},
        [IMG, IMG],
    ),
    "Sapiens2SaveCaptureBundle": (
        {"image": FRAMES, "filename_prefix": "STRING", "pose": "SAPIENS2_POSE", "seg": "SAPIENS2_SEG",
         "normals": "SAPIENS2_NORMAL", "albedo": IMG, "pointmap": "SAPIENS2_POINTMAP", "mask": MASK, "fps": "FLOAT",
         "matting": "SAPIENS2_MATTING", "exr_compression": "COMBO", "smooth": "BOOLEAN",
         "task_results": "SAPIENS2_TASK_RESULTS"},
        ["STRING"],
    ),
    "Sapiens2ExportMesh": (
        {"pointmap": "SAPIENS2_POINTMAP", "image": IMG, "mask": MASK, "normals": "SAPIENS2_NORMAL",
         "format": "COMBO", "filename_prefix": "STRING", "max_edge_ratio": "FLOAT"},
        ["STRING"],  # + FILE_3D on hosts that have ComfyUI's 3D file type
    ),
    "Sapiens2SaveUSD": (
        {"image": FRAMES, "pointmap": "SAPIENS2_POINTMAP", "format": "COMBO", "filename_prefix": "STRING",
         "fps": "FLOAT", "max_edge_ratio": "FLOAT", "pose": "SAPIENS2_POSE", "seg": "SAPIENS2_SEG",
         "normals": "SAPIENS2_NORMAL", "albedo": IMG, "mask": MASK, "matting": "SAPIENS2_MATTING",
         "smooth": "BOOLEAN"},
        ["STRING"],
    ),
    "Sapiens2RunTask": (
        {"model": M, "image": IMG, "task": "COMBO", "chunk_size": "INT"},
        [IMG, MASK, "SAPIENS2_TASK_RESULTS"],
    ),
}  # fmt: skip
WORKFLOW_NAMES = (
    "sapiens2_relight",
    "sapiens2_tryon_mask",
    "sapiens2_pose_controlnet",
    "sapiens2_blender_export",
    "sapiens2_video_pose_controlnet",
    "sapiens2_video_relight",
)
VIDEO_SUFFIXES = (".mp4", ".webm", ".mov", ".mkv")


def _api(comfy_harness, name: str) -> dict:
    prompt = comfy_harness.load_json(comfy_harness.API_WORKFLOWS / f"{name}.json")
    for node in prompt.values():
        if node["class_type"] == "Sapiens2ExportMesh":
            # Synthetic weights give noise depth: keep every triangle so the mesh is not empty.
            node["inputs"]["max_edge_ratio"] = 10.0
    return prompt


def _image_size(client, ref: dict) -> tuple[int, int, str]:
    from PIL import Image

    data = client.get_bytes(
        f"/view?filename={ref['filename']}&subfolder={ref['subfolder']}&type={ref['type']}"
    )
    with Image.open(io.BytesIO(data)) as im:
        return im.width, im.height, im.mode


def _video_info(client, ref: dict) -> tuple[int, int, int, float]:
    """(frames, width, height, frame rate) of a saved video, decoded with PyAV."""
    import av

    data = client.get_bytes(
        f"/view?filename={ref['filename']}&subfolder={ref['subfolder']}&type={ref['type']}"
    )
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        frames = [f for f in container.decode(stream)]
        return len(frames), frames[0].width, frames[0].height, float(stream.average_rate)


def host_has_bounding_boxes(object_info: dict) -> bool:
    """Whether this core knows the list type BOUNDING_BOXES (newer cores use it in their own node inputs)."""
    return any(
        "BOUNDING_BOXES" in str(spec[0]).split(",")
        for info in object_info.values()
        if not info["name"].startswith("Sapiens2")
        for group in ("required", "optional")
        for spec in info["input"].get(group, {}).values()
    )


def box_types(object_info: dict) -> str:
    return "BOUNDING_BOX,BOUNDING_BOXES" if host_has_bounding_boxes(object_info) else "BOUNDING_BOX"


def test_pack_imports_and_lists_every_node_with_its_types(comfy_server, object_info, builder):
    assert comfy_server.import_failures() == [], comfy_server.log()[-3000:]
    assert "Sapiens2: skipping" not in comfy_server.log()
    for node_id, (inputs, outputs) in EXPECTED.items():
        inputs = {k: box_types(object_info) if v == "(boxes)" else v for k, v in inputs.items()}
        assert node_id in object_info, f"{node_id} missing from /object_info"
        info = object_info[node_id]
        assert info["category"] == "Sapiens2"
        declared = {}
        for group in ("required", "optional"):
            for name, spec in info["input"].get(group, {}).items():
                declared[name] = builder.socket_type(spec[0])
                assert (spec[1] if len(spec) > 1 else {}).get("tooltip"), f"{node_id}.{name} has no tooltip"
        assert declared == inputs, node_id
        assert info["output"][: len(outputs)] == outputs, node_id
        assert len(info["output"]) in (len(outputs), len(outputs) + 1)
        assert info["description"]
    assert object_info["Sapiens2Pose"]["input"]["optional"].keys() >= {"bboxes", "seg_model"}
    assert object_info["Sapiens2SaveCaptureBundle"]["output_node"] is True


def test_loader_lists_checkpoints_of_models_sapiens2(object_info, comfy_harness):
    spec = object_info["Sapiens2ModelLoader"]["input"]["required"]["checkpoint"]
    options = spec[1]["options"] if spec[0] == "COMBO" else spec[0]
    assert set(comfy_harness.WORKFLOW_CHECKPOINTS) <= set(options)
    assert options[-1].startswith("(download")


def test_every_shipped_workflow_is_tested(comfy_harness):
    assert sorted(p.stem for p in comfy_harness.WORKFLOWS.glob("*.json")) == sorted(WORKFLOW_NAMES)
    assert sorted(p.stem for p in comfy_harness.API_WORKFLOWS.glob("*.json")) == sorted(WORKFLOW_NAMES)


def test_example_workflows_are_listed_as_templates(client):
    templates = client.get("/workflow_templates")
    names = set(next(v for k, v in templates.items() if "sapiens2" in k))
    assert names == set(WORKFLOW_NAMES)  # API twins live in workflows/api/ and are not listed


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_ui_workflow_nodes_exist_and_links_type_check(name, object_info, builder, comfy_harness):
    ui = comfy_harness.load_json(comfy_harness.WORKFLOWS / f"{name}.json")
    assert builder.check_ui_links(ui, object_info) == []
    api = comfy_harness.load_json(comfy_harness.API_WORKFLOWS / f"{name}.json")
    executed = [n for n in ui["nodes"] if n["type"] not in builder.UI_ONLY_NODES]
    assert {str(n["id"]): n["type"] for n in executed} == {k: v["class_type"] for k, v in api.items()}
    for node in executed:  # every link of the API twin is a link of the UI file
        api_links = {k for k, v in api[str(node["id"])]["inputs"].items() if isinstance(v, list)}
        ui_links = {i["name"] for i in node["inputs"] if i.get("link") is not None}
        assert api_links == ui_links, (name, node["type"])


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_workflows_explain_themselves_and_loaders_download_their_task(name, comfy_harness):
    ui = comfy_harness.load_json(comfy_harness.WORKFLOWS / f"{name}.json")
    notes = [n for n in ui["nodes"] if n["type"] in ("Note", "MarkdownNote")]
    assert notes and all(len(n["widgets_values"][0]) > 200 for n in notes), "a note must say how to use it"
    assert "models/sapiens2" in notes[0]["widgets_values"][0]
    groups = ui["groups"]
    assert groups and all(g["title"] for g in groups)

    def inside(node: dict, group: dict) -> bool:
        x, y, w, h = group["bounding"]
        (nx, ny), (nw, nh) = node["pos"], node["size"]
        return x <= nx and y <= ny - 30 and nx + nw <= x + w and ny + nh <= y + h

    for node in ui["nodes"]:  # every node sits in exactly one group
        if node["type"] not in ("Note", "MarkdownNote"):
            assert sum(inside(node, g) for g in groups) == 1, (node["id"], node["type"])
    for node in ui["nodes"]:  # switching a loader to the download entry fetches the task it was set up for
        if node["type"] == "Sapiens2ModelLoader":
            checkpoint, task, size = node["widgets_values"][:3]
            assert checkpoint == f"sapiens2_{size}_{task}.safetensors", node["widgets_values"]


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_api_workflow_runs(name, client, comfy_server, comfy_harness):
    entry = client.run(_api(comfy_harness, name), timeout=600)
    error = comfy_harness.execution_error(entry)
    assert error is None, f"{error['node_type']}: {error['exception_message']}" if error else ""
    status = entry["status"]
    assert status["status_str"] == "success" and status["completed"] is True
    assert "execution_success" in [m[0] for m in status["messages"]]
    outputs = entry["outputs"]
    refs = [r for out in outputs.values() for v in out.values() if isinstance(v, list) for r in v]
    refs = [r for r in refs if isinstance(r, dict) and "filename" in r]
    videos = [r for r in refs if r["filename"].endswith(VIDEO_SUFFIXES)]
    saved = [img for out in outputs.values() for img in out.get("images", []) if img not in videos]
    for ref in saved:
        width, height, _ = _image_size(client, ref)
        assert (width, height) == (96, 128), ref
    texts = {k: out["text"] for k, out in outputs.items() if "text" in out}
    if name == "sapiens2_relight":
        assert {r["filename"].split("_0")[0] for r in saved} == {"relit", "light_map"}
    elif name == "sapiens2_tryon_mask":
        modes = {r["filename"].split("_0")[0]: _image_size(client, r)[2] for r in saved}
        assert modes == {"tryon_parts": "RGB", "tryon_mask": "RGB", "tryon_inpaint": "RGBA"}
    elif name == "sapiens2_pose_controlnet":
        frames = json.loads(next(iter(texts.values()))[0])
        assert len(frames) == 1 and frames[0]["canvas_width"] == 96 and frames[0]["canvas_height"] == 128
        assert frames[0]["people"] and len(frames[0]["people"][0]["pose_keypoints_2d"]) == 54
        assert any("openpose_json" in out for out in outputs.values())
    elif name in ("sapiens2_video_pose_controlnet", "sapiens2_video_relight"):
        # the example clip (8 frames, 12 fps) in, a video of as many frames at its rate out
        assert len(videos) == 1, refs
        assert _video_info(client, videos[0]) == (8, 96, 128, float(comfy_harness.EXAMPLE_FPS))
        if name == "sapiens2_video_relight":
            assert len(saved) == 8  # the depth frames, one range for the clip
    elif name == "sapiens2_blender_export":
        from sapiens2_studio.core.formats.bundle import read_bundle

        bundle_rel = next(t[0] for t in texts.values() if t[0].endswith(".json"))
        frame = read_bundle(comfy_server.base / "output" / bundle_rel)
        assert (frame.width, frame.height) == (96, 128)
        assert frame.points is not None and frame.normals is not None and frame.seg is not None
        assert frame.camera["source"] == "pointmap" and len(frame.people) >= 1
        meshes = [r for out in outputs.values() for r in out.get("3d", [])]
        glb = comfy_server.base / "output" / meshes[0]["subfolder"] / meshes[0]["filename"]
        assert glb.read_bytes()[:4] == b"glTF"


def _node(class_type: str, **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs}


def _loader(name: str) -> dict:
    return _node("Sapiens2ModelLoader", checkpoint=name, download_task="pose", download_size="1b", dtype="auto",
                 attention="auto", compile=False)  # fmt: skip


def _expect_node_error(client, comfy_harness, prompt: dict, node_type: str, message: str) -> None:
    entry = client.run(prompt, timeout=300)
    error = comfy_harness.execution_error(entry)
    assert error is not None, f"expected {node_type} to fail"
    assert entry["status"]["status_str"] == "error"
    assert error["node_type"] == node_type, error
    assert message in error["exception_message"], error["exception_message"]


LOAD = _node("LoadImage", image="sapiens2_example.png")
SEG_CKPT, POSE_CKPT = "sapiens2_1b_seg.safetensors", "sapiens2_1b_pose.safetensors"
NORMAL_CKPT, POINTMAP_CKPT = "sapiens2_1b_normal.safetensors", "sapiens2_1b_pointmap.safetensors"
BAD_INPUTS = {
    "pose_with_a_seg_model": (
        {"1": LOAD, "2": _loader(SEG_CKPT),
         "3": _node("Sapiens2Pose", model=["2", 0], image=["1", 0], flip_test=False,
                    keypoint_format="core (real scores)", neck_mode="auto", score_threshold=0.3, chunk_size=1),
         "4": _node("PreviewAny", source=["3", 0])},
        "Sapiens2Pose", "needs a Sapiens2 pose (308 keypoints) model, but the model given is segmentation",
    ),
    "segment_given_a_non_image": (
        {"2": _loader(SEG_CKPT),
         "3": _node("Sapiens2Segment", model=["2", 0], image={"__value__": []}, chunk_size=1),
         "4": _node("PreviewAny", source=["3", 0])},
        "Sapiens2Segment", "'image' must be an image batch (B, H, W, 3)",
    ),
    "normals_with_a_mask_of_another_size": (
        {"1": LOAD, "2": _loader(NORMAL_CKPT), "5": _node("SolidMask", value=1.0, width=16, height=16),
         "3": _node("Sapiens2Normals", model=["2", 0], image=["1", 0], mask=["5", 0], chunk_size=1,
                    convention="opengl (blender camera, y up)"),
         "4": _node("PreviewImage", images=["3", 1])},
        "Sapiens2Normals", "'mask' is 16x16 but the image is 96x128",
    ),
    "pointmap_with_a_pose_model": (
        {"1": LOAD, "2": _loader(POSE_CKPT),
         "3": _node("Sapiens2Pointmap", model=["2", 0], image=["1", 0], chunk_size=1, near_is_bright=True,
                    normalize_per_image=False),
         "4": _node("PreviewImage", images=["3", 1])},
        "Sapiens2Pointmap", "needs a Sapiens2 pointmap / depth model",
    ),
    "albedo_with_a_normal_model": (
        {"1": LOAD, "2": _loader(NORMAL_CKPT),
         "3": _node("Sapiens2Albedo", model=["2", 0], image=["1", 0], chunk_size=1),
         "4": _node("PreviewImage", images=["3", 0])},
        "Sapiens2Albedo", "needs a Sapiens2 albedo model",
    ),
    "relight_on_a_resized_image": (
        {"1": LOAD, "2": _loader(NORMAL_CKPT),
         "3": _node("Sapiens2Normals", model=["2", 0], image=["1", 0], chunk_size=1,
                    convention="opengl (blender camera, y up)"),
         "5": _node("ImageScale", image=["1", 0], upscale_method="nearest-exact", width=48, height=64, crop="disabled"),
         "6": _node("Sapiens2DirectionalLight", azimuth=30.0, elevation=10.0, color="#ffffff", intensity=1.0),
         "7": _node("Sapiens2Relight", normals=["3", 0], image=["5", 0], lights=["6", 0], environment_intensity=1.0,
                    environment_rotation=0.0, environment_is_linear=False, ambient=0.1, ambient_color="#ffffff",
                    specular=0.0, shininess=32.0, shadows=True, shadow_softness=1.0, exposure=0.0),
         "4": _node("PreviewImage", images=["7", 0])},
        "Sapiens2Relight", "the normals are 96x128 but the image is 48x64",
    ),
    "light_with_an_unreadable_colour": (
        {"6": _node("Sapiens2DirectionalLight", azimuth=30.0, elevation=10.0, color="orange", intensity=1.0),
         "4": _node("PreviewAny", source=["6", 0])},
        "Sapiens2DirectionalLight", "cannot read the colour 'orange'",
    ),
    "body_part_mask_of_an_unknown_class": (
        {"1": LOAD, "2": _loader(SEG_CKPT),
         "3": _node("Sapiens2Segment", model=["2", 0], image=["1", 0], chunk_size=1),
         "5": _node("Sapiens2BodyPartMask", seg=["3", 0], preset="hair", classes="sleeves", exclude="", grow=0,
                    feather=0.0, invert=False),
         "4": _node("PreviewAny", source=["5", 0])},
        "Sapiens2BodyPartMask", "unknown segmentation class 'sleeves'",
    ),
    "draw_pose_of_an_empty_batch": (
        {"3": _node("Sapiens2DrawPose", keypoints={"__value__": []}, draw_body=True, draw_hands=True,
                    draw_face=True, stick_width=4, point_radius=4, score_threshold=0.3),
         "4": _node("PreviewImage", images=["3", 0])},
        "Sapiens2DrawPose", "holds no frames (empty POSE_KEYPOINT)",
    ),
    "bundle_with_a_segmentation_of_another_image": (
        {"1": LOAD, "2": _loader(SEG_CKPT),
         "5": _node("ImageScale", image=["1", 0], upscale_method="nearest-exact", width=48, height=64, crop="disabled"),
         "3": _node("Sapiens2Segment", model=["2", 0], image=["5", 0], chunk_size=1),
         "6": _node("Sapiens2SaveCaptureBundle", image=["1", 0], seg=["3", 0], filename_prefix="bad/capture",
                    fps=24.0)},
        "Sapiens2SaveCaptureBundle", "'seg' is 48x64 but the image is 96x128",
    ),
    "mesh_with_an_empty_mask": (
        {"1": LOAD, "2": _loader(POINTMAP_CKPT),
         "3": _node("Sapiens2Pointmap", model=["2", 0], image=["1", 0], chunk_size=1, near_is_bright=True,
                    normalize_per_image=False),
         "5": _node("SolidMask", value=0.0, width=96, height=128),
         "6": _node("Sapiens2ExportMesh", pointmap=["3", 0], mask=["5", 0], format="glb",
                    filename_prefix="bad/mesh", max_edge_ratio=10.0)},
        "Sapiens2ExportMesh", "gives an empty mesh",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_a_clear_node_error(case, client, comfy_harness):
    prompt, node_type, message = BAD_INPUTS[case]
    _expect_node_error(client, comfy_harness, json.loads(json.dumps(prompt)), node_type, message)


def test_missing_and_broken_checkpoints(client, comfy_server, comfy_harness):
    preview = {"2": _loader("no_such_model.safetensors"), "4": _node("PreviewAny", source=["2", 1])}
    status, body = client.queue(preview)
    if status == 400:  # hosts that validate V3 combos refuse the value up front
        details = json.dumps(body["node_errors"])
        assert "value_not_in_list" in details and "no_such_model.safetensors" in details
    else:  # 0.3.64 does not check V3 combo values: the loader itself must say what is wrong
        error = comfy_harness.execution_error(client.wait(body["prompt_id"]))
        assert error["node_type"] == "Sapiens2ModelLoader"
        message = error["exception_message"]
        assert "'no_such_model.safetensors' was not found in" in message and "models/sapiens2" in message
    broken = Path(comfy_server.base / "models" / "sapiens2" / "broken_seg.safetensors")
    broken.write_bytes(b"this is not a safetensors file")
    try:
        prompt = {"2": _loader("broken_seg.safetensors"), "4": _node("PreviewAny", source=["2", 1])}
        entry = client.run(prompt)
        error = comfy_harness.execution_error(entry)
        assert error["node_type"] == "Sapiens2ModelLoader"
        assert "broken_seg.safetensors" in error["exception_message"]
    finally:
        broken.unlink()


def test_an_onnx_file_without_onnxruntime_says_what_to_install(client, comfy_server, comfy_harness):
    """An exported .onnx in models/sapiens2 runs with ONNX Runtime (docs/deploy.md); this ComfyUI has none, and
    the loader says what to install into ComfyUI's Python before it reads the file (no CLI advice)."""
    exported = Path(comfy_server.base / "models" / "sapiens2" / "exported_seg.onnx")
    exported.write_bytes(b"not read: the missing package is reported first")
    try:
        entry = client.run({"2": _loader("exported_seg.onnx"), "4": _node("PreviewAny", source=["2", 1])})
        error = comfy_harness.execution_error(entry)
        assert error["node_type"] == "Sapiens2ModelLoader"
        message = error["exception_message"]
        assert "needs onnxruntime" in message and "ComfyUI's Python" in message, message
        assert "sapiens2-studio[onnx]" not in message and "--runtime" not in message
    finally:
        exported.unlink()


def test_server_keeps_serving_after_errors(client, comfy_server, comfy_harness):
    assert comfy_server.alive()
    assert client.get("/system_stats")["system"]
    prompt = {
        "1": LOAD,
        "2": _loader(SEG_CKPT),
        "3": _node("Sapiens2Segment", model=["2", 0], image=["1", 0], chunk_size=1),
        "5": _node("Sapiens2BodyPartMask", seg=["3", 0], preset="person", classes="", exclude="hands", grow=3,
                   feather=1.5, invert=True),
        "6": _node("MaskToImage", mask=["5", 0]),
        "4": _node("SaveImage", images=["6", 0], filename_prefix="after_errors/mask"),
    }  # fmt: skip
    entry = client.run(prompt)
    assert entry["status"]["status_str"] == "success", comfy_harness.execution_error(entry)
    ref = entry["outputs"]["4"]["images"][0]
    assert ref["subfolder"] == "after_errors"


def _cached_nodes(entry: dict) -> set[str]:
    return {
        n for name, data in entry["status"]["messages"] if name == "execution_cached" for n in data["nodes"]
    }


def test_loader_reloads_a_replaced_checkpoint_and_caches_an_unchanged_one(client, comfy_server):
    import os

    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    path = Path(comfy_server.base / "models" / "sapiens2" / "swapped.safetensors")
    write_synthetic_checkpoint(path, task="seg")
    prompt = {"2": _loader("swapped.safetensors"), "4": _node("PreviewAny", source=["2", 1])}
    try:
        first = client.run(prompt)
        assert "segmentation" in first["outputs"]["4"]["text"][0]
        again = client.run(prompt)
        assert {"2", "4"} <= _cached_nodes(again), "an unchanged checkpoint must not be reloaded"
        # The user replaces the file under the same name (e.g. a fine-tuned or re-downloaded model).
        write_synthetic_checkpoint(path, task="pose")
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
        replaced = client.run(prompt)
        assert "2" not in _cached_nodes(replaced), "a replaced checkpoint must be loaded again"
        assert "pose" in replaced["outputs"]["4"]["text"][0]
    finally:
        path.unlink()


# ------------------------------------------------------------------------------------------ person boxes (bboxes)
def test_bboxes_is_a_forced_socket_of_every_box_type_the_host_has(object_info):
    """A socket, never a widget: frontends from 1.3x draw a BOUNDING_BOX input as a BoundingBox widget unless it
    is forced to be an input, which on 0.3.64 shifted saved widget values and sent the widget's string."""
    spec = object_info["Sapiens2Pose"]["input"]["optional"]["bboxes"]
    assert spec[0] == box_types(object_info)
    assert spec[1].get("forceInput") is True and "default" not in spec[1]


def _boxes_prompt(source: list, boxes: list[dict]) -> dict:
    return {
        "1": LOAD,
        "2": _loader(POSE_CKPT),
        "5": _node("TestBoxSource", boxes=json.dumps(boxes)),
        "3": _node("Sapiens2Pose", model=["2", 0], image=["1", 0], bboxes=source, flip_test=False,
                   keypoint_format="core (real scores)", neck_mode="auto", score_threshold=0.3, chunk_size=1),
        "4": _node("PreviewAny", source=["3", 0]),
    }  # fmt: skip


TWO_PEOPLE = [{"x": 2, "y": 4, "width": 40, "height": 100}, {"x": 50, "y": 10, "width": 40, "height": 110}]


def _people(entry: dict) -> int:
    frames = json.loads(entry["outputs"]["4"]["text"][0])
    return len(frames[0]["people"])


def test_pose_reads_a_linked_bounding_box(client, comfy_harness):
    entry = client.run(_boxes_prompt(["5", 0], TWO_PEOPLE))
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
    assert _people(entry) == 2


def test_pose_reads_bounding_boxes_where_the_host_has_them(client, object_info, comfy_harness):
    """BOUNDING_BOXES (a flat list of boxes with metadata) links into the same socket on hosts that have the
    type; on older hosts the server refuses the link as a type mismatch, which is what those users see."""
    prompt = _boxes_prompt(["5", 1], TWO_PEOPLE)
    if not host_has_bounding_boxes(object_info):
        status, body = client.queue(prompt)
        assert status == 400 and "return_type_mismatch" in json.dumps(body), body
        return
    entry = client.run(prompt)
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
    assert _people(entry) == 2


def test_pose_reads_the_core_bounding_box_node(client, object_info, comfy_harness):
    """Newer cores have a BOUNDING_BOX primitive (the same type RT-DETR and SDPose output): one box, one person."""
    if "PrimitiveBoundingBox" not in object_info:
        assert not host_has_bounding_boxes(object_info)  # 0.3.64: no core box source without a detector model
        return
    prompt = _boxes_prompt(["6", 0], [])
    prompt["6"] = _node("PrimitiveBoundingBox", x=10, y=8, width=60, height=110)
    entry = client.run(prompt)
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
    assert _people(entry) == 1


# ------------------------------------------------------------------------------------ model requirements (UI files)
@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_loaders_carry_the_official_files_they_name(name, client, comfy_harness):
    """``properties.models`` on each loader: the file its checkpoint names, its official URL and the sapiens2
    folder, which the frontend checks on load to warn about a missing model and offer its download."""
    from sapiens2_studio.core.checkpoints.hub import checkpoint_ref

    folders = client.get("/models")
    ui = comfy_harness.load_json(comfy_harness.WORKFLOWS / f"{name}.json")
    loaders = [n for n in ui["nodes"] if n["type"] == "Sapiens2ModelLoader"]
    assert loaders
    for node in loaders:
        checkpoint, task, size = node["widgets_values"][:3]
        ref = checkpoint_ref(task, size)
        assert node["properties"]["models"] == [{"name": checkpoint, "url": ref.url, "directory": "sapiens2"}]
        assert ref.url.startswith("https://huggingface.co/") and ref.url.endswith(f"/{checkpoint}")
        assert (
            "sapiens2" in folders
        )  # the directory is a model folder this host knows (the pack registers it)
    others = [n for n in ui["nodes"] if n["type"] != "Sapiens2ModelLoader"]
    assert all("models" not in n.get("properties", {}) for n in others)


# ----------------------------------------------------------------------------------- what an offline user sees
def _offline_download_error(client, comfy_harness) -> dict:
    prompt = {
        "2": _node("Sapiens2ModelLoader", checkpoint="(download: task + size below)", download_task="seg",
                   download_size="0.4b", dtype="auto", attention="auto", compile=False),
        "4": _node("PreviewAny", source=["2", 1]),
    }  # fmt: skip
    error = comfy_harness.execution_error(client.run(prompt))
    assert error is not None and error["node_type"] == "Sapiens2ModelLoader", error
    return error


def test_offline_download_says_which_file_from_where_to_where(client, comfy_harness):
    error = _offline_download_error(client, comfy_harness)
    message = error["exception_message"]
    url = "https://huggingface.co/facebook/sapiens2-seg-0.4b/resolve/main/sapiens2_0.4b_seg.safetensors"
    assert url in message and "models/sapiens2" in message, message


def test_offline_download_error_reads_as_a_comfyui_message(client, comfy_harness):
    """What the ComfyUI user sees (the frontend shows ``exception_type: exception_message``): a plain error
    name, not a module path under custom_nodes, and no CLI-only advice such as ``--checkpoint seg=PATH``."""
    error = _offline_download_error(client, comfy_harness)
    kind, message = error["exception_type"], error["exception_message"]
    assert "custom_nodes" not in kind and "/" not in kind and "sapiens2_studio" not in kind, kind
    assert "--checkpoint" not in message, message
