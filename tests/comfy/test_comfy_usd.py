"""Sapiens2 Save USD on the real ComfyUI servers (every host of the matrix): a batch of three images becomes one
animated stage in ComfyUI's output folder, opened here with usd-core and checked against the capture bundle that
Save Capture Bundle writes from the same inputs in the same prompt (one engine: both build their frames with
core.studio.compute.capture); bad input gives a node error in ComfyUI's words.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.comfyui
pxr = pytest.importorskip("pxr", reason="usd-core is in the test extra: pip install -e '.[test]'")


def _node(class_type: str, **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs}


def _complete(prompt: dict, object_info: dict) -> dict:
    """The prompt with every required widget it leaves out at its default from /object_info (so that inputs
    other nodes gain later do not break these tests)."""
    out = json.loads(json.dumps(prompt))
    for node in out.values():
        for name, spec in object_info[node["class_type"]]["input"].get("required", {}).items():
            options = spec[1] if len(spec) > 1 else {}
            if name not in node["inputs"] and "default" in options:
                node["inputs"][name] = options["default"]
            elif name not in node["inputs"] and isinstance(spec[0], list) and spec[0]:
                node["inputs"][name] = spec[0][0]
    return out


def _loader(task: str) -> dict:
    return _node("Sapiens2ModelLoader", checkpoint=f"sapiens2_1b_{task}.safetensors", download_task=task,
                 download_size="1b", dtype="auto", attention="auto", compile=False)  # fmt: skip


FPS = 30.0
# Three images (the example picture repeated), each through seg, pose, normals and pointmap.
CAPTURE = {
    "1": _node("LoadImage", image="sapiens2_example.png"),
    "2": _node("RepeatImageBatch", image=["1", 0], amount=3),
    "3": _loader("seg"), "4": _loader("pose"), "5": _loader("normal"), "6": _loader("pointmap"),
    "7": _node("Sapiens2Segment", model=["3", 0], image=["2", 0], chunk_size=4),
    "8": _node("Sapiens2Pose", model=["4", 0], image=["2", 0], flip_test=False, keypoint_format="core (real scores)",
               neck_mode="auto", score_threshold=0.3, chunk_size=4, seg_model=["3", 0],
               when_nobody_found="whole image"),
    "9": _node("Sapiens2Normals", model=["5", 0], image=["2", 0], chunk_size=4,
               convention="opengl (blender camera, y up)", mask=["7", 2]),
    "10": _node("Sapiens2Pointmap", model=["6", 0], image=["2", 0], chunk_size=4, near_is_bright=True,
                normalize_per_image=False, mask=["7", 2]),
}  # fmt: skip
USD = {"image": ["2", 0], "pointmap": ["10", 0], "pose": ["8", 1], "seg": ["7", 0], "normals": ["9", 0],
       "filename_prefix": "usd_test/capture", "fps": FPS, "max_edge_ratio": 10.0, "smooth": True}  # fmt: skip


def test_save_usd_writes_a_stage_equal_to_the_bundles(client, comfy_server, comfy_harness, object_info):
    from pxr import Usd, UsdGeom, UsdSkel, UsdValidation
    from sapiens2_studio.core.formats.mesh import pointmap_to_mesh
    from sapiens2_studio.core.formats.sequence import read_sequence
    from sapiens2_studio.core.formats.usd import OPENCV_TO_USD, camera_lens

    prompt = dict(CAPTURE)
    prompt["11"] = _node("Sapiens2SaveUSD", format="usdz", **USD)
    prompt["12"] = _node("Sapiens2SaveCaptureBundle", image=["2", 0], filename_prefix="usd_test/bundle", fps=FPS,
                         pose=["8", 1], seg=["7", 0], normals=["9", 0], pointmap=["10", 0], smooth=True)  # fmt: skip
    entry = client.run(_complete(prompt, object_info), timeout=600)
    error = comfy_harness.execution_error(entry)
    assert error is None, f"{error['node_type']}: {error['exception_message']}" if error else ""
    text = entry["outputs"]["11"]["text"][0]
    relative = text.split(": ", 1)[0].removeprefix("saved ")
    assert relative.startswith("usd_test/capture_") and relative.endswith(".usdz"), text
    assert "3 frame(s) 1-3 at 30 fps" in text, text
    output = comfy_server.base / "output"
    path = output / relative
    assert path.is_file() and not list(output.glob("usd_test/capture_*_frames")), "a .usdz holds its clips"

    stage = Usd.Stage.Open(str(path))
    validators = UsdValidation.ValidationRegistry().GetOrLoadAllValidators()
    assert [e.GetMessage() for e in UsdValidation.ValidationContext(validators).Validate(stage)] == []
    assert stage.GetTimeCodesPerSecond() == FPS == stage.GetFramesPerSecond()
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (1, 3)
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.y and UsdGeom.GetStageMetersPerUnit(stage) == 1.0

    bundle_text = entry["outputs"]["12"]["text"][0]
    seq = read_sequence(output / bundle_text.split(" (")[0].removeprefix("saved "))
    frames = list(seq)
    assert len(frames) == 3
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    camera = UsdGeom.Camera(stage.GetPrimAtPath("/Capture/Camera"))
    cache = UsdSkel.Cache()
    for time, frame in enumerate(frames, start=1):
        expected = pointmap_to_mesh(frame.points, mask=frame.mask, max_edge_ratio=10.0)
        points = np.asarray(mesh.GetPointsAttr().Get(time))
        assert len(points) > 100
        np.testing.assert_array_equal(points, (expected.vertices * OPENCV_TO_USD).astype(np.float32))
        np.testing.assert_array_equal(
            np.asarray(mesh.GetFaceVertexIndicesAttr().Get(time)), expected.faces.ravel()
        )
        normals = np.asarray(mesh.GetNormalsAttr().Get(time))
        assert np.abs(np.linalg.norm(normals, axis=1) - 1).max() < 1e-5
        lens = camera_lens(frame.camera, frame.width, frame.height)
        for key, value in lens.items():
            assert camera.GetPrim().GetAttribute(key).Get(time) == pytest.approx(value, rel=1e-6), key
        # each tracked person of the bundle is the skeleton of the same track (the same temporal pass made both),
        # whose joints equal the person's 3D keypoints (USD frame)
        tracks = {p.track_id for f in frames for p in f.people}
        assert None not in tracks and len(tracks) >= 1
        assert len([p for p in stage.Traverse() if p.IsA(UsdSkel.Skeleton)]) == len(tracks)
        for person in frame.people:
            prim = stage.GetPrimAtPath(f"/Capture/People/Person_{person.track_id}/Skeleton")
            query = cache.GetSkelQuery(UsdSkel.Skeleton(prim))
            order = np.asarray(prim.GetAttribute("sapiens2:keypointIndex").Get())
            got = np.array([np.array(m.ExtractTranslation()) for m in query.ComputeJointSkelTransforms(time)])
            got = got[np.argsort(order)]  # joint order -> keypoint order
            known = np.isfinite(person.keypoints_3d).all(axis=1)
            assert known.sum() > 10
            truth = person.keypoints_3d.astype(np.float64) * OPENCV_TO_USD
            assert np.abs(got[known] - truth[known]).max() <= 1e-6, f"frame {time}, track {person.track_id}"


def test_save_usd_usdc_keeps_its_clip_folder_beside_the_stage(
    client, comfy_server, comfy_harness, object_info
):
    from pxr import Usd, UsdGeom

    prompt = dict(CAPTURE)
    prompt["11"] = _node("Sapiens2SaveUSD", format="usdc", **{**USD, "filename_prefix": "usd_test/clips"})
    entry = client.run(_complete(prompt, object_info), timeout=600)
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
    relative = entry["outputs"]["11"]["text"][0].split(": ", 1)[0].removeprefix("saved ")
    path = comfy_server.base / "output" / relative
    assert path.suffix == ".usdc" and path.read_bytes()[:8] == b"PXR-USDC"
    clips = sorted((path.parent / f"{path.stem}_frames").glob("mesh_*.usdc"))
    assert [c.name for c in clips] == ["mesh_0001.usdc", "mesh_0002.usdc", "mesh_0003.usdc"]
    stage = Usd.Stage.Open(str(path))  # held: a prim is valid only while its stage lives
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/Capture/Pointmap/Mesh"))
    assert all(len(mesh.GetPointsAttr().Get(t)) > 100 for t in (1, 2, 3))


BAD = {
    "pointmap_of_another_size": (
        {"11": _node("ImageScale", image=["2", 0], upscale_method="nearest-exact", width=48, height=64,
                     crop="disabled"),
         "12": _node("Sapiens2Pointmap", model=["6", 0], image=["11", 0], chunk_size=4, near_is_bright=True,
                     normalize_per_image=False),
         "13": _node("Sapiens2SaveUSD", format="usdz", **{**USD, "pointmap": ["12", 0]})},
        "'pointmap' is 48x64 but image 1 is 96x128",
    ),
    "pointmap_of_fewer_images": (
        {"11": _node("RepeatImageBatch", image=["1", 0], amount=2),
         "12": _node("Sapiens2Pointmap", model=["6", 0], image=["11", 0], chunk_size=4, near_is_bright=True,
                     normalize_per_image=False),
         "13": _node("Sapiens2SaveUSD", format="usdz", **{**USD, "pointmap": ["12", 0]})},
        "'pointmap' has 2 results for 3 images",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_save_usd_bad_input_is_a_clear_node_error(case, client, comfy_harness, object_info):
    extra, message = BAD[case]
    entry = client.run(_complete({**CAPTURE, **extra}, object_info), timeout=600)
    error = comfy_harness.execution_error(entry)
    assert error is not None and error["node_type"] == "Sapiens2SaveUSD", error
    assert error["exception_message"].startswith("Sapiens2 Save USD: "), error["exception_message"]
    assert message in error["exception_message"], error["exception_message"]
    assert "Traceback" not in error["exception_message"]


def test_save_usd_without_a_pointmap_is_refused_by_comfyui(client, object_info):
    """The pointmap is a required socket: ComfyUI itself refuses the prompt and names the input."""
    usd = {k: v for k, v in USD.items() if k != "pointmap"}
    prompt = _complete({**CAPTURE, "11": _node("Sapiens2SaveUSD", format="usdz", **usd)}, object_info)
    status, body = client.queue(prompt)
    assert status == 400, body
    details = json.dumps(body["node_errors"])
    assert "Sapiens2SaveUSD" in details and "required_input_missing" in details and "pointmap" in details


@pytest.fixture(scope="module")
def server_without_usd(comfy_host, tmp_path_factory, comfy_harness):
    """A server of this host whose Python cannot import pxr (the test pack s2test_no_usd blocks it)."""
    root = tmp_path_factory.mktemp(f"{comfy_host.id}-no-usd")
    server = comfy_harness.ComfyServer(
        comfy_host.checkout, comfy_host.python, root / "base", comfy_harness.free_port(), None,
        (Path(__file__).resolve().parent / "packs" / "s2test_no_usd",),
    )  # fmt: skip
    server.start(comfy_harness.write_models(root / "models").parent)
    try:
        client = comfy_harness.Client(server.url)
        client.upload_image(
            comfy_harness.write_example_image(root / "example.png"), comfy_harness.EXAMPLE_IMAGE
        )
        yield server, client
    finally:
        server.stop()


def test_save_usd_without_usd_core_says_how_to_install_it_in_comfyui(server_without_usd, comfy_harness):
    server, client = server_without_usd
    info = client.get("/object_info")
    assert "Sapiens2SaveUSD" in info, "the node is listed even without usd-core (it says what is missing)"
    entry = client.run(_complete({**CAPTURE, "11": _node("Sapiens2SaveUSD", format="usdz", **USD)}, info))
    error = comfy_harness.execution_error(entry)
    assert error is not None and error["node_type"] == "Sapiens2SaveUSD", error
    message = error["exception_message"]
    assert message.startswith(
        "Sapiens2 Save USD: USD export needs Pixar's 'usd-core' package, which is not installed"
    ), message
    assert "-m pip install usd-core" in message and "restart ComfyUI" in message, message
    assert "sapiens2-studio[usd]" not in message and "--" not in message, "no CLI advice in ComfyUI"
    assert not list((server.base / "output").rglob("*.usd*")), "nothing is written"
