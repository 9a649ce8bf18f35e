"""The Matte node and the matte's consumers in a real ComfyUI server (skipped without COMFYUI_PATH).

A constant-output matting checkpoint (written into the server's models/sapiens2 at test time) makes every pixel
known: alpha = sigmoid(0.5) = 0.6225, pre-multiplied colour sigmoid(-1, 0, 1), straight colour that / alpha
(clipped). SaveImage writes floor(255 · value), so PNG values are compared to that, within one level.

One prompt runs the whole chain: Matte over a background of another size (cover-fitted, no error), its MASK into
Body-Part Mask and Relight, its IMAGE into Relight, its data into Save Capture Bundle.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.comfyui

LOGITS = (-1.0, 0.0, 1.0, 0.5)
ALPHA = 1.0 / (1.0 + math.exp(-0.5))
PREMULTIPLIED = np.array([1.0 / (1.0 + math.exp(-v)) for v in LOGITS[:3]])
STRAIGHT = np.minimum(1.0, PREMULTIPLIED / ALPHA)
BACKGROUND = 0x3366CC  # (0.2, 0.4, 0.8)
MATTE_CKPT, SEG_CKPT = "constant_matting.safetensors", "sapiens2_1b_seg.safetensors"
NORMAL_CKPT = "sapiens2_1b_normal.safetensors"


def _node(class_type: str, **inputs) -> dict:
    return {"class_type": class_type, "inputs": inputs}


def _loader(name: str, task: str = "matting") -> dict:
    return _node("Sapiens2ModelLoader", checkpoint=name, download_task=task, download_size="1b", dtype="auto",
                 attention="auto", compile=False)  # fmt: skip


def _matte(**inputs) -> dict:
    return _node("Sapiens2Matte", model=["2", 0], image=["1", 0], chunk_size=1, background_color="#000000",
                 **inputs)  # fmt: skip


def _png(client, entry: dict, node: str) -> np.ndarray:
    from PIL import Image

    ref = entry["outputs"][node]["images"][0]
    data = client.get_bytes(
        f"/view?filename={ref['filename']}&subfolder={ref['subfolder']}&type={ref['type']}"
    )
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB")).astype(np.int64)


def _levels(values) -> np.ndarray:
    return np.floor(np.asarray(values, dtype=np.float64) * 255.0).astype(np.int64)


@pytest.fixture(scope="module")
def constant_matting(comfy_server):
    from sapiens2_studio.core.testing.synthetic import write_constant_output_checkpoint

    path = Path(comfy_server.base / "models" / "sapiens2" / MATTE_CKPT)
    write_constant_output_checkpoint(path, "matting", LOGITS)
    yield path
    path.unlink()


@pytest.fixture(scope="module")
def chain(client, constant_matting, comfy_harness) -> dict:
    prompt = {
        "1": _node("LoadImage", image=comfy_harness.EXAMPLE_IMAGE),
        "2": _loader(MATTE_CKPT),
        "5": _node("EmptyImage", width=50, height=20, batch_size=1, color=BACKGROUND),
        "3": _matte(background=["5", 0]),
        "6": _node("MaskToImage", mask=["3", 1]),
        "7": _node("SaveImage", images=["6", 0], filename_prefix="matte/alpha"),
        "8": _node("SaveImage", images=["3", 2], filename_prefix="matte/foreground"),
        "9": _node("SaveImage", images=["3", 3], filename_prefix="matte/composite"),
        "10": _loader(SEG_CKPT, "seg"),
        "11": _node("Sapiens2Segment", model=["10", 0], image=["1", 0], chunk_size=1),
        "12": _node("Sapiens2BodyPartMask", seg=["11", 0], preset="person", classes="", exclude="", grow=0,
                    feather=0.0, invert=False, person_mask=["3", 1]),
        "13": _node("MaskToImage", mask=["12", 0]),
        "14": _node("SaveImage", images=["13", 0], filename_prefix="matte/parts"),
        "15": _loader(NORMAL_CKPT, "normal"),
        "16": _node("Sapiens2Normals", model=["15", 0], image=["1", 0], mask=["11", 2], chunk_size=1,
                    convention="opengl (blender camera, y up)"),
        "17": _node("Sapiens2DirectionalLight", azimuth=30.0, elevation=10.0, color="#ffffff", intensity=1.0),
        "18": _node("Sapiens2Relight", normals=["16", 0], image=["1", 0], mask=["3", 1], foreground=["3", 2],
                    lights=["17", 0], background=["3", 3], environment_intensity=1.0, environment_rotation=0.0,
                    environment_is_linear=False, ambient=0.1, ambient_color="#ffffff", specular=0.0,
                    shininess=32.0, shadows=True, shadow_softness=1.0, exposure=0.0),
        "19": _node("SaveImage", images=["18", 0], filename_prefix="matte/relit"),
        "20": _node("Sapiens2SaveCaptureBundle", image=["1", 0], seg=["11", 0], matting=["3", 0],
                    filename_prefix="matte/capture", fps=24.0),
    }  # fmt: skip
    entry = client.run(prompt, timeout=600)
    error = comfy_harness.execution_error(entry)
    assert error is None, f"{error['node_type']}: {error['exception_message']}" if error else ""
    return entry


def test_matte_sockets_are_mask_and_image(object_info):
    info = object_info["Sapiens2Matte"]
    assert info["output"] == ["SAPIENS2_MATTING", "MASK", "IMAGE", "IMAGE"]
    assert info["output_name"] == ["matting", "alpha", "foreground", "composite"]
    assert info["input"]["optional"]["background"][0] == "IMAGE"
    assert object_info["Sapiens2BodyPartMask"]["input"]["optional"]["person_mask"][0] == "MASK"
    assert object_info["Sapiens2Relight"]["input"]["optional"]["foreground"][0] == "IMAGE"
    assert object_info["Sapiens2SaveCaptureBundle"]["input"]["optional"]["matting"][0] == "SAPIENS2_MATTING"


def test_alpha_foreground_and_composite_over_a_background_of_another_size(client, chain):
    alpha, foreground, composite = (_png(client, chain, n) for n in ("7", "8", "9"))
    assert alpha.shape == foreground.shape == composite.shape == (128, 96, 3)  # the image's size, not 50x20
    assert np.abs(alpha - _levels(ALPHA)).max() <= 1  # 158
    assert np.abs(foreground - _levels(STRAIGHT)).max() <= 1  # [110, 204, 255]: straight colour
    background = np.array([0x33, 0x66, 0xCC]) / 255.0  # cover-fitted flat colour stays that colour
    expected = np.minimum(1.0, PREMULTIPLIED + (1.0 - ALPHA) * background)
    assert np.abs(composite - _levels(expected)).max() <= 1  # [87, 165, 255]


def test_body_part_mask_takes_the_matte_as_person_mask(client, chain):
    parts = _png(client, chain, "14")
    # 'person' over the whole soft matte: every pixel is person × 0.6225 (without the matte: 0 or 255)
    assert np.abs(parts - _levels(ALPHA)).max() <= 1


def test_relight_with_the_matte_and_the_bundle_with_its_layer(client, chain, comfy_server):
    from sapiens2_studio.core.formats.bundle import read_bundle

    assert _png(client, chain, "19").shape == (128, 96, 3)
    text = chain["outputs"]["20"]["text"][0]
    relative = text.split("saved ", 1)[1].split(" (", 1)[0]
    frame = read_bundle(comfy_server.base / "output" / relative)
    assert json.loads((comfy_server.base / "output" / relative).read_text())["layers"] == [
        "rgba", "segmentation", "person_mask", "alpha", "matte",
    ]  # fmt: skip
    assert np.abs(frame.alpha - ALPHA).max() < 2.5e-4
    assert np.abs(frame.foreground - STRAIGHT.astype(np.float32)).max() < 1e-3


BAD = {
    "matte_with_a_seg_model": (
        {"1": _node("LoadImage", image="sapiens2_example.png"), "2": _loader(SEG_CKPT, "seg"),
         "3": _matte(), "4": _node("PreviewImage", images=["3", 3])},
        "Sapiens2Matte", "needs a Sapiens2 matting (soft alpha + foreground) model, but the model given is segmentation",
    ),
    "matte_with_three_backgrounds_for_one_image": (
        {"1": _node("LoadImage", image="sapiens2_example.png"), "2": _loader(MATTE_CKPT),
         "5": _node("EmptyImage", width=96, height=128, batch_size=3, color=0),
         "3": _matte(background=["5", 0]), "4": _node("PreviewImage", images=["3", 3])},
        "Sapiens2Matte", "background has 3 entries but the image batch has 1",
    ),
    "body_part_mask_with_a_matte_of_another_size": (
        {"1": _node("LoadImage", image="sapiens2_example.png"), "2": _loader(SEG_CKPT, "seg"),
         "3": _node("Sapiens2Segment", model=["2", 0], image=["1", 0], chunk_size=1),
         "5": _node("SolidMask", value=1.0, width=16, height=16),
         "6": _node("Sapiens2BodyPartMask", seg=["3", 0], preset="hair", classes="", exclude="", grow=0,
                    feather=0.0, invert=False, person_mask=["5", 0]),
         "4": _node("PreviewAny", source=["6", 0])},
        "Sapiens2BodyPartMask", "'person_mask' is 16x16 but the segmentation is 96x128",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_matte_input_gives_a_clear_node_error(case, client, constant_matting, comfy_harness):
    prompt, node_type, message = BAD[case]
    entry = client.run(json.loads(json.dumps(prompt)), timeout=300)
    error = comfy_harness.execution_error(entry)
    assert error is not None and error["node_type"] == node_type, error
    assert message in error["exception_message"], error["exception_message"]
