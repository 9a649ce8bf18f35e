"""Goliath-308 keypoints → COCO-17, OpenPose-18 / BODY_25 (+ feet, hands, face-70), COCO-WholeBody-133 and
ComfyUI `POSE_KEYPOINT` frames (ComfyUI-core and comfyui_controlnet_aux flavours). numpy only.

Every converter takes (..., 308, 3) arrays of (x, y, score) in image pixels and returns (..., N, 3).
Index tables and the rules for synthesised points are listed in docs/keypoints.md. Synthesised points
(shoulder-midpoint neck, mid-hip, the jaw line Goliath lacks) take positions built from their sources and the
smallest of their sources' scores. No converter writes a (0, 0) placeholder: consumers that ignore the scores
(ComfyUI's SDPoseFaceBBoxes, controlnet_aux's face colouring) would take it for a point in the image corner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np

from .errors import FormatError

NeckMode = Literal["anatomical", "shoulder_midpoint"]
Flavor = Literal["openpose", "comfyui", "controlnet_aux"]
FLAVORS = ("openpose", "comfyui", "controlnet_aux")

NUM_KEYPOINTS = 308
NECK = 69  # Goliath's anatomical neck
L_SHOULDER, R_SHOULDER, L_HIP, R_HIP = 5, 6, 9, 10
L_WRIST, R_WRIST = 62, 41

# Source indices into the 308 layout; negative entries are synthesised (see _SYNTH).
_MIDHIP, _SHOULDER_MID, _ZERO = -2, -3, -1

COCO17 = (0, 1, 2, 3, 4, 5, 6, 7, 8, L_WRIST, R_WRIST, 9, 10, 11, 12, 13, 14)
COCO17_NAMES = (
    "nose",
    "left_eye",
    "right_eye",
    "left_ear",
    "right_ear",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hip",
    "right_hip",
    "left_knee",
    "right_knee",
    "left_ankle",
    "right_ankle",
)
# OpenPose COCO-18 order: nose, neck, RSho, RElb, RWr, LSho, LElb, LWr, RHip, RKnee, RAnk, LHip, LKnee, LAnk,
# REye, LEye, REar, LEar.  Index 1 (neck) is chosen by the neck mode.
OPENPOSE18 = (0, NECK, 6, 8, R_WRIST, 5, 7, L_WRIST, 10, 12, 14, 9, 11, 13, 2, 1, 4, 3)
# BODY_25: COCO-18 with MidHip at 8, then hips/knees/ankles, eyes/ears, then the six foot points.
BODY25 = (
    0,
    NECK,
    6,
    8,
    R_WRIST,
    5,
    7,
    L_WRIST,
    _MIDHIP,
    10,
    12,
    14,
    9,
    11,
    13,
    2,
    1,
    4,
    3,
    15,
    16,
    17,
    18,
    19,
    20,
)
FEET6 = (15, 16, 17, 18, 19, 20)  # L big toe, L small toe, L heel, R big toe, R small toe, R heel


def _hand(wrist: int, first: int) -> tuple[int, ...]:
    """OpenPose hand order: wrist, then thumb…pinky, each from the base joint to the tip.

    Goliath stores each finger tip-first (`*4`, `*3`, `*2`, `*_third_joint`) starting at `first`.
    """
    out = [wrist]
    for finger in range(5):
        base = first + 4 * finger
        out.extend((base + 3, base + 2, base + 1, base))
    return tuple(out)


HAND_RIGHT21 = _hand(R_WRIST, 21)
HAND_LEFT21 = _hand(L_WRIST, 42)

# Face: fixed anchors plus contour groups ordered at run time along the face's own axes (right eye → left eye,
# and its perpendicular), so the order holds for tilted heads.
CHIN = 77
NOSE_ROOT, NOSE_TIP = 71, 178
NOSE_BRIDGE = (73, 74, 75, 72)
NOSE_BASE = (180, 183, 179, 186, 181)
R_BROW = (78, 81, 83, 84, 80)
L_BROW = (87, 90, 92, 93, 89)
R_EYE_OUTER, R_EYE_INNER, L_EYE_INNER, L_EYE_OUTER = 121, 120, 96, 97
R_EYE_UPPER = (122, 123, 124, 125, 126, 127, 128)
R_EYE_LOWER = (163, 164, 165, 166, 167, 168, 169)
L_EYE_UPPER = (98, 99, 100, 101, 102, 103, 104)
L_EYE_LOWER = (146, 147, 148, 149, 150, 151, 152)
MOUTH_R, MOUTH_L, CUPID, LOWER_LIP_CENTER = 188, 189, 190, 191
UPPER_OUTER = (192, 193, 196, 197, 198, 199)
LOWER_OUTER = (194, 195, 200, 201, 202, 203)
INNER_R, INNER_L, UPPER_INNER_CENTER, LOWER_INNER_CENTER = 204, 205, 206, 207
UPPER_INNER = (208, 209, 212, 213, 214, 215)
LOWER_INNER = (210, 211, 216, 217, 218, 219)
R_PUPIL, L_PUPIL = 299, 290
# Jaw line anchors: dlib's first and last jaw points sit where the face meets the ear, at the top of the tragus.
R_TRAGUS_TOP, L_TRAGUS_TOP = 264, 238
JAW = tuple(range(17))


def _as_array(keypoints: Any) -> np.ndarray:
    arr = np.asarray(keypoints, dtype=np.float32)
    if arr.shape[-2:] != (NUM_KEYPOINTS, 3):
        raise FormatError(f"expected (..., 308, 3) keypoints (x, y, score), got shape {arr.shape}")
    return arr


def _midpoint(kp: np.ndarray, a: int, b: int) -> np.ndarray:
    out = (kp[..., a, :] + kp[..., b, :]) * 0.5
    out[..., 2] = np.minimum(kp[..., a, 2], kp[..., b, 2])
    return out


def _gather(kp: np.ndarray, table: Sequence[int], neck: NeckMode = "anatomical") -> np.ndarray:
    out = np.zeros((*kp.shape[:-2], len(table), 3), dtype=np.float32)
    for j, src in enumerate(table):
        if src == NECK and neck == "shoulder_midpoint":
            out[..., j, :] = _midpoint(kp, L_SHOULDER, R_SHOULDER)
        elif src == _MIDHIP:
            out[..., j, :] = _midpoint(kp, L_HIP, R_HIP)
        elif src >= 0:
            out[..., j, :] = kp[..., src, :]
    return out


def _check_neck(neck: str) -> NeckMode:
    if neck not in ("anatomical", "shoulder_midpoint"):
        raise FormatError(
            f"neck must be 'anatomical' (Goliath keypoint 69) or 'shoulder_midpoint', got {neck!r}"
        )
    return neck  # type: ignore[return-value]


def to_coco17(keypoints: Any) -> np.ndarray:
    return _gather(_as_array(keypoints), COCO17)


def to_openpose18(keypoints: Any, neck: NeckMode = "anatomical") -> np.ndarray:
    return _gather(_as_array(keypoints), OPENPOSE18, _check_neck(neck))


def to_body25(keypoints: Any, neck: NeckMode = "anatomical") -> np.ndarray:
    return _gather(_as_array(keypoints), BODY25, _check_neck(neck))


def to_feet6(keypoints: Any) -> np.ndarray:
    return _gather(_as_array(keypoints), FEET6)


def to_hand21(keypoints: Any, side: Literal["left", "right"]) -> np.ndarray:
    """The subject's left or right hand in OpenPose order."""
    if side not in ("left", "right"):
        raise FormatError(f"side must be 'left' or 'right', got {side!r}")
    return _gather(_as_array(keypoints), HAND_LEFT21 if side == "left" else HAND_RIGHT21)


def _face_axes(kp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors across (subject's right eye → left eye) and down the face, per person."""
    across = kp[..., 1, :2] - kp[..., 2, :2]
    length = np.linalg.norm(across, axis=-1, keepdims=True)
    default = np.broadcast_to(np.array([1.0, 0.0], dtype=np.float32), across.shape)
    across = np.where(length > 1e-6, across / np.maximum(length, 1e-6), default)
    down = np.stack([-across[..., 1], across[..., 0]], axis=-1)
    return across, down


def _ordered(kp: np.ndarray, group: Sequence[int], axis: np.ndarray) -> np.ndarray:
    """Indices of `group` sorted by projection on `axis`, per person: (..., len(group))."""
    idx = np.asarray(group)
    proj = np.einsum("...kd,...d->...k", kp[..., idx, :2], axis)
    return idx[np.argsort(proj, axis=-1, kind="stable")]


def face68_indices(keypoints: Any) -> np.ndarray:
    """(..., 68) Goliath indices for the dlib/OpenPose 68 face points (−1 = no Goliath point: the jaw line except
    its chin, which `to_face68` synthesises)."""
    kp = _as_array(keypoints)
    across, down = _face_axes(kp)
    lead = kp.shape[:-2]
    out = np.full((*lead, 68), -1, dtype=np.int64)

    def put(pos: int, value: Any) -> None:
        out[..., pos] = value

    put(8, CHIN)
    r_brow, l_brow = _ordered(kp, R_BROW, across), _ordered(kp, L_BROW, across)
    for j in range(5):
        put(17 + j, r_brow[..., j])  # outer → inner
        put(22 + j, l_brow[..., j])  # inner → outer
    bridge = _ordered(kp, NOSE_BRIDGE, down)
    put(27, NOSE_ROOT)
    put(28, bridge[..., 1])
    put(29, bridge[..., 3])
    put(30, NOSE_TIP)
    for j, src in enumerate(NOSE_BASE):
        put(31 + j, src)
    ru, rl = _ordered(kp, R_EYE_UPPER, across), _ordered(kp, R_EYE_LOWER, across)
    put(36, R_EYE_OUTER)
    put(37, ru[..., 2])
    put(38, ru[..., 4])
    put(39, R_EYE_INNER)
    put(40, rl[..., 4])
    put(41, rl[..., 2])
    lu, ll = _ordered(kp, L_EYE_UPPER, across), _ordered(kp, L_EYE_LOWER, across)
    put(42, L_EYE_INNER)
    put(43, lu[..., 2])
    put(44, lu[..., 4])
    put(45, L_EYE_OUTER)
    put(46, ll[..., 4])
    put(47, ll[..., 2])
    uo, lo = _ordered(kp, UPPER_OUTER, across), _ordered(kp, LOWER_OUTER, across)
    put(48, MOUTH_R)
    put(49, uo[..., 0])
    put(50, uo[..., 2])
    put(51, CUPID)
    put(52, uo[..., 3])
    put(53, uo[..., 5])
    put(54, MOUTH_L)
    put(55, lo[..., 5])
    put(56, lo[..., 3])
    put(57, LOWER_LIP_CENTER)
    put(58, lo[..., 2])
    put(59, lo[..., 0])
    ui, li = _ordered(kp, UPPER_INNER, across), _ordered(kp, LOWER_INNER, across)
    put(60, INNER_R)
    put(61, ui[..., 1])
    put(62, UPPER_INNER_CENTER)
    put(63, ui[..., 4])
    put(64, INNER_L)
    put(65, li[..., 4])
    put(66, LOWER_INNER_CENTER)
    put(67, li[..., 1])
    return out


def _take(kp: np.ndarray, index: np.ndarray) -> np.ndarray:
    safe = np.maximum(index, 0)
    picked = np.take_along_axis(kp, safe[..., None].repeat(3, axis=-1), axis=-2)
    return np.where((index >= 0)[..., None], picked, 0.0).astype(np.float32)


def jaw_line(keypoints: Any) -> np.ndarray:
    """(..., 17, 3) dlib jaw points 0-16 (subject's right ear → chin → left ear), synthesised.

    Goliath has no jaw contour, only the chin tip (77) and the ears. The jaw is drawn as two quarter ellipses in
    the face's own frame: O is the chin's foot on the line between the two tragus tops (R, L); the right half
    runs O + (R − O)·cos t + (C − O)·sin t for t = 0 … π/2 in 8 equal steps (R to the chin C), the left half the
    same with L. Point 8 is the chin itself. Every synthesised point gets the smallest score of R, L and C, so a
    jaw whose ear is hidden (a profile view) is marked missing rather than drawn with confidence.
    """
    kp = _as_array(keypoints)
    right, left, chin = kp[..., R_TRAGUS_TOP, :], kp[..., L_TRAGUS_TOP, :], kp[..., CHIN, :]
    across = left[..., :2] - right[..., :2]
    length = np.linalg.norm(across, axis=-1, keepdims=True)
    eyes, _ = _face_axes(kp)
    unit = np.where(length > 1e-6, across / np.maximum(length, 1e-6), eyes)
    foot = right[..., :2] + np.sum((chin[..., :2] - right[..., :2]) * unit, axis=-1, keepdims=True) * unit
    down = chin[..., :2] - foot
    score = np.minimum(np.minimum(right[..., 2], left[..., 2]), chin[..., 2])
    out = np.zeros((*kp.shape[:-2], 17, 3), dtype=np.float32)
    for k in JAW:
        side = right if k < 8 else left
        t = (k if k < 8 else 16 - k) * (np.pi / 16.0)
        out[..., k, :2] = foot + (side[..., :2] - foot) * np.cos(t) + down * np.sin(t)
        out[..., k, 2] = score
    out[..., 8, :] = chin
    return out


def to_face68(keypoints: Any) -> np.ndarray:
    """dlib-68 face: Goliath points where they exist (`face68_indices`), the jaw line from `jaw_line`."""
    kp = _as_array(keypoints)
    out = _take(kp, face68_indices(kp))
    out[..., :17, :] = jaw_line(kp)
    return out


def to_face70(keypoints: Any) -> np.ndarray:
    """OpenPose face: the 68 points, then the right and the left pupil centre."""
    kp = _as_array(keypoints)
    return np.concatenate([to_face68(kp), kp[..., [R_PUPIL, L_PUPIL], :]], axis=-2)


def to_wholebody133(keypoints: Any) -> np.ndarray:
    """COCO-WholeBody: body 17, feet 6, face 68, left hand 21, right hand 21."""
    kp = _as_array(keypoints)
    parts = (to_coco17(kp), to_feet6(kp), to_face68(kp), to_hand21(kp, "left"), to_hand21(kp, "right"))
    return np.concatenate(parts, axis=-2)


# ---------------------------------------------------------------- ComfyUI POSE_KEYPOINT


def _flat(points: np.ndarray) -> list[float]:
    return [float(v) for v in points.reshape(-1)]


def _binarize(points: np.ndarray, threshold: float) -> list[float]:
    """OpenPose-convention confidences: [x, y, 1] for a point scored ≥ `threshold`, [x, y, 0] otherwise.

    A point below the threshold keeps its predicted position instead of OpenPose's (0, 0, 0): readers that honour
    the confidence skip it either way (controlnet_aux drops c < 1, ComfyUI's SDPose nodes c < their threshold),
    and readers that ignore it (face boxes, face colouring) get a point on the face, not one in the corner."""
    out = points.copy()
    out[:, 2] = (points[:, 2] >= threshold).astype(np.float32)
    return _flat(out)


def person_to_openpose(
    keypoints: Any,
    *,
    flavor: Flavor = "openpose",
    neck: NeckMode | Literal["auto"] = "auto",
    score_threshold: float = 0.3,
    canvas_size: tuple[int, int] | None = None,
    normalized: bool = False,
    include_face: bool = True,
    include_hands: bool = True,
    include_feet: bool = True,
) -> dict[str, Any]:
    """One person's 308 keypoints → an OpenPose-JSON person dict.

    flavor "openpose" (default): OpenPose-convention confidences (1 for a score ≥ `score_threshold`, else 0),
    `foot_keypoints_2d` included: what both comfyui_controlnet_aux (which drops every point with c < 1) and
    ComfyUI's SDPose nodes (which threshold the score) draw in full. "comfyui": the real scores (what SDPose's
    extractor writes; controlnet_aux's renderer draws none of the points scored below 1). "controlnet_aux": as
    "openpose" without `foot_keypoints_2d`, the parts DWPose writes.
    Every part is a full list (never None) unless excluded with `include_*`: SDPoseDrawKeypoints and
    controlnet_aux's face colouring index the lists without checking for None.
    neck "auto": the shoulder midpoint for the binarised flavours (what ControlNet-OpenPose was trained on and
    what SDPose writes), the anatomical neck (69) for "comfyui". `normalized` divides x, y by the canvas size
    (some editors expect [0, 1]).
    """
    if flavor not in FLAVORS:
        raise FormatError(f"flavor must be one of {', '.join(map(repr, FLAVORS))}, got {flavor!r}")
    kp = _as_array(keypoints).copy()
    if kp.ndim != 2:
        raise FormatError(f"person_to_openpose takes one person (308, 3), got {kp.shape}")
    if neck == "auto":
        neck = "anatomical" if flavor == "comfyui" else "shoulder_midpoint"
    if normalized:
        if canvas_size is None:
            raise FormatError("normalized=True needs canvas_size=(width, height)")
        kp[:, 0] /= float(canvas_size[0])
        kp[:, 1] /= float(canvas_size[1])
    parts: dict[str, np.ndarray | None] = {"pose_keypoints_2d": to_openpose18(kp, neck)}
    if include_feet and flavor != "controlnet_aux":
        parts["foot_keypoints_2d"] = to_feet6(kp)
    parts["face_keypoints_2d"] = to_face70(kp) if include_face else None
    parts["hand_left_keypoints_2d"] = to_hand21(kp, "left") if include_hands else None
    parts["hand_right_keypoints_2d"] = to_hand21(kp, "right") if include_hands else None
    person: dict[str, Any] = {}
    for key, pts in parts.items():
        if pts is None:
            person[key] = None
        elif flavor == "comfyui":
            person[key] = _flat(pts)
        else:
            person[key] = _binarize(pts, score_threshold)
    return person


def to_pose_keypoint(
    results: Iterable[Any],
    **options: Any,
) -> list[dict[str, Any]]:
    """PoseResults (anything with `.people[*].keypoints` and `.image_size` (W, H)) → ComfyUI POSE_KEYPOINT:
    a list with one frame dict per image (`people`, `canvas_width`, `canvas_height`). A tracked person (a
    sequence's `track_id`) keeps it as OpenPose's `person_id` ([id], as OpenPose's JSON writes it)."""
    frames = []
    for result in results:
        width, height = (int(v) for v in result.image_size)
        people = []
        for p in result.people:
            person = person_to_openpose(p.keypoints, canvas_size=(width, height), **options)
            if getattr(p, "track_id", None) is not None:
                person["person_id"] = [int(p.track_id)]
            people.append(person)
        frames.append({"people": people, "canvas_width": width, "canvas_height": height})
    return frames
