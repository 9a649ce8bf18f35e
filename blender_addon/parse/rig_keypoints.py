"""Which keypoints drive which part of the rig, picked by name from the bundle's ``keypoint_names``.

The rig needs the body joints, the hand joints and the feet of the Sapiens2 308-point set (Goliath names);
face points are optional references for the head. A bundle that lacks a required name is refused with the
names it is missing, rather than rigged from the wrong points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import BundleError

SIDE_WORD = {"L": "left", "R": "right"}
FINGER_WORD = {
    "thumb": "thumb",
    "index": "forefinger",
    "middle": "middle_finger",
    "ring": "ring_finger",
    "pinky": "pinky_finger",
}
# Stable points of the head (bone, not skin over muscle): with the eyes and ears they fix its orientation.
HEAD_EXTRA = ("center_of_glabella", "center_of_nose_root", "tip_of_nose_bridge")


def finger_joint(finger: str, joint: int, side: str) -> str:
    """Keypoint name of a finger joint: 1 = the base knuckle (``*_third_joint``) .. 4 = the tip."""
    base = f"{SIDE_WORD[side]}_{FINGER_WORD[finger]}"
    return f"{base}_third_joint" if joint == 1 else f"{base}{joint}"


def body_names(side: str) -> dict[str, str]:
    w = SIDE_WORD[side]
    return {
        role: f"{w}_{role}"
        for role in (
            "shoulder",
            "elbow",
            "wrist",
            "hip",
            "knee",
            "ankle",
            "heel",
            "big_toe",
            "small_toe",
            "ear",
            "eye",
        )
    }


def required_names() -> list[str]:
    names = ["nose", "neck"]
    for side in ("L", "R"):
        names += list(body_names(side).values())
        names += [finger_joint(f, j, side) for f in FINGER_WORD for j in (1, 2, 3, 4)]
    return names


@dataclass
class KeypointIndex:
    """Indices of the rig's keypoints in a bundle's keypoint list, and the derived reference points."""

    index: dict[str, int]
    face: list[str]  # every keypoint that moves with the head (for face bones and the head fit)

    @classmethod
    def from_names(cls, names: list[str]) -> KeypointIndex:
        index = {n: i for i, n in enumerate(names)}
        missing = [n for n in required_names() if n not in index]
        if missing:
            raise BundleError(
                f"The humanoid rig needs the Sapiens2 body, hand and foot keypoints; this bundle lacks "
                f"{len(missing)} of them ({', '.join(missing[:6])}{', …' if len(missing) > 6 else ''})."
            )
        used = set(required_names())
        face = ["nose", "left_eye", "right_eye", "left_ear", "right_ear"]
        face += [n for n in names if n not in used and _is_face(n)]
        return cls(index=index, face=face)

    def __call__(self, tracks: np.ndarray, name: str) -> np.ndarray:
        return tracks[..., self.index[name], :]

    def pelvis(self, tracks: np.ndarray) -> np.ndarray:
        return 0.5 * (self(tracks, "left_hip") + self(tracks, "right_hip"))

    def head_centre(self, tracks: np.ndarray) -> np.ndarray:
        """Mid-ears: where the rig's head bone starts (the neck bone runs from ``neck`` to here)."""
        return 0.5 * (self(tracks, "left_ear") + self(tracks, "right_ear"))

    def head_fit_names(self) -> list[str]:
        """Face points used to fit the head's orientation: eyes, ears, nose and the bony mid-face points."""
        base = ["nose", "left_eye", "right_eye", "left_ear", "right_ear"]
        return base + [n for n in HEAD_EXTRA if n in self.index]


def _is_face(name: str) -> bool:
    body = (
        "shoulder",
        "elbow",
        "wrist",
        "hip",
        "knee",
        "ankle",
        "toe",
        "heel",
        "olecranon",
        "fossa",
        "acromion",
    )
    return not any(part in name for part in (*body, "finger", "thumb")) and name != "neck"
