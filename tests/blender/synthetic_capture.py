"""Synthetic Sapiens2 captures for the Blender tests, the import benchmark and the docs renders.

Everything is analytic, so tests know the exact answer: a pinhole camera, a person made of rounded capsules
between stick-figure joints (depth, normals, seg classes and mask follow from the geometry), and 308 keypoints
placed on the figure. Bundles are written with the project's own writer (``core.formats.bundle``). This module
is loaded by file path (it is not a package) and imports the project only inside the writer functions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
_NAMES = json.loads((REPO / "core" / "data" / "keypoints308.json").read_text(encoding="utf-8"))[
    "keypoint_names"
]

# Stick figure in normalised image coordinates (x right, y down) for a portrait frame; depth offsets in metres.
_BODY = {
    "nose": (0.50, 0.13),
    "left_eye": (0.53, 0.11),
    "right_eye": (0.47, 0.11),
    "left_ear": (0.56, 0.12),
    "right_ear": (0.44, 0.12),
    "neck": (0.50, 0.21),
    "left_shoulder": (0.62, 0.24),
    "right_shoulder": (0.38, 0.24),
    "left_acromion": (0.61, 0.235),
    "right_acromion": (0.39, 0.235),
    "left_elbow": (0.70, 0.38),
    "right_elbow": (0.30, 0.38),
    "left_olecranon": (0.71, 0.385),
    "right_olecranon": (0.29, 0.385),
    "left_cubital_fossa": (0.69, 0.375),
    "right_cubital_fossa": (0.31, 0.375),
    "left_wrist": (0.76, 0.50),
    "right_wrist": (0.24, 0.50),
    "left_hip": (0.56, 0.52),
    "right_hip": (0.44, 0.52),
    "left_knee": (0.57, 0.70),
    "right_knee": (0.43, 0.70),
    "left_ankle": (0.58, 0.88),
    "right_ankle": (0.42, 0.88),
    "left_big_toe": (0.60, 0.93),
    "left_small_toe": (0.62, 0.92),
    "left_heel": (0.575, 0.90),
    "right_big_toe": (0.40, 0.93),
    "right_small_toe": (0.38, 0.92),
    "right_heel": (0.425, 0.90),
}
# Capsules: (joint a, joint b, radius as a fraction of image width, seg class id).
_CAPSULES = [
    ("neck", "nose", 0.07, 3),
    ("left_shoulder", "right_shoulder", 0.06, 22),
    ("neck", "left_hip", 0.09, 22),
    ("neck", "right_hip", 0.09, 22),
    ("left_hip", "right_hip", 0.08, 22),
    ("left_shoulder", "left_elbow", 0.035, 21),
    ("right_shoulder", "right_elbow", 0.035, 14),
    ("left_elbow", "left_wrist", 0.03, 7),
    ("right_elbow", "right_wrist", 0.03, 16),
    ("left_hip", "left_knee", 0.05, 25),
    ("right_hip", "right_knee", 0.05, 18),
    ("left_knee", "left_ankle", 0.04, 8),
    ("right_knee", "right_ankle", 0.04, 17),
    ("left_ankle", "left_big_toe", 0.025, 9),
    ("right_ankle", "right_big_toe", 0.025, 23),
]


def intrinsics(width: int, height: int) -> tuple[float, float, float, float]:
    focal = 1.1 * max(width, height)
    return focal, focal, width / 2.0, height / 2.0


def backproject(u, v, depth, fx, fy, cx, cy) -> np.ndarray:
    return np.stack([(u - cx) / fx * depth, (v - cy) / fy * depth, depth], axis=-1)


def figure_keypoints(width: int, height: int, sway: float = 0.0, seed: int = 0) -> np.ndarray:
    """(308, 3) x, y, score in corner-origin pixels for a standing figure; ``sway`` moves the arms."""
    rng = np.random.default_rng(seed)
    base = dict(_BODY)
    for side, sign in (("left", 1.0), ("right", -1.0)):
        wx, wy = base[f"{side}_wrist"]
        base[f"{side}_wrist"] = (wx + sign * sway * 0.05, wy - sway * 0.08)
    kps = np.zeros((308, 3), dtype=np.float32)
    for k, name in enumerate(_NAMES):
        if name in base:
            x, y = base[name]
        elif "thumb" in name or "finger" in name:
            side = "left" if name.startswith("left") else "right"
            wx, wy = base[f"{side}_wrist"]
            finger = next(
                i for i, f in enumerate(("thumb", "forefinger", "middle", "ring", "pinky")) if f in name
            )
            step = 1 if "third_joint" in name else int(name[-1])  # 1 at the knuckle .. 4 at the tip
            sign = 1.0 if side == "left" else -1.0
            x = wx + sign * (0.004 * finger - 0.006) + sign * 0.002 * step
            y = wy + 0.012 * step
        else:  # dense face: on an ellipse around the nose
            t = rng.uniform(0, 2 * np.pi)
            r = np.sqrt(rng.uniform(0.0, 1.0))
            x, y = 0.50 + 0.045 * r * np.cos(t), 0.12 + 0.05 * r * np.sin(t)
        kps[k] = (x * width, y * height, 0.9)
    kps[:, 2] = rng.uniform(0.55, 0.98, size=308).astype(np.float32)
    return kps


def figure_layers(
    width: int,
    height: int,
    keypoints: np.ndarray,
    background_depth: float = 4.0,
    background_points: bool = False,
) -> dict:
    """Depth, points, normals, seg, mask, image and albedo for the capsule figure at ~3 m.

    ``background_points`` keeps the backdrop's points (a pointmap that was not masked) instead of the contract's
    zeros, so every pixel is valid: the worst case for the mesh builder.
    """
    fx, fy, cx, cy = intrinsics(width, height)
    index = {n: i for i, n in enumerate(_NAMES)}
    u = np.arange(width, dtype=np.float64) + 0.5
    v = np.arange(height, dtype=np.float64) + 0.5
    uu, vv = np.meshgrid(u, v)
    depth = np.full((height, width), background_depth)
    seg = np.zeros((height, width), dtype=np.int32)
    body_depth = 3.0
    for a, b, radius, cls in _CAPSULES:
        pa, pb = keypoints[index[a], :2].astype(np.float64), keypoints[index[b], :2].astype(np.float64)
        r = radius * width
        ab = pb - pa
        t = np.clip(((uu - pa[0]) * ab[0] + (vv - pa[1]) * ab[1]) / max(ab @ ab, 1e-9), 0.0, 1.0)
        dist = np.hypot(uu - (pa[0] + t * ab[0]), vv - (pa[1] + t * ab[1]))
        inside = dist < r
        bulge = np.sqrt(np.clip(1.0 - (dist / r) ** 2, 0.0, 1.0)) * r / fx * body_depth
        capsule_depth = body_depth - bulge
        closer = inside & (capsule_depth < depth)
        depth[closer] = capsule_depth[closer]
        seg[closer] = cls
    mask = (seg > 0).astype(np.float32)
    points = backproject(uu, vv, depth, fx, fy, cx, cy).astype(np.float32)
    du = np.gradient(points, axis=1)
    dv = np.gradient(points, axis=0)
    normals = np.cross(du, dv)  # OpenCV frame; faces the camera (negative z)
    normals /= np.maximum(np.linalg.norm(normals, axis=-1, keepdims=True), 1e-12)
    normals[normals[..., 2] > 0] *= -1
    palette = (
        np.array(
            json.loads((REPO / "core" / "data" / "seg29.json").read_text(encoding="utf-8"))["palette_rgb"],
            dtype=np.float32,
        )
        / 255.0
    )
    shade = np.clip(-normals[..., 2], 0.2, 1.0)[..., None]
    albedo = palette[seg] * 0.8 + 0.1
    backdrop = np.stack([0.25 + 0.2 * vv / height, 0.3 + 0.0 * uu, 0.35 + 0.1 * uu / width], axis=-1)
    image = np.where(mask[..., None] > 0, albedo * shade, backdrop)
    if not background_points:
        points[mask == 0] = 0.0  # the contract: P is 0 on background pixels
    return {
        "points": points,
        "normals": normals.astype(np.float32),
        "seg": seg,
        "mask": mask,
        "image": np.clip(image, 0, 1).astype(np.float32),
        "albedo": np.clip(albedo, 0, 1).astype(np.float32),
        "camera": {"fx": fx, "fy": fy, "cx": cx, "cy": cy, "source": "pointmap"},
    }


def figure_frame(
    width: int, height: int, sway: float = 0.0, frame: int | None = None, background_points: bool = False
):
    """A CaptureFrame of the synthetic person (project writer's type)."""
    from sapiens2_studio.core.formats.bundle import CaptureFrame, CapturePerson

    kps = figure_keypoints(width, height, sway)
    layers = figure_layers(width, height, kps, background_points=background_points)
    x1, y1 = kps[:, 0].min(), kps[:, 1].min()
    x2, y2 = kps[:, 0].max(), kps[:, 1].max()
    person = CapturePerson(bbox=(x1, y1, x2, y2), keypoints=kps, bbox_source="seg")
    return CaptureFrame(
        width=width,
        height=height,
        image=layers["image"],
        points=layers["points"],
        normals=layers["normals"],
        albedo=layers["albedo"],
        seg=layers["seg"],
        mask=layers["mask"],
        camera=layers["camera"],
        people=[person],
        models=[
            {"task": "pointmap", "size": "synthetic", "checkpoint": "synthetic.safetensors", "sha256": None}
        ],
        pointmap_scale=1.0,
        frame=frame,
        source_name=None,
    )


# ------------------------------------------------------------------------------------------- tiny, exact bundle

TINY_W, TINY_H = 8, 6
TINY_CAMERA = {"fx": 10.0, "fy": 10.0, "cx": 4.0, "cy": 3.0, "source": "pointmap"}


def tiny_arrays() -> dict:
    """8x6 capture: row 0 is a background wall at 5 m; below it columns 0-4 are at 2 m and 5-7 at 3 m (a depth
    step faces must not cross)."""
    h, w = TINY_H, TINY_W
    uu, vv = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    depth = np.where(uu < 5, 2.0, 3.0)
    depth[0] = 5.0
    c = TINY_CAMERA
    points = backproject(uu, vv, depth, c["fx"], c["fy"], c["cx"], c["cy"]).astype(np.float32)
    normals = np.stack([0.3 * np.sin(uu), 0.2 * np.cos(vv), -np.ones_like(uu)], axis=-1)
    normals = (normals / np.linalg.norm(normals, axis=-1, keepdims=True)).astype(np.float32)
    seg = ((np.arange(w)[None, :] + np.arange(h)[:, None]) % 28 + 1).astype(np.int32)
    seg[0] = 0
    mask = np.where(vv < 1, 0.0, 0.5 + 0.05 * uu).astype(np.float32)
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    albedo = rng.uniform(0, 1, size=(h, w, 3)).astype(np.float32)
    # 308 keypoints on pixel centres of the foreground, a few special ones.
    kp = np.zeros((308, 3), dtype=np.float32)
    flat = np.arange(308)
    kp[:, 0] = (flat % w) + 0.5
    kp[:, 1] = 1 + (flat // w) % (h - 1) + 0.5
    kp[:, 2] = 0.9
    kp[0, 2] = 0.1  # nose below the default 0.3 threshold: hidden
    kp[5] = (-3.0, 2.5, 0.8)  # left_shoulder outside the image: no 3D -> median-depth plane
    kp[6] = (2.5, 0.5, 0.8)  # right_shoulder on a background pixel: its 3D (the wall) is not trusted
    return {
        "points": points,
        "normals": normals,
        "seg": seg,
        "mask": mask,
        "image": image,
        "albedo": albedo,
        "keypoints": kp,
    }


def write_tiny(folder: Path, name: str = "tiny", compression: str | None = None) -> Path:
    from sapiens2_studio.core.formats.bundle import CaptureFrame, CapturePerson, write_bundle

    a = tiny_arrays()
    person = CapturePerson(bbox=(0.0, 1.0, 8.0, 6.0), keypoints=a["keypoints"], bbox_source="given")
    frame = CaptureFrame(
        width=TINY_W,
        height=TINY_H,
        image=a["image"],
        points=a["points"],
        normals=a["normals"],
        albedo=a["albedo"],
        seg=a["seg"],
        mask=a["mask"],
        camera=dict(TINY_CAMERA),
        people=[person],
        models=[
            {
                "task": "pointmap",
                "size": "0.4b",
                "checkpoint": "sapiens2_0.4b_pointmap.safetensors",
                "sha256": "ab" * 32,
            }
        ],
        pointmap_scale=0.85,
    )
    return write_bundle(folder, name, frame, compression=compression)


def write_figure(folder: Path, name: str, width: int, height: int, background_points: bool = False) -> Path:
    from sapiens2_studio.core.formats.bundle import write_bundle

    return write_bundle(folder, name, figure_frame(width, height, background_points=background_points))


def write_figure_sequence(
    folder: Path, name: str, width: int, height: int, frames: int, fps: float = 12.0
) -> Path:
    from sapiens2_studio.core.formats.sequence import write_sequence

    sways = np.sin(np.linspace(0, np.pi, frames))
    return write_sequence(folder, name, [figure_frame(width, height, float(s)) for s in sways], fps=fps)


def write_tracked_sequence(folder: Path, name: str, width: int, height: int) -> Path:
    """Two tracked people (CLI ``--smooth`` style): track 7 on the left in frames 1-4, track 3 on the right in
    frames 3-5. Each frame lists the people in another order, so the per-frame ``id`` does not follow a person."""
    from sapiens2_studio.core.formats.bundle import CapturePerson
    from sapiens2_studio.core.formats.sequence import write_sequence

    frames = []
    for t in range(5):
        frame = figure_frame(width, height)
        base = frame.people[0].keypoints
        people = []
        for track, shift, present in ((3, 0.2, t >= 2), (7, -0.2, t <= 3)):
            if present:
                kps = base.copy()
                kps[:, 0] += shift * width
                people.append(CapturePerson(bbox=(0.0, 0.0, width, height), keypoints=kps, track_id=track))
        frame.people = people
        frames.append(frame)
    return write_sequence(folder, name, frames, fps=24.0)


SPHERE = {"width": 64, "height": 64, "center": (0.0, 0.0, 3.0), "radius": 0.4, "focal": 200.0}


def write_sphere(folder: Path, name: str = "sphere", *, legacy: bool = False) -> Path:
    """A sphere (exact pointmap and outward OpenCV-frame normals) in front of the camera, background invalid.

    ``legacy``: what a version-1.0 writer produced: the normal model's raw OpenGL-frame output (y and z of the
    OpenCV normals negated) labelled "opencv", in a JSON of version "1.0"."""
    from sapiens2_studio.core.formats.bundle import CaptureFrame, write_bundle
    from sapiens2_studio.core.testing.scenes import ellipsoid_scene

    r = SPHERE["radius"]
    scene = ellipsoid_scene(
        SPHERE["width"], SPHERE["height"], center=SPHERE["center"], semi_axes=(r, r, r), focal=SPHERE["focal"]
    )
    normals = scene.normals * np.array([1.0, -1.0, -1.0], np.float32) if legacy else scene.normals
    fx, fy, cx, cy = scene.intrinsics
    frame = CaptureFrame(
        width=SPHERE["width"],
        height=SPHERE["height"],
        points=scene.points,
        normals=normals,
        mask=scene.mask.astype(np.float32),
        camera={"fx": fx, "fy": fy, "cx": cx, "cy": cy, "source": "pointmap"},
    )
    path = write_bundle(folder, name, frame)
    if legacy:
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc["version"] = "1.0"
        path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def soft_alpha(mask: np.ndarray, radius: int = 2) -> np.ndarray:
    """A matte-like soft alpha from a hard mask: a (2r+1)² box blur, so the edge ramps over 2r+1 pixels around
    the segmentation boundary (above 0.5 just inside it, below just outside)."""
    kernel = np.ones(2 * radius + 1) / (2 * radius + 1)
    padded = np.pad(mask.astype(np.float64), radius, mode="edge")
    rows = np.apply_along_axis(lambda r: np.convolve(r, kernel, mode="valid"), 1, padded)
    return np.apply_along_axis(lambda c: np.convolve(c, kernel, mode="valid"), 0, rows).astype(np.float32)


def write_matte(folder: Path, name: str = "matte", width: int = 48, height: int = 64) -> Path:
    """The figure with a matting layer (soft alpha, straight foreground = the photo's colour), and next to it
    ``expected_<name>.npz``: alpha and straight foreground as the project's reader returns them."""
    from sapiens2_studio.core.formats.bundle import read_bundle, write_bundle

    frame = figure_frame(width, height)
    frame.alpha = soft_alpha(frame.mask)
    frame.foreground = frame.image
    frame.models.append(
        {"task": "matting", "size": "1b", "checkpoint": "synthetic.safetensors", "sha256": None}
    )
    path = write_bundle(folder, name, frame)
    back = read_bundle(path)
    np.savez(folder / f"expected_{name}.npz", alpha=back.alpha, foreground=back.foreground, mask=back.mask)
    return path


GARMENT_CLASSES = ({"id": 0, "name": "background"}, {"id": 1, "name": "top"}, {"id": 2, "name": "bottom"})


def write_task_layers(folder: Path, name: str = "garment", width: int = 48, height: int = 64) -> Path:
    """The figure with the layers of a task the add-on does not know (a plug-in's garment classes, declared as
    class ids, and its confidence as a half-float value), and ``expected_<name>.npz``: both as the project's
    reader returns them."""
    from sapiens2_studio.core.formats.bundle import read_bundle, write_bundle
    from sapiens2_studio.core.formats.task_layers import TaskLayer

    frame = figure_frame(width, height)
    rows = np.arange(height)[:, None] + np.zeros((1, width), int)
    ids = np.where(frame.mask > 0.5, 1 + (rows >= height // 2), 0)  # top above the middle, bottom below
    confidence = np.linspace(0.0, 1.0, width * height, dtype=np.float32).reshape(height, width)
    frame.extra = {"garment": {"id": ids}, "garment_conf": {"prob": confidence}}
    frame.task_layers = {
        "garment": TaskLayer("garment", ("id",), "float", "class_id", GARMENT_CLASSES),
        "garment_conf": TaskLayer("garment", ("prob",), "half", "probability"),
    }
    path = write_bundle(folder, name, frame)
    back = read_bundle(path)
    np.savez(
        folder / f"expected_{name}.npz",
        id=back.extra["garment"]["id"],
        prob=back.extra["garment_conf"]["prob"],
    )
    return path
