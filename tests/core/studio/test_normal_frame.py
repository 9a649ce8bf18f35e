"""The model's normal frame is converted to the canonical frame exactly once, whatever the front-end.

A normal checkpoint whose raw output is a known constant (zero output-conv weights, the vector as bias) goes
through the real load path, the predictor, and the CLI's and ComfyUI's bundle writers; the bundle must hold
that vector converted from `MODEL_NORMAL_FRAME` (OpenGL) to the declared `normals_frame` (OpenCV).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from sapiens2_studio.core import load_model
from sapiens2_studio.core.formats import bundle
from sapiens2_studio.core.pipeline import predict_normal
from sapiens2_studio.core.pipeline.postprocess import normals_to_image
from sapiens2_studio.core.pipeline.preprocess import dense_layout
from sapiens2_studio.core.shading import conventions
from sapiens2_studio.core.testing.synthetic import (
    constant_output_state_dict,
    write_constant_output_checkpoint,
)

RAW = (0.0, 0.6, 0.8)  # the model's frame: up and toward the viewer
CANONICAL = (0.0, -0.6, -0.8)  # the same direction in OpenCV: y down, z forward


@pytest.fixture(scope="module")
def constant_normal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_constant_output_checkpoint(
        tmp_path_factory.mktemp("ckpt") / "normal" / "sapiens2_0.4b_normal.safetensors", "normal", RAW
    )


def test_the_frames_are_named_once_and_agree_everywhere():
    assert conventions.MODEL_NORMAL_FRAME == "opengl" and conventions.CANONICAL_FRAME == "opencv"
    signs = conventions.frame_signs(conventions.MODEL_NORMAL_FRAME, conventions.CANONICAL_FRAME)
    assert signs == (1.0, -1.0, -1.0)
    assert (
        signs == bundle.LEGACY_NORMAL_SIGNS
    )  # 1.0 bundles hold the model frame: the reader converts by these
    assert bundle._CONVENTIONS["normals_frame"] == conventions.CANONICAL_FRAME


def test_model_to_canonical_along_any_axis():
    chw = torch.tensor(RAW).reshape(1, 3, 1, 1).expand(2, 3, 4, 5)
    out = conventions.model_to_canonical(chw, dim=-3)
    assert torch.equal(out[1, :, 3, 4], torch.tensor(CANONICAL))
    hwc = np.broadcast_to(np.array(RAW, np.float32), (4, 5, 3))
    np.testing.assert_array_equal(conventions.model_to_canonical(hwc)[2, 2], np.float32(CANONICAL))
    np.testing.assert_array_equal(conventions.model_to_canonical(conventions.model_to_canonical(hwc)), hwc)
    with pytest.raises(ValueError, match="3 components along dim -1"):
        conventions.model_to_canonical(torch.zeros(3, 4))


def test_postprocess_converts_exactly_once():
    layout = dense_layout(30, 40)
    raw = torch.tensor(RAW).reshape(1, 3, 1, 1) * torch.ones(1, 3, 1024, 768) * 5.0  # not unit: normalised
    out = normals_to_image(raw, layout)
    assert out.shape == (1, 3, 40, 30)
    np.testing.assert_allclose(out[0].permute(1, 2, 0).reshape(-1, 3).numpy(), [CANONICAL] * 1200, atol=1e-6)


def test_constant_checkpoint_keys_and_refusals():
    state = constant_output_state_dict("normal", RAW)
    assert torch.equal(state["decode_head.conv_normal.bias"], torch.tensor(RAW))
    assert not state["decode_head.conv_normal.weight"].any()
    with pytest.raises(ValueError, match="constant outputs exist for normal, albedo, pointmap"):
        constant_output_state_dict("pose", RAW)
    with pytest.raises(ValueError, match="only a pointmap model predicts a scale"):
        constant_output_state_dict("normal", RAW, scale=0.5)


def test_predictor_returns_the_converted_constant(constant_normal):
    model = load_model(constant_normal)
    image = torch.rand(2, 37, 29, 3, generator=torch.Generator().manual_seed(0))
    for result in predict_normal(model, image):
        got = result.normals.reshape(-1, 3).numpy()
        np.testing.assert_allclose(got, np.broadcast_to(CANONICAL, got.shape), atol=1e-6)


def _read_without_legacy_warning(path: Path) -> bundle.CaptureFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("error", bundle.LegacyNormalsWarning)
        return bundle.read_bundle(path)


def _assert_bundle_holds_canonical(json_path: Path, size: tuple[int, int]) -> None:
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    assert doc["version"] == "1.1" and doc["conventions"]["normals_frame"] == "opencv"
    frame = _read_without_legacy_warning(json_path)
    assert frame.normals.shape == (size[1], size[0], 3) and not frame.notes
    np.testing.assert_allclose(frame.normals.reshape(-1, 3), [CANONICAL] * (size[0] * size[1]), atol=5e-4)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cli_bundle_holds_the_converted_constant(constant_normal, tmp_path):
    pytest.importorskip("OpenEXR")
    from sapiens2_studio.cli.main import main

    Image.fromarray(np.full((24, 20, 3), 128, np.uint8)).save(tmp_path / "grey.png")
    argv = ["predict", str(tmp_path / "grey.png"), "--tasks", "normal", "--out", str(tmp_path / "out")]
    argv += ["--checkpoint", f"normal={constant_normal}", "--no-download", "--device", "cpu"]
    argv += ["--checkpoint-dir", str(tmp_path / "home")]
    assert main(argv) == 0
    _assert_bundle_holds_canonical(tmp_path / "out" / "grey.json", (20, 24))
    preview = np.asarray(Image.open(tmp_path / "out" / "grey.normal.png"))  # OpenGL colours: (n_gl + 1) / 2
    assert preview[5, 5].tolist() == [128, 204, 230]


def test_comfyui_bundle_holds_the_converted_constant(constant_normal, tmp_path):
    pytest.importorskip("OpenEXR")
    from sapiens2_studio.core.studio import capture_frames, run_tasks
    from sapiens2_studio.core.studio.runtime import models
    from sapiens2_studio.core.studio.store.exports import save_capture_bundle

    loaded = models.load(constant_normal, device="cpu")  # what the Normals and Save Capture Bundle nodes run
    image = torch.rand(1, 24, 20, 3, generator=torch.Generator().manual_seed(1))
    batch = run_tasks({"normal": loaded}, image)["normal"]
    frames = capture_frames(image, {"normal": batch})
    path = save_capture_bundle(tmp_path, "comfy", frames)
    _assert_bundle_holds_canonical(path, (20, 24))
