"""A plausible standing person as 308 Goliath keypoints, for tests of what consumers make of our pose output.

Why: no real weights run in the test suite, and random keypoints say nothing about how a renderer, a face box or
a jaw line built from them looks. This person faces the camera (the subject's left is the image's right), with
every body, hand and face point where a person's would be, so OpenPose-style renderings, face boxes and the
synthesised jaw line can be compared with what other tools draw from the same points.
"""

from __future__ import annotations

import re

import numpy as np

from ..data import keypoints308

__all__ = ["standing_person"]

# Body points in a 512 x 768 frame: (x, y) of Goliath indices 0-20 and 63-69.
_BODY = {
    0: (256, 118), 1: (268, 106), 2: (244, 106), 3: (283, 112), 4: (229, 112),
    5: (306, 190), 6: (206, 190), 7: (330, 278), 8: (182, 278),
    9: (284, 400), 10: (228, 400), 11: (290, 530), 12: (222, 530), 13: (292, 652), 14: (220, 652),
    15: (300, 694), 16: (314, 688), 17: (290, 668), 18: (212, 694), 19: (198, 688), 20: (222, 668),
    63: (336, 274), 64: (176, 274), 65: (324, 282), 66: (188, 282), 67: (300, 186), 68: (212, 186),
    69: (256, 172),
}  # fmt: skip
_WRISTS = {"left": (62, (342, 360)), "right": (41, (170, 360))}
_HAND_FIRST = {"right": 21, "left": 42}  # per finger: tip (4), 3, 2, third joint (base)


def _hand(side: str) -> dict[int, tuple[float, float]]:
    """Five fingers hanging down and fanned out from the wrist; the thumb towards the body's midline."""
    wrist_index, (wx, wy) = _WRISTS[side]
    outward = 1.0 if side == "left" else -1.0  # image x direction away from the body
    out = {wrist_index: (wx, wy)}
    for finger in range(5):  # thumb, fore, middle, ring, pinky
        spread = (finger - 1.5) * 0.28 * outward  # radians from straight down
        base_len = 12.0 if finger else 8.0
        seg = (9.0, 8.0, 7.0) if finger else (7.0, 6.0, 5.0)
        angle = spread - (0.5 * outward if finger == 0 else 0.0)
        direction = np.array([np.sin(angle), np.cos(angle)])
        base = np.array([wx, wy]) + direction * base_len
        joints = [base]
        for length in seg:
            joints.append(joints[-1] + direction * length)
        first = _HAND_FIRST[side] + 4 * finger  # tip-first storage
        for k, point in enumerate(reversed(joints)):
            out[first + k] = (float(point[0]), float(point[1]))
    return out


def _arc_parameter(name: str) -> float:
    """0 (inner end) … 1 (outer end) along an eye contour, from the point's name."""
    if "inner_end" in name:
        return 0.0
    if "outer_end" in name:
        return 1.0
    if "centerpoint" in name:
        return 0.5
    k = int(re.search(r"midpoint_(\d)", name).group(1))
    return (k if k <= 3 else k + 1) / 8.0


def _face(names: list[str]) -> dict[int, tuple[float, float]]:
    """Face points (70-307) around a face centred at x = 256, eyes at y = 106, chin at y = 152."""
    out: dict[int, tuple[float, float]] = {}
    eyes = {"l": np.array([268.0, 106.0]), "r": np.array([244.0, 106.0])}
    outward = {"l": 1.0, "r": -1.0}
    for i in range(70, 308):
        name = names[i]
        side = name[0] if name[:2] in ("l_", "r_") else None
        if "eyebrow" in name:
            s = "l" if "l_eyebrow" in name else "r"
            t = 0.0 if "startpoint" in name else 1.0 if "end_of" in name else int(name.split("_")[2]) / 4.0
            x = 258.0 + 2 if s == "l" else 254.0 - 2
            y = 96.0 - 3.0 * np.sin(np.pi * t) - (0.0 if "upper" in name or "end_of" in name else -2.0)
            out[i] = (x + outward[s] * 18.0 * t, y)
        elif "_line" in name and side is not None:  # lash, eyelid and crease lines
            t = _arc_parameter(name)
            lift = {"lash": 2.5, "eyelid": 4.0, "crease": 6.0}[name.split("_")[-2]]
            sign = -1.0 if "upper" in name else 1.0
            offset = sign * (lift if "upper" in name else lift * 0.7) * np.sin(np.pi * t)
            x = eyes[side][0] + outward[side] * (t - 0.5) * 12.0
            out[i] = (x, eyes[side][1] + offset + (sign * 0.5 if "upper" not in name else 0.0))
        elif "iris" in name or "pupil" in name:
            radius = 3.0 if "iris" in name else 1.5
            clock = {"3": 0.0, "12": 90.0, "9": 180.0, "6": 270.0}
            m = re.search(r"border_of_\w+?_(\d+|midpoint_\d)$", name)
            if m is None:
                out[i] = tuple(eyes[side])
            else:
                key = m.group(1)
                deg = clock[key] if key in clock else 45.0 + 90.0 * (int(key[-1]) - 1)
                rad = np.deg2rad(deg)
                out[i] = (eyes[side][0] + radius * np.cos(rad), eyes[side][1] - radius * np.sin(rad))
        elif side is not None and ("crus" in name or "helix" in name or "tragus" in name or "ear" in name
                                   or "concha" in name or "antihelix" in name or "22_15" in name):  # fmt: skip
            centre = np.array([285.0 if side == "l" else 227.0, 114.0])
            if name.endswith("_of_tragus"):
                dy = {"top": -3.0, "protruding": 0.0, "bottom": 3.0}[name.split("_")[1]]
                out[i] = (centre[0] - outward[side] * 5.0, centre[1] + dy)
            else:
                angle = (i * 2.399) % (2 * np.pi)  # golden-angle scatter over the ear's outline
                out[i] = (centre[0] + outward[side] * 4.0 * np.cos(angle), centre[1] + 11.0 * np.sin(angle))
    fixed = {
        70: (256, 98), 71: (256, 104), 72: (256, 116), 73: (256, 107), 74: (256, 110), 75: (256, 113),
        76: (256, 145), 77: (256, 152), 178: (256, 119), 179: (256, 124), 180: (249, 122), 181: (263, 122),
        182: (253, 123), 183: (250, 123), 184: (251, 121), 185: (259, 123), 186: (262, 123), 187: (261, 121),
        188: (246, 134), 189: (266, 134), 190: (256, 131), 191: (256, 140), 204: (248, 134), 205: (264, 134),
        206: (256, 133), 207: (256, 136),
    }  # fmt: skip
    out.update({k: (float(x), float(y)) for k, (x, y) in fixed.items()})
    for group, y_mid, bulge in (("upper_outer", 131.5, -1.0), ("lower_outer", 139.0, 1.0),
                                ("upper_inner", 133.2, -0.3), ("lower_inner", 135.8, 0.3)):  # fmt: skip
        members = [i for i in range(192, 220) if names[i].endswith(f"{group}_lip")]
        half = 9.0 if "outer" in group else 7.0
        for rank, i in enumerate(members):  # any fixed spread across the mouth; readers order them themselves
            t = (rank + 0.5) / len(members)
            out[i] = (256.0 + (t - 0.5) * 2 * half, y_mid + bulge * 1.5 * np.sin(np.pi * t))
    return out


def standing_person(
    scale: float = 1.0,
    offset: tuple[float, float] = (0.0, 0.0),
    score: float | np.ndarray = 0.9,
) -> np.ndarray:
    """(308, 3) keypoints (x, y, score) of a person standing in a 512 x 768 frame, times `scale`, plus `offset`.

    `score` is one value for every point or a (308,) array (e.g. realistic heatmap maxima below 1)."""
    names = keypoints308()["keypoint_names"]
    table = dict(_BODY)
    table.update(_hand("left"))
    table.update(_hand("right"))
    table.update(_face(names))
    kp = np.zeros((308, 3), dtype=np.float32)
    for i, (x, y) in table.items():
        kp[i, :2] = (x * scale + offset[0], y * scale + offset[1])
    kp[:, 2] = score
    return kp
