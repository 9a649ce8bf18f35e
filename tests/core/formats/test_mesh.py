"""PLY/GLB export of a pointmap: parsed back with small independent readers (struct/numpy), and loaded with trimesh
(the registry's wheel, a test dependency) as a consumer would."""

from __future__ import annotations

import json
import struct
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sapiens2_studio.core.formats.mesh import (
    OPENCV_TO_FILE,
    encode_png,
    pointmap_to_mesh,
    write_glb,
    write_mesh,
    write_ply,
)

H, W = 6, 8


def _plane(depth: float = 2.0) -> np.ndarray:
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    z = np.full((H, W), depth, np.float32)
    return np.stack([(u - W / 2) * z / 10, (v - H / 2) * z / 10, z], axis=-1).astype(np.float32)


def _read_ply(path: Path) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    data = path.read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    header = data[:end].decode("ascii").splitlines()
    assert header[:2] == ["ply", "format binary_little_endian 1.0"]
    counts, fields, current = {}, [], None
    types = {"float": "<f4", "uchar": "u1", "int": "<i4"}
    for line in header:
        parts = line.split()
        if parts[0] == "element":
            current = parts[1]
            counts[current] = int(parts[2])
        elif parts[0] == "property" and current == "vertex":
            fields.append((parts[2], types[parts[1]]))
    vert_dtype = np.dtype(fields)
    verts = np.frombuffer(data, vert_dtype, counts["vertex"], offset=end)
    face_dtype = np.dtype([("n", "u1"), ("i", "<i4", (3,))])
    faces = np.frombuffer(
        data, face_dtype, counts["face"], offset=end + vert_dtype.itemsize * counts["vertex"]
    )
    assert end + vert_dtype.itemsize * counts["vertex"] + face_dtype.itemsize * counts["face"] == len(data)
    assert (faces["n"] == 3).all()
    return counts, verts, faces["i"]


def _read_glb(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    data = path.read_bytes()
    magic, version, total = struct.unpack_from("<4sII", data, 0)
    assert (magic, version, total) == (b"glTF", 2, len(data))
    json_len, json_type = struct.unpack_from("<I4s", data, 12)
    assert json_type == b"JSON" and json_len % 4 == 0
    doc = json.loads(data[20 : 20 + json_len])
    bin_len, bin_type = struct.unpack_from("<I4s", data, 20 + json_len)
    assert bin_type == b"BIN\x00"
    binary = data[28 + json_len : 28 + json_len + bin_len]
    assert doc["buffers"][0]["byteLength"] == bin_len
    comps = {5126: np.float32, 5125: np.uint32}
    widths = {"SCALAR": 1, "VEC2": 2, "VEC3": 3}
    prim = doc["meshes"][0]["primitives"][0]
    arrays = {}
    for name, acc_index in [*prim["attributes"].items(), ("indices", prim["indices"])]:
        acc = doc["accessors"][acc_index]
        view = doc["bufferViews"][acc["bufferView"]]
        arr = np.frombuffer(
            binary, comps[acc["componentType"]], acc["count"] * widths[acc["type"]], view["byteOffset"]
        )
        arrays[name] = arr.reshape(acc["count"], widths[acc["type"]]) if acc["type"] != "SCALAR" else arr
    for i, image in enumerate(doc.get("images", [])):
        view = doc["bufferViews"][image["bufferView"]]
        arrays[f"image{i}"] = binary[view["byteOffset"] : view["byteOffset"] + view["byteLength"]]
    return doc, arrays


def test_plane_mesh_counts_and_winding() -> None:
    mesh = pointmap_to_mesh(_plane())
    assert mesh.vertices.shape == (H * W, 3)
    assert mesh.faces.shape == (2 * (H - 1) * (W - 1), 3)
    tri = mesh.vertices[mesh.faces.astype(np.int64)]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    assert (normal[:, 2] < 0).all()  # facing the camera (−Z in OpenCV)


def test_mask_invalid_and_discontinuity_filtering() -> None:
    points = _plane()
    points[:, W // 2 :, 2] = 4.0  # a depth step between columns 3 and 4
    points[:, W // 2 :, :2] *= 2.0
    points[0, 0] = 0.0  # invalid point
    mask = np.ones((H, W), bool)
    mask[H - 1, :] = False  # drop the last row
    mesh = pointmap_to_mesh(points, mask=mask, max_edge_ratio=0.05)
    assert len(mesh.vertices) == (H - 1) * W - 1
    # quads: rows 0..H-3 (masked last row), columns split into two 4-wide halves (3 quads each), minus the
    # triangle touching the invalid (0, 0) corner.
    assert len(mesh.faces) == 2 * (H - 2) * 3 * 2 - 1
    z = mesh.vertices[mesh.faces.astype(np.int64)][..., 2]
    assert (z.max(axis=1) - z.min(axis=1) == 0).all()  # no triangle spans the step


def test_ply_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    colors = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    normals = np.zeros((H, W, 3), np.float32)
    normals[..., 2] = -1
    mesh = pointmap_to_mesh(_plane(), colors=colors, normals=normals)
    path = write_ply(tmp_path / "m.ply", mesh)
    counts, verts, faces = _read_ply(path)
    assert counts == {"vertex": H * W, "face": 2 * (H - 1) * (W - 1)}
    expected = _plane().reshape(-1, 3) * OPENCV_TO_FILE  # the glTF frame, like the GLB
    np.testing.assert_array_equal(np.stack([verts["x"], verts["y"], verts["z"]], 1), expected)
    np.testing.assert_array_equal(
        np.stack([verts["red"], verts["green"], verts["blue"]], 1), colors.reshape(-1, 3)
    )
    np.testing.assert_array_equal(verts["nz"], 1)  # facing the camera: +z toward the viewer
    np.testing.assert_array_equal(faces, mesh.faces)


def test_glb_round_trip(tmp_path: Path) -> None:
    colors = np.random.default_rng(1).integers(0, 256, (H, W, 3), dtype=np.uint8)
    mesh = pointmap_to_mesh(_plane(), colors=colors)
    doc, arrays = _read_glb(write_mesh(tmp_path / "m.glb", mesh))
    assert doc["asset"]["version"] == "2.0"
    expected = _plane().reshape(-1, 3) * np.array([1, -1, -1], np.float32)  # OpenCV → glTF
    np.testing.assert_array_equal(arrays["POSITION"], expected)
    acc = doc["accessors"][doc["meshes"][0]["primitives"][0]["attributes"]["POSITION"]]
    np.testing.assert_allclose(acc["min"], expected.min(0))
    np.testing.assert_allclose(acc["max"], expected.max(0))
    # colours: the image as the material's base-colour texture, each vertex at its pixel's centre; no COLOR_0
    # (three.js would multiply it with the texture)
    assert "COLOR_0" not in arrays
    material = doc["materials"][doc["meshes"][0]["primitives"][0]["material"]]
    assert material["pbrMetallicRoughness"]["baseColorTexture"]["index"] == 0
    assert material["pbrMetallicRoughness"]["metallicFactor"] == 0.0
    assert doc["images"][0]["mimeType"] == "image/png"
    with Image.open(BytesIO(arrays["image0"])) as png:
        np.testing.assert_array_equal(np.asarray(png.convert("RGB")), colors)
    u, v = np.meshgrid((np.arange(W) + 0.5) / W, (np.arange(H) + 0.5) / H)
    np.testing.assert_allclose(arrays["TEXCOORD_0"], np.stack([u, v], -1).reshape(-1, 2), atol=1e-7)
    np.testing.assert_array_equal(arrays["indices"].reshape(-1, 3), mesh.faces)
    # winding: glTF front faces are counter-clockwise seen from +Z (the viewer side)
    tri = arrays["POSITION"][arrays["indices"].reshape(-1, 3).astype(np.int64)]
    assert (np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])[:, 2] > 0).all()


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"points must be \(H, W, 3\)"):
        pointmap_to_mesh(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="mask must be"):
        pointmap_to_mesh(_plane(), mask=np.ones((2, 2), bool))
    empty = pointmap_to_mesh(np.zeros((H, W, 3), np.float32))
    with pytest.raises(ValueError, match="mesh is empty"):
        write_glb(tmp_path / "e.glb", empty)
    with pytest.raises(ValueError, match=r"use \.ply or \.glb"):
        write_mesh(tmp_path / "m.obj", empty)


def _sphere_mesh():
    from sapiens2_studio.core.testing.scenes import ellipsoid_scene

    scene = ellipsoid_scene(64, 64, center=(0.0, 0.0, 3.0), semi_axes=(0.4, 0.4, 0.4), focal=200.0)
    return scene, pointmap_to_mesh(scene.points, mask=scene.mask, normals=scene.normals)


def _winding_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    tri = vertices[faces.astype(np.int64)]
    return np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])


def test_ply_vertex_normals_of_a_sphere_point_out_and_toward_the_camera(tmp_path: Path) -> None:
    """glTF frame, as the GLB: outward = away from the centre (0, 0, −3), toward the camera = −P, up = +y."""
    _, mesh = _sphere_mesh()
    _, verts, faces = _read_ply(write_ply(tmp_path / "sphere.ply", mesh))
    v = np.stack([verts["x"], verts["y"], verts["z"]], 1).astype(np.float64)
    n = np.stack([verts["nx"], verts["ny"], verts["nz"]], 1).astype(np.float64)
    outward = ((v - (0.0, 0.0, -3.0)) / 0.4 * n).sum(1)
    assert outward.min() > 0.9999 and ((-v) * n).sum(1).min() > 0  # measured: 1 − 1e-7; rim ≈ 0.04·|P|
    top = v[:, 1] > 0.35
    assert top.any() and (n[top, 1] > 0.85).all()  # the top of the sphere faces up: +y
    face_n = _winding_normals(v, faces)
    assert ((face_n * n[faces[:, 0]]).sum(1) > 0).all()  # winding agrees with the vertex normals


def test_glb_vertex_normals_of_a_sphere_are_in_the_gltf_frame(tmp_path: Path) -> None:
    """glTF frame (y up, the camera looks down −z): outward from (0, 0, −3), up = +y, toward the camera = +z-ish."""
    _, mesh = _sphere_mesh()
    _, arrays = _read_glb(write_glb(tmp_path / "sphere.glb", mesh))
    v, n = arrays["POSITION"].astype(np.float64), arrays["NORMAL"].astype(np.float64)
    assert (((v - (0.0, 0.0, -3.0)) / 0.4 * n).sum(1)).min() > 0.9999
    assert ((-v) * n).sum(1).min() > 0
    top = v[:, 1] > 0.35
    assert top.any() and (n[top, 1] > 0.85).all()
    faces = arrays["indices"].reshape(-1, 3)
    face_n = _winding_normals(v, faces)  # counter-clockwise front faces, as glTF requires
    assert ((face_n * n[faces[:, 0].astype(np.int64)]).sum(1) > 0).all()


def test_png_encoder_round_trips_through_pillow() -> None:
    image = np.random.default_rng(2).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    with Image.open(BytesIO(encode_png(image))) as png:
        assert png.mode == "RGB" and png.size == (7, 5)
        np.testing.assert_array_equal(np.asarray(png), image)


def _person_plane() -> tuple[np.ndarray, np.ndarray]:
    """A plane 2 m away whose upper half is red and lower half blue, as an image would show a person."""
    colors = np.zeros((H, W, 3), np.uint8)
    colors[: H // 2] = (220, 30, 30)
    colors[H // 2 :] = (30, 30, 220)
    return _plane(), colors


@pytest.mark.parametrize("suffix", ["glb", "ply"])
def test_trimesh_shows_the_colours_upright(tmp_path: Path, suffix: str) -> None:
    """trimesh's default load: colours per vertex equal the image's pixels (the GLB's texture sampled at the
    vertices, the PLY's vertex colours) and the top of the image is up (+y), in both files."""
    trimesh = pytest.importorskip("trimesh")
    points, colors = _person_plane()
    path = write_mesh(tmp_path / f"m.{suffix}", pointmap_to_mesh(points, colors=colors))
    loaded = trimesh.load(path)
    geometry = next(iter(loaded.geometry.values())) if hasattr(loaded, "geometry") else loaded
    assert geometry.visual.kind == ("texture" if suffix == "glb" else "vertex")
    visual = geometry.visual.to_color() if suffix == "glb" else geometry.visual
    rgb = np.asarray(visual.vertex_colors)[:, :3].astype(int)
    assert len(rgb) == H * W
    assert np.abs(rgb - colors.reshape(-1, 3)).max() == 0  # measured: exact, for both files
    red = np.all(rgb == (220, 30, 30), axis=1)
    assert geometry.vertices[red, 1].min() > geometry.vertices[~red, 1].max()  # the image's top is up (+y)
    assert geometry.vertices[:, 2].max() < 0  # in front of the camera, which looks down −z
