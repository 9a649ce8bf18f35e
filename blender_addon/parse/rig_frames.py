"""Orientation frames of body parts read straight from keypoints (numpy, batched over frames).

These define what the measurements mean: a hand layout is the knuckles' positions in ``hand_frame``, a foot
layout the heel and toes in ``sole_frame``, face points in ``head_frame``. In the rest pose each frame equals
the matching ``rig_skeleton`` constant (HAND_REST, SOLE_REST, HEAD_REST), which is what lets the solver turn an
observed frame straight into a bone rotation.
"""

from __future__ import annotations

import numpy as np

from .rig_math import frame_from_yx, frame_from_yz, normalize, reject


def hand_frame(wrist, index_base, middle_base, pinky_base) -> np.ndarray:
    """y from the wrist to the middle knuckle, z towards the index side of the palm; for both hands this gives
    the right hand the mirror of the left's frame."""
    return frame_from_yz(middle_base - wrist, index_base - pinky_base)


def sole_frame(heel, big_toe, small_toe, side: str) -> np.ndarray:
    """y from the heel towards the toes, x towards the body's left (+X in the rest pose) for both feet."""
    toes = 0.5 * (big_toe + small_toe)
    lateral = (small_toe - big_toe) if side == "L" else (big_toe - small_toe)
    return frame_from_yx(toes - heel, lateral)


def head_frame(left_ear, right_ear, face_centre) -> np.ndarray:
    """x from the right ear to the left, z towards the face (mid eyes and nose), y = z x x (up)."""
    x = normalize(left_ear - right_ear)
    centre = 0.5 * (left_ear + right_ear)
    z = normalize(reject(face_centre - centre, x))
    return np.stack([x, np.cross(z, x), z], axis=-1)


def hips_frame(left_hip, right_hip, neck) -> np.ndarray:
    """x along the hip line (right -> left) exactly, y towards the neck; z = x x y (forward)."""
    pelvis = 0.5 * (left_hip + right_hip)
    x = normalize(left_hip - right_hip)
    y = normalize(reject(neck - pelvis, x))
    return np.stack([x, y, np.cross(x, y)], axis=-1)
