"""Body measurements from keypoint tracks: robust statistics over the whole sequence, per person.

Every length is the median over the frames where both of its keypoints were confident, so dropped joints,
outliers and a few bad frames do not change the skeleton; left and right are averaged (a person is
symmetric far more exactly than a keypoint model is). A measurement that no frame supports falls back to a
standard body scaled by the person's torso.
"""

from __future__ import annotations

import numpy as np

from .rig_frames import hand_frame, head_frame, sole_frame
from .rig_keypoints import FINGER_WORD, KeypointIndex, body_names, finger_joint
from .rig_skeleton import PELVIS_SHARE, SIDES, SPINE_SPLIT, Measurements

# A 1.75 m adult (metres), used only where a sequence never shows a part.
STANDARD = {
    "torso": 0.52,
    "hip_width": 0.18,
    "clavicle": 0.17,
    "upper_arm": 0.29,
    "forearm": 0.26,
    "thigh": 0.44,
    "shin": 0.42,
    "neck": 0.12,
    "finger": 0.028,
}
STANDARD_HAND = np.array(
    [
        [0, 0, 0],
        [0.0, 0.025, 0.025],
        [0.0, 0.09, 0.022],
        [0.0, 0.095, 0.0],
        [0.0, 0.09, -0.02],
        [0.0, 0.08, -0.038],
    ]
)
STANDARD_FOOT = np.array(
    [[0.0, -0.06, 0.07], [-0.03, 0.18, 0.08], [0.03, 0.16, 0.08]]
)  # heel, big, small toe
MIRROR_X = np.array([-1.0, 1.0, 1.0])


def _median(values: np.ndarray, ok: np.ndarray) -> float | None:
    picked = values[ok]
    return float(np.median(picked)) if picked.size else None


def _distance(kp: KeypointIndex, tracks, valid, a: str, b: str) -> float | None:
    ia, ib = kp.index[a], kp.index[b]
    d = np.linalg.norm(tracks[:, ia] - tracks[:, ib], axis=-1)
    return _median(d, valid[:, ia] & valid[:, ib])


def _symmetric(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return float(np.mean(found)) if found else None


def _layout(frames: np.ndarray, origin: np.ndarray, points: np.ndarray, ok: np.ndarray) -> np.ndarray | None:
    """Median position (N, 3) of ``points`` (T, N, 3) in ``frames`` (T, 3, 3) around ``origin`` (T, 3)."""
    if not ok.any():
        return None
    local = np.einsum("tji,tnj->tni", frames[ok], points[ok] - origin[ok, None, :])
    return np.median(local, axis=0)


def _hand_layout(kp: KeypointIndex, tracks, valid, side: str) -> np.ndarray | None:
    names = [body_names(side)["wrist"]] + [finger_joint(f, 1, side) for f in FINGER_WORD]
    idx = [kp.index[n] for n in names]
    pts = tracks[:, idx]
    frames = hand_frame(pts[:, 0], pts[:, 2], pts[:, 3], pts[:, 5])
    layout = _layout(frames, pts[:, 0], pts, valid[:, idx].all(axis=1))
    return None if layout is None else (layout * MIRROR_X if side == "R" else layout)


def _foot_layout(kp: KeypointIndex, tracks, valid, side: str) -> np.ndarray | None:
    n = body_names(side)
    idx = [kp.index[n[r]] for r in ("ankle", "heel", "big_toe", "small_toe")]
    pts = tracks[:, idx]
    frames = sole_frame(pts[:, 1], pts[:, 2], pts[:, 3], side)
    layout = _layout(frames, pts[:, 0], pts[:, 1:], valid[:, idx].all(axis=1))
    return None if layout is None else (layout * MIRROR_X if side == "R" else layout)


def head_layout(kp: KeypointIndex, tracks, valid) -> dict[str, np.ndarray]:
    """Median head-frame position (origin mid-ears) of every face point seen with both ears and the face."""
    frame, centre, ok = head_reference(kp, tracks, valid)
    out = {}
    for name in kp.face:
        i = kp.index[name]
        layout = _layout(frame, centre, tracks[:, i : i + 1], ok & valid[:, i])
        if layout is not None:
            out[name] = layout[0]
    return out


def head_reference(kp: KeypointIndex, tracks, valid):
    """Head frame, its origin (mid-ears) and the frames where it is defined, from ears, eyes and nose."""
    names = ("left_ear", "right_ear", "left_eye", "right_eye", "nose")
    idx = [kp.index[n] for n in names]
    face_centre = tracks[:, idx[2:]].mean(axis=1)
    frame = head_frame(tracks[:, idx[0]], tracks[:, idx[1]], face_centre)
    return frame, kp.head_centre(tracks), valid[:, idx].all(axis=1)


def measure(tracks: np.ndarray, valid: np.ndarray, kp: KeypointIndex) -> Measurements:
    """Measurements of one person from (T, K, 3) tracks (Blender frame) and (T, K) confident samples."""
    lengths: dict[str, float] = {}
    pelvis = kp.pelvis(tracks)
    neck = kp(tracks, "neck")
    hips_ok = valid[:, kp.index["left_hip"]] & valid[:, kp.index["right_hip"]]
    torso = _median(np.linalg.norm(neck - pelvis, axis=-1), hips_ok & valid[:, kp.index["neck"]])
    torso = torso or STANDARD["torso"]
    scale = torso / STANDARD["torso"]
    lengths["hips"] = PELVIS_SHARE * torso
    for bone, share in zip(("spine", "spine1", "spine2"), SPINE_SPLIT):
        lengths[bone] = (1.0 - PELVIS_SHARE) * torso * share
    ears_ok = valid[:, kp.index["left_ear"]] & valid[:, kp.index["right_ear"]]
    neck_len = _median(
        np.linalg.norm(kp.head_centre(tracks) - neck, axis=-1), ears_ok & valid[:, kp.index["neck"]]
    )
    lengths["neck"] = neck_len or STANDARD["neck"] * scale
    ear_gap = _distance(kp, tracks, valid, "left_ear", "right_ear")
    lengths["head"] = 0.9 * (ear_gap or 0.15 * scale)

    def both(a: str, b: str, standard: float) -> float:
        found = _symmetric(
            [_distance(kp, tracks, valid, body_names(s).get(a, a), body_names(s).get(b, b)) for s in SIDES]
        )
        return found or standard * scale

    lengths["clavicle"] = both("neck", "shoulder", STANDARD["clavicle"])
    lengths["upper_arm"] = both("shoulder", "elbow", STANDARD["upper_arm"])
    lengths["forearm"] = both("elbow", "wrist", STANDARD["forearm"])
    lengths["thigh"] = both("hip", "knee", STANDARD["thigh"])
    lengths["shin"] = both("knee", "ankle", STANDARD["shin"])
    for finger in FINGER_WORD:
        for segment in (1, 2, 3):
            found = _symmetric(
                [
                    _distance(
                        kp,
                        tracks,
                        valid,
                        finger_joint(finger, segment, s),
                        finger_joint(finger, segment + 1, s),
                    )
                    for s in SIDES
                ]
            )
            lengths[f"{finger}{segment}"] = found or STANDARD["finger"] * scale
    hip_width = _distance(kp, tracks, valid, "left_hip", "right_hip") or STANDARD["hip_width"] * scale
    hand = _mean_layout([_hand_layout(kp, tracks, valid, s) for s in SIDES], STANDARD_HAND * scale)
    foot = _mean_layout([_foot_layout(kp, tracks, valid, s) for s in SIDES], STANDARD_FOOT * scale)
    measured = Measurements(
        lengths=lengths,
        hip_width=hip_width,
        hand_layout=hand,
        foot_layout=foot,
        head_layout=head_layout(kp, tracks, valid),
    )
    return canonical(measured)


def _spread(layout: np.ndarray) -> float:
    """How far a layout extends in its second direction (a frame needs two)."""
    return float(np.linalg.svd(layout - layout.mean(axis=0), compute_uv=False)[1])


def _mean_layout(layouts: list[np.ndarray | None], standard: np.ndarray) -> np.ndarray:
    """Mean of the measured layouts that span a plane; the standard one (scaled) where none does -- points that
    coincide or lie on a line (a broken or degenerate capture) define no frame for the hand or foot."""
    found = [x for x in layouts if x is not None and _spread(x) >= 0.1 * _spread(standard)]
    return np.mean(found, axis=0) if found else standard.copy()


def _in_own_frame(points: np.ndarray, frame: np.ndarray, origin: np.ndarray) -> np.ndarray:
    return (points - origin) @ frame


def canonical(m: Measurements) -> Measurements:
    """Layouts re-expressed in the frames their own points define (per-coordinate medians need not agree
    exactly with the frame rule), so the rest pose and the solver read the same frame from the same points."""
    hand = m.hand_layout
    hand = _in_own_frame(hand, hand_frame(hand[0], hand[2], hand[3], hand[5]), hand[0])
    ankle = np.zeros(3)
    foot = m.foot_layout
    foot = _in_own_frame(foot, sole_frame(foot[0], foot[1], foot[2], "L"), ankle)
    head = dict(m.head_layout)
    if all(n in head for n in ("left_ear", "right_ear", "left_eye", "right_eye", "nose")):
        centre = np.mean([head["left_eye"], head["right_eye"], head["nose"]], axis=0)
        origin = 0.5 * (head["left_ear"] + head["right_ear"])
        frame = head_frame(head["left_ear"], head["right_ear"], centre)
        head = {k: _in_own_frame(v, frame, origin) for k, v in head.items()}
    return Measurements(
        lengths=dict(m.lengths), hip_width=m.hip_width, hand_layout=hand, foot_layout=foot, head_layout=head
    )
