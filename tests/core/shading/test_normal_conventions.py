"""Normal-map conventions: named conversions are invertible and put known directions where they belong."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sapiens2_studio.core.shading import conventions as cv


def _unit(n: int = 50) -> torch.Tensor:
    v = torch.randn(n, 3, generator=torch.Generator().manual_seed(0))
    return v / v.norm(dim=-1, keepdim=True)


@pytest.mark.parametrize(
    ("forward", "inverse"),
    [
        (cv.opencv_to_opengl, cv.opengl_to_opencv),
        (cv.opencv_to_blender, cv.blender_to_opencv),
        (cv.opencv_to_directx, cv.directx_to_opencv),
        (cv.opencv_to_controlnet, cv.controlnet_to_opencv),
    ],
)
def test_round_trips(forward, inverse):
    n = _unit()
    assert torch.allclose(inverse(forward(n)), n, atol=1e-6)
    arr = n.numpy()
    assert np.allclose(inverse(forward(arr)), arr, atol=1e-6)


def test_known_directions():
    facing_camera = torch.tensor([0.0, 0.0, -1.0])  # OpenCV: z forward, so a camera-facing surface points −z
    up = torch.tensor([0.0, -1.0, 0.0])  # OpenCV: y down, so "up" is −y
    assert cv.opencv_to_opengl(facing_camera).tolist() == [0.0, 0.0, 1.0]
    assert cv.opencv_to_opengl(up).tolist() == [0.0, 1.0, 0.0]
    assert cv.opencv_to_directx(up).tolist() == [0.0, -1.0, 0.0]  # DirectX keeps y down …
    assert cv.opencv_to_directx(facing_camera).tolist() == [0.0, 0.0, 1.0]  # … with z toward the viewer
    assert cv.opencv_to_controlnet(facing_camera).tolist() == [0.5, 0.5, 1.0]  # ControlNet's lilac
    # ControlNet/BAE: R = left, G = up (normalbae's training colours), so image-right is dark red, image-up green
    assert cv.opencv_to_controlnet(torch.tensor([1.0, 0.0, 0.0])).tolist() == [0.0, 0.5, 0.5]
    assert cv.opencv_to_controlnet(torch.tensor([-1.0, 0.0, 0.0])).tolist() == [1.0, 0.5, 0.5]
    assert cv.opencv_to_controlnet(torch.tensor([0.0, -1.0, 0.0])).tolist() == [0.5, 1.0, 0.5]


def test_convert_normals_generic_and_flips():
    n = _unit()
    assert torch.equal(cv.convert_normals(n, "opencv", "opengl"), cv.opencv_to_opengl(n))
    assert torch.equal(
        cv.convert_normals(cv.opencv_to_directx(n), "directx", "opengl"), cv.opencv_to_opengl(n)
    )
    flipped = cv.convert_normals(n, "opencv", "opencv", flip_axes=(True, False, False))
    assert torch.equal(flipped[:, 0], -n[:, 0]) and torch.equal(flipped[:, 1:], n[:, 1:])
    with pytest.raises(ValueError, match="unknown normal convention"):
        cv.convert_normals(n, "opencv", "unity")


def test_normals_to_rgb_range_and_shape_errors():
    n = _unit().reshape(5, 10, 3)
    for name in ("opencv", "opengl", "blender", "directx", "controlnet"):
        rgb = cv.normals_to_rgb(n, name)
        assert rgb.shape == n.shape and float(rgb.min()) >= 0 and float(rgb.max()) <= 1
    with pytest.raises(ValueError, match="channel-last"):
        cv.opencv_to_opengl(torch.zeros(3, 4, 4))
