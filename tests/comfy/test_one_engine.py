"""One engine under every front-end: the same photo and checkpoints give the same capture bundle through the
CLI, the Python API and ComfyUI's Save Capture Bundle in a real ComfyUI server.

The CLI and the Python API run here; ComfyUI runs the same five tasks as nodes (Segment → Pose with the seg model,
Normals and Pointmap masked by the person mask, Matte → Save Capture Bundle). Every EXR channel must be bit-identical, and
the JSON must agree on the image size, camera, conventions and people (boxes, 2D/3D keypoints and scores).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("OpenEXR")
pytestmark = pytest.mark.comfyui

TASKS = ("seg", "pose", "normal", "pointmap", "matting")


def _comfy_prompt(harness) -> dict:
    def loader(task: str) -> dict:
        name = f"sapiens2_1b_{task}.safetensors"
        inputs = {"checkpoint": name, "download_task": task, "download_size": "1b", "dtype": "auto"}
        return {
            "class_type": "Sapiens2ModelLoader",
            "inputs": {**inputs, "attention": "auto", "compile": False},
        }

    return {
        "1": {"class_type": "LoadImage", "inputs": {"image": harness.EXAMPLE_IMAGE}},
        "2": loader("seg"),
        "3": loader("pose"),
        "4": loader("normal"),
        "5": loader("pointmap"),
        "11": loader("matting"),
        "12": {
            "class_type": "Sapiens2Matte",
            "inputs": {"model": ["11", 0], "image": ["1", 0], "chunk_size": 1, "background_color": "#00ff00"},
        },
        "6": {
            "class_type": "Sapiens2Segment",
            "inputs": {"model": ["2", 0], "image": ["1", 0], "chunk_size": 1},
        },
        "7": {
            "class_type": "Sapiens2Pose",
            "inputs": {
                "model": ["3", 0],
                "image": ["1", 0],
                "seg_model": ["2", 0],
                "flip_test": True,
                "keypoint_format": "core (real scores)",
                "neck_mode": "auto",
                "score_threshold": 0.3,
                "chunk_size": 1,
            },
        },
        "8": {
            "class_type": "Sapiens2Normals",
            "inputs": {
                "model": ["4", 0],
                "image": ["1", 0],
                "mask": ["6", 2],
                "chunk_size": 1,
                "convention": "opengl (blender camera, y up)",
            },
        },
        "9": {
            "class_type": "Sapiens2Pointmap",
            "inputs": {
                "model": ["5", 0],
                "image": ["1", 0],
                "mask": ["6", 2],
                "chunk_size": 1,
                "near_is_bright": True,
                "normalize_per_image": False,
            },
        },
        "10": {
            "class_type": "Sapiens2SaveCaptureBundle",
            "inputs": {
                "image": ["1", 0],
                "filename_prefix": "one_engine/photo",
                "fps": 24.0,
                "pose": ["7", 1],
                "seg": ["6", 0],
                "normals": ["8", 0],
                "pointmap": ["9", 0],
                "matting": ["12", 0],
            },
        },
    }


def _comparable(frame) -> dict:
    """What must agree between front-ends (file names, sources and model provenance may differ)."""
    return {
        "size": (frame.width, frame.height),
        "camera": frame.camera,
        "scale": frame.pointmap_scale,
        "people": [
            (p.bbox, p.bbox_source, p.keypoints.tobytes(), np.nan_to_num(p.keypoints_3d, nan=-1.0).tobytes())
            for p in frame.people
        ],
    }


@pytest.fixture(scope="module")
def bundles(client, comfy_server, comfy_harness, tmp_path_factory):
    from sapiens2_studio.cli.main import main
    from sapiens2_studio.core.formats.bundle import read_bundle, write_bundle
    from sapiens2_studio.core.studio import Studio
    from sapiens2_studio.core.studio.sources.inputs import load_image

    work = tmp_path_factory.mktemp("one_engine")
    models = comfy_server.base / "models" / "sapiens2"
    checkpoints = {task: models / f"sapiens2_1b_{task}.safetensors" for task in TASKS}
    photo = comfy_harness.write_example_image(work / "photo.png")

    entry = client.run(_comfy_prompt(comfy_harness), timeout=600)
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
    found = sorted((comfy_server.base / "output" / "one_engine").glob("photo_*.json"))
    assert len(found) == 1, found
    comfy_json = found[0]

    argv = ["predict", str(photo), "--tasks", ",".join(TASKS), "--out", str(work / "cli"), "--device", "cpu"]
    for task, path in checkpoints.items():
        argv += ["--checkpoint", f"{task}={path}"]
    assert main([*argv, "--no-previews"]) == 0

    studio = Studio(device="cpu")
    image = load_image(photo)
    batches = studio.predict([image], TASKS, checkpoints=checkpoints)
    python_json = write_bundle(work / "python", "photo", studio.capture([image], batches)[0])
    return {
        "cli": read_bundle(work / "cli" / "photo.json"),
        "python": read_bundle(python_json),
        "comfyui": read_bundle(comfy_json),
        "json": {
            "cli": json.loads((work / "cli" / "photo.json").read_text()),
            "comfyui": json.loads(comfy_json.read_text()),
        },
    }


@pytest.mark.parametrize("other", ["python", "comfyui"])
def test_every_exr_channel_is_identical(bundles, other):
    reference, frame = bundles["cli"], bundles[other]
    for layer in ("image", "points", "normals", "seg", "mask", "alpha", "foreground"):
        a, b = getattr(reference, layer), getattr(frame, layer)
        assert a is not None and b is not None, layer
        assert a.shape == b.shape and a.dtype == b.dtype, layer
        assert np.array_equal(a, b, equal_nan=True), f"{layer} differs in {int((a != b).sum())} values"


@pytest.mark.parametrize("other", ["python", "comfyui"])
def test_json_agrees(bundles, other):
    assert _comparable(bundles["cli"]) == _comparable(bundles[other])
    assert bundles["cli"].people, "the test photo should have a person"
    cli, comfy = bundles["json"]["cli"], bundles["json"]["comfyui"]
    assert cli["conventions"] == comfy["conventions"] and cli["layers"] == comfy["layers"]
    assert [m["task"] for m in cli["models"]] == [m["task"] for m in comfy["models"]]
    assert [m["sha256"] for m in cli["models"]] == [m["sha256"] for m in comfy["models"]]


def test_a_constant_normal_model_gives_the_converted_vector_in_comfyui(client, comfy_server, comfy_harness):
    """Raw model output (0, 0.6, 0.8) in the model's OpenGL frame is stored as (0, -0.6, -0.8) in the bundle's
    OpenCV frame, through the real Normals and Save Capture Bundle nodes."""
    from sapiens2_studio.core.formats.bundle import read_bundle
    from sapiens2_studio.core.testing.synthetic import write_constant_output_checkpoint

    name = "constant_normal.safetensors"
    write_constant_output_checkpoint(
        comfy_server.base / "models" / "sapiens2" / name, "normal", (0.0, 0.6, 0.8)
    )
    loader = {"checkpoint": name, "download_task": "normal", "download_size": "1b", "dtype": "auto"}
    prompt = {
        "1": {"class_type": "LoadImage", "inputs": {"image": comfy_harness.EXAMPLE_IMAGE}},
        "2": {
            "class_type": "Sapiens2ModelLoader",
            "inputs": {**loader, "attention": "auto", "compile": False},
        },
        "3": {
            "class_type": "Sapiens2Normals",
            "inputs": {
                "model": ["2", 0],
                "image": ["1", 0],
                "chunk_size": 1,
                "convention": "opengl (blender camera, y up)",
            },
        },
        "4": {
            "class_type": "Sapiens2SaveCaptureBundle",
            "inputs": {"image": ["1", 0], "filename_prefix": "constant/n", "fps": 24.0, "normals": ["3", 0]},
        },
    }
    entry = client.run(prompt, timeout=300)
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
    (path,) = (comfy_server.base / "output" / "constant").glob("n_*.json")
    frame = read_bundle(path)
    assert json.loads(path.read_text())["conventions"]["normals_frame"] == "opencv"
    np.testing.assert_allclose(
        frame.normals.reshape(-1, 3), [[0.0, -0.6, -0.8]] * (frame.width * frame.height), atol=5e-4
    )


def test_save_capture_bundle_writes_the_chosen_compression_with_the_same_pixels(
    client, comfy_server, comfy_harness, object_info
):
    """The node's `exr_compression` input (optional, last: older prompts lack it and get zip) goes to the engine's
    writer: a saved prompt without it, zips and none give the same channels bit for bit."""
    from sapiens2_studio.core.formats.exr import read_exr

    spec = object_info["Sapiens2SaveCaptureBundle"]["input"]["optional"]["exr_compression"]
    assert list(spec[0] if isinstance(spec[0], list) else spec[1]["options"]) == ["zip", "zips", "none"]
    assert spec[1]["default"] == "zip"
    loader = {"checkpoint": "sapiens2_1b_seg.safetensors", "download_task": "seg", "download_size": "1b"}
    prompt = {
        "1": {"class_type": "LoadImage", "inputs": {"image": comfy_harness.EXAMPLE_IMAGE}},
        "2": {
            "class_type": "Sapiens2ModelLoader",
            "inputs": {**loader, "dtype": "auto", "attention": "auto", "compile": False},
        },
        "3": {
            "class_type": "Sapiens2Segment",
            "inputs": {"model": ["2", 0], "image": ["1", 0], "chunk_size": 1},
        },
    }
    for node, choice in (("4", None), ("5", "zips"), ("6", "none")):
        inputs = {
            "image": ["1", 0],
            "filename_prefix": f"codec/{choice or 'default'}",
            "fps": 24.0,
            "seg": ["3", 0],
        }
        prompt[node] = {
            "class_type": "Sapiens2SaveCaptureBundle",
            "inputs": inputs if choice is None else {**inputs, "exr_compression": choice},
        }
    entry = client.run(prompt, timeout=300)
    assert comfy_harness.execution_error(entry) is None, comfy_harness.execution_error(entry)
    found = {}
    for choice in ("default", "zips", "none"):
        (path,) = (comfy_server.base / "output" / "codec").glob(f"{choice}_*.exr")
        found[choice] = read_exr(path)
    names = {"default": "ZIP_COMPRESSION", "zips": "ZIPS_COMPRESSION", "none": "NO_COMPRESSION"}
    reference = found["default"][0]
    assert {"R", "seg.id", "mask.A"} <= set(reference)
    for choice, (channels, header) in found.items():
        assert header["compression"].name == names[choice]
        assert sorted(channels) == sorted(reference)
        assert all(channels[n].tobytes() == reference[n].tobytes() for n in reference), choice
