"""Keypoints -> a bone hierarchy and 3D joint positions (numpy only).

Names, links and their count come from the bundle, so any keypoint set works. For the Sapiens2/Goliath names the
hierarchy is anatomical: a synthetic ``pelvis`` root between the hips, ``neck`` under it, arms from the neck,
legs from the pelvis, then hands and feet grown along the bundle's skeleton links from the wrists and ankles.
Points without links (the dense face) hang off the head and go to their own bone collection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PELVIS = "pelvis"

# Preferred parents for the named body joints; names missing from a bundle are skipped.
_PREFERRED_PARENT = {
    "left_hip": PELVIS,
    "right_hip": PELVIS,
    "neck": PELVIS,
    "left_shoulder": "neck",
    "right_shoulder": "neck",
    "left_acromion": "left_shoulder",
    "right_acromion": "right_shoulder",
    "left_elbow": "left_shoulder",
    "right_elbow": "right_shoulder",
    "left_olecranon": "left_elbow",
    "right_olecranon": "right_elbow",
    "left_cubital_fossa": "left_elbow",
    "right_cubital_fossa": "right_elbow",
    "left_wrist": "left_elbow",
    "right_wrist": "right_elbow",
    "left_knee": "left_hip",
    "right_knee": "right_hip",
    "left_ankle": "left_knee",
    "right_ankle": "right_knee",
    "nose": "neck",
    "left_eye": "nose",
    "right_eye": "nose",
    "left_ear": "left_eye",
    "right_ear": "right_eye",
}
# Where a bone with several children points its tail.
_PRIMARY_CHILD = {
    PELVIS: "neck",
    "neck": "nose",
    "left_wrist": "left_middle_finger_third_joint",
    "right_wrist": "right_middle_finger_third_joint",
    "left_elbow": "left_wrist",
    "right_elbow": "right_wrist",
    "left_shoulder": "left_elbow",
    "right_shoulder": "right_elbow",
}
FACE_TAIL_LENGTH = 0.01  # metres, for points that have no child to point at
MIN_BONE_LENGTH = 1e-3
# Blender deletes bones shorter than 1e-6 units when it leaves edit mode; stay well above that at any Scale.
BLENDER_MIN_BONE_LENGTH = 1e-5


@dataclass
class Hierarchy:
    """Bones in parent-before-child order; ``joint`` maps a bone to its keypoint (-1 = synthetic pelvis)."""

    names: list[str]
    joint: np.ndarray  # (B,) int
    parent: np.ndarray  # (B,) int, -1 for roots
    collection: list[str]  # "Body" | "Hands" | "Feet" | "Face"
    tail_children: list[list[int]]  # bone indices the tail points at (empty: extend from the parent)

    @property
    def num_bones(self) -> int:
        return len(self.names)


def _collection_for(name: str, linked: bool, preferred: bool) -> str:
    if any(part in name for part in ("thumb", "finger")):
        return "Hands"
    if any(part in name for part in ("toe", "heel")):
        return "Feet"
    if preferred or linked or name == PELVIS:
        return "Body"
    return "Face"


def build_hierarchy(names: list[str], links: list[tuple[int, int]]) -> Hierarchy:
    """Parent for every keypoint: preferred anatomy first, then breadth-first along links, then the head."""
    index = {n: i for i, n in enumerate(names)}
    # A synthetic pelvis between the hips, unless the keypoint set has its own (which then is the root).
    has_pelvis = "left_hip" in index and "right_hip" in index and PELVIS not in index
    bone_names = ([PELVIS] if has_pelvis else []) + list(names)
    parent_name: dict[str, str | None] = {}
    root = PELVIS if has_pelvis or PELVIS in index else (names[0] if names else None)
    if root is not None:
        parent_name[root] = None

    def placed(n: str | None) -> bool:
        return n is not None and n in parent_name

    # Preferred anatomy, resolved until nothing changes (parents may be listed after children).
    changed = True
    while changed:
        changed = False
        for child, parent in _PREFERRED_PARENT.items():
            if child in index and child not in parent_name:
                target = (
                    parent if placed(parent) else (PELVIS if parent == "neck" and placed(PELVIS) else None)
                )
                if placed(target):
                    parent_name[child] = target
                    changed = True
    # Breadth-first along the bundle's links from everything placed so far (hands, feet, other sets).
    neighbours: dict[int, list[int]] = {i: [] for i in range(len(names))}
    for a, b in links:
        neighbours[a].append(b)
        neighbours[b].append(a)
    queue = deque(index[n] for n in list(parent_name) if n in index)
    while queue:
        current = queue.popleft()
        for other in neighbours[current]:
            if names[other] not in parent_name:
                parent_name[names[other]] = names[current]
                queue.append(other)
    # Unlinked points (the dense face) hang off the head.
    head = next((n for n in ("nose", "neck", PELVIS) if placed(n)), root)
    linked = {i for link in links for i in link}
    for n in names:
        if n not in parent_name:
            parent_name[n] = head if n != head else None

    order: list[str] = []
    children: dict[str | None, list[str]] = {}
    for n in bone_names:
        children.setdefault(parent_name[n], []).append(n)
    stack = list(reversed(children.get(None, [])))
    while stack:  # depth-first so parents always precede children
        n = stack.pop()
        order.append(n)
        stack.extend(reversed(children.get(n, [])))

    position = {n: i for i, n in enumerate(order)}
    tails = []
    for n in order:
        kids = children.get(n, [])
        primary = _PRIMARY_CHILD.get(n)
        if primary in kids:
            tails.append([position[primary]])
        else:
            face_kids = [
                k
                for k in kids
                if _collection_for(k, index.get(k, -1) in linked, k in _PREFERRED_PARENT) != "Face"
            ]
            tails.append([position[k] for k in face_kids])
    return Hierarchy(
        names=order,
        joint=np.array([index.get(n, -1) for n in order], dtype=np.int64),
        parent=np.array(
            [position[parent_name[n]] if parent_name[n] is not None else -1 for n in order], dtype=np.int64
        ),
        collection=[_collection_for(n, index.get(n, -1) in linked, n in _PREFERRED_PARENT) for n in order],
        tail_children=tails,
    )


def joints_3d(
    keypoints: np.ndarray,
    keypoints_3d: np.ndarray | None,
    points: Callable[[np.ndarray, np.ndarray], np.ndarray] | None,
    size: tuple[int, int],
    fx: float,
    fy: float,
    cx: float,
    cy: float,
    default_depth: float,
    foreground: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(K, 3) OpenCV positions and (K,) source codes: 0 = keypoints_3d, 1 = pointmap, 2 = depth plane.

    ``points(rows, cols)`` returns pointmap values (n, 3) at pixels (None: no pointmap); ``size`` is (W, H).
    ``foreground(rows, cols)`` (bool per pixel) rejects 3D values taken from background pixels: a fingertip
    on the silhouette edge would otherwise land on the wall behind the person.
    Joints without a 3D position are put on the pixel's ray at the median depth of the person's other joints
    (or ``default_depth`` when the person has none), so the skeleton stays whole and lines up with the image.
    """
    k = keypoints.shape[0]
    out = np.full((k, 3), np.nan, dtype=np.float64)
    source = np.full(k, 2, dtype=np.int8)
    w, h = size
    xy = np.nan_to_num(keypoints[:, :2], nan=-1.0)
    col = np.floor(xy[:, 0]).astype(np.int64)
    row = np.floor(xy[:, 1]).astype(np.int64)
    in_image = (col >= 0) & (col < w) & (row >= 0) & (row < h)
    trusted = np.ones(k, dtype=bool)
    if foreground is not None and in_image.any():
        trusted[in_image] = foreground(row[in_image], col[in_image])
    if keypoints_3d is not None:
        ok = np.isfinite(keypoints_3d).all(axis=1) & (keypoints_3d[:, 2] > 0) & trusted
        out[ok] = keypoints_3d[ok]
        source[ok] = 0
    if points is not None:
        inside = in_image & trusted & ~np.isfinite(out).all(axis=1)
        sampled = np.zeros((k, 3))
        if inside.any():
            sampled[inside] = points(row[inside], col[inside])
        ok = inside & np.isfinite(sampled).all(axis=1) & (sampled[:, 2] > 0)
        out[ok] = sampled[ok]
        source[ok] = 1
    missing = ~np.isfinite(out).all(axis=1)
    if missing.any():
        found = out[~missing, 2]
        depth = float(np.median(found)) if found.size else float(default_depth)
        u, v = keypoints[missing, 0], keypoints[missing, 1]
        out[missing] = np.stack(
            [(u - cx) / fx * depth, (v - cy) / fy * depth, np.full(u.shape, depth)], axis=1
        )
    # A keypoint without a finite pixel has no ray: park it at the median of the person's placed joints (its
    # score is 0, so the bone is hidden); a NaN head would break the viewport, exporters and retargeting.
    lost = ~np.isfinite(out).all(axis=1)
    if lost.any():
        placed = out[~lost]
        out[lost] = np.median(placed, axis=0) if placed.size else (0.0, 0.0, float(default_depth))
    return out, source


def bone_heads(hierarchy: Hierarchy, joints: np.ndarray) -> np.ndarray:
    """(..., B, 3) bone heads from (..., K, 3) joints; the synthetic pelvis sits between the hips."""
    heads = np.take(joints, np.maximum(hierarchy.joint, 0), axis=-2).copy()
    synthetic = np.nonzero(hierarchy.joint < 0)[0]
    if synthetic.size:
        names = hierarchy.names
        left = hierarchy.joint[names.index("left_hip")]
        right = hierarchy.joint[names.index("right_hip")]
        heads[..., synthetic, :] = 0.5 * (joints[..., left, :] + joints[..., right, :])[..., None, :]
    return heads


def bone_tails(
    hierarchy: Hierarchy, heads: np.ndarray, face_direction: np.ndarray, unit: float = 1.0
) -> np.ndarray:
    """(B, 3) tails: towards the (mean of the) child heads, else continuing the parent's direction.

    ``face_direction`` (unit, same frame) is used for bones with neither, e.g. face points: it should point at
    the camera so the little bones do not cross the face. ``unit`` is the scene scale (lengths in metres x unit).
    """
    tails = heads.copy()
    for b in range(hierarchy.num_bones):
        kids = hierarchy.tail_children[b]
        tail = heads[kids].mean(axis=0) if kids else None
        if tail is None or np.linalg.norm(tail - heads[b]) < MIN_BONE_LENGTH * unit:
            p = hierarchy.parent[b]
            direction = heads[b] - heads[p] if p >= 0 else np.zeros(3)
            length = np.linalg.norm(direction)
            if hierarchy.collection[b] != "Face" and length > MIN_BONE_LENGTH * unit:
                tail = heads[b] + direction / length * max(0.25 * length, 0.01 * unit)
            else:
                tail = heads[b] + face_direction * FACE_TAIL_LENGTH * unit
        length = np.linalg.norm(tail - heads[b])
        if (
            length < BLENDER_MIN_BONE_LENGTH
        ):  # a tiny Scale: keep the direction, lengthen to what Blender keeps
            direction = (tail - heads[b]) / length if length > 0 else face_direction
            tail = heads[b] + direction * BLENDER_MIN_BONE_LENGTH
        tails[b] = tail
    return tails
