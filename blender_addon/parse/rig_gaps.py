"""Dropped keypoints refilled from the body's rigid shape (numpy only).

Linear interpolation in time (``poses.fill_gaps``) is the fallback for a low-confidence sample, but a joint
dropped for one frame of a 4 Hz swing or a take-off lies centimetres off the line between its neighbours in time.
What a frame still shows pins it much better: the rest of a hand, a foot or a face is a rigid layout (measured
over the take), so the points that are seen fix where the missing one is; an elbow or knee is at fixed distances
from its shoulder/hip and wrist/ankle, which leaves only its angle about that line (taken from the time-filled
guess); a shoulder sits one clavicle from the neck, a hip one hip width from the other, a finger joint one
segment from the joint before. Only dropped samples change -- confident ones are never moved.
"""

from __future__ import annotations

import numpy as np

from .rig_filters import fill_weak
from .rig_frames import hips_frame
from .rig_keypoints import FINGER_WORD, KeypointIndex, body_names, finger_joint
from .rig_math import kabsch, normalize, reject
from .rig_skeleton import SIDES, Measurements

MIN_POINTS = 3  # a rigid fit needs three seen points of the layout
MIN_SPREAD = 0.2  # ... spread in two directions: second / first singular value of the seen layout
BENT = np.sin(np.radians(3.0))  # a limb bent less than this does not show its hinge axis


def line_variance(tracks: np.ndarray, valid: np.ndarray, noise: float) -> np.ndarray:
    """(T, K) expected squared error of the time-filled samples: the noise of the two seen samples it draws a line
    between, plus the line's bias, ``|a| (t - p)(n - t) / 2`` for a gap from frame p to n, the acceleration ``a``
    read from the seen samples on either side of the gap (less what their noise alone would give)."""
    frames, points = valid.shape
    out = np.zeros((frames, points))
    t = np.arange(frames)
    for k in np.nonzero(~valid.all(axis=0) & valid.any(axis=0))[0]:
        ok = valid[:, k]
        prev = np.maximum.accumulate(np.where(ok, t, -1))
        nxt = np.minimum.accumulate(np.where(ok, t, frames)[::-1])[::-1]
        gap = ~ok & (prev >= 0) & (nxt < frames)
        if not gap.any():
            continue
        p, n = prev[gap], nxt[gap]
        x = tracks[:, k]
        slope_after = x[np.minimum(n + 1, frames - 1)] - x[n]
        slope_before = x[p] - x[np.maximum(p - 1, 0)]
        h = (n - p).astype(np.float64)
        accel = (slope_after - slope_before) / (h + 1.0)[:, None]
        span = (t[gap] - p) * (n - t[gap]) / 2.0
        bias = np.sum((accel * span[:, None]) ** 2, axis=-1) - 12.0 * noise**2 * (span / (h + 1.0)) ** 2
        seen = 3.0 * noise**2 * ((n - t[gap]) ** 2 + (t[gap] - p) ** 2) / h**2
        out[gap, k] = seen + np.maximum(bias, 0.0)
    return out


def _put(out: np.ndarray, known: np.ndarray, rows: np.ndarray, k: int, estimate: np.ndarray, noise: float,
         line: np.ndarray, gain: float | np.ndarray = 1.0, inherited: float | np.ndarray = 0.0) -> None:  # fmt: skip
    """Dropped samples ``rows`` of point ``k`` from a shape-based ``estimate`` weighed against the time-filled
    value already there, by inverse variances: the estimate's is about ``gain`` x the noise of a seen point plus
    what it ``inherited`` from refilled points it was built on, the time-filled one's ``line``
    (``line_variance``). Noise-free the shape wins outright; on slow motion, where a line through time is nearly
    exact, the line keeps most of its weight."""
    linear = out[rows, k]
    var_shape = 3.0 * np.asarray(gain) * noise**2 + np.asarray(inherited)
    var_line = line[rows, k]
    w = np.where(var_line + var_shape > 0, var_line / np.maximum(var_line + var_shape, 1e-30), 1.0)
    out[rows, k] = linear + w[:, None] * (estimate - linear)
    known[rows, k] = True
    line[rows, k] = w**2 * var_shape + (1.0 - w) ** 2 * var_line  # what is left of the sample's error


def noise_level(tracks: np.ndarray, valid: np.ndarray, kp: KeypointIndex) -> float:
    """Keypoint noise (per axis, scene units) read from how much the limb bones' lengths jitter over the take
    (robust: the median absolute deviation); a distance between two points carries twice their variance."""
    spreads = []
    for side in SIDES:
        n = body_names(side)
        for a, b in (("shoulder", "elbow"), ("elbow", "wrist"), ("hip", "knee"), ("knee", "ankle")):
            ia, ib = kp.index[n[a]], kp.index[n[b]]
            ok = valid[:, ia] & valid[:, ib]
            if ok.sum() >= 5:
                d = np.linalg.norm(tracks[ok, ia] - tracks[ok, ib], axis=-1)
                spreads.append(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))
    return float(np.median(spreads)) if spreads else 0.0


def _fit_group(out: np.ndarray, known: np.ndarray, idx: list[int], layout: np.ndarray, noise: float,
               line: np.ndarray) -> None:  # fmt: skip
    """Dropped points of the rigid ``layout`` (N, 3) at keypoints ``idx``, from a least-squares fit of the layout
    to the points of the frame that are known: at least ``MIN_POINTS`` of them, not close to one line (three
    knuckles in a row leave the hand's roll about them to the noise)."""
    seen = known[:, idx]
    todo = (~seen).any(axis=1) & (seen.sum(axis=1) >= MIN_POINTS)
    if not todo.any():
        return
    w = seen[todo].astype(np.float64)
    centre = (w @ layout) / w.sum(axis=1, keepdims=True)  # (n, 3) centroid of the seen part of the layout
    spread = np.linalg.svd((layout[None] - centre[:, None, :]) * w[..., None], compute_uv=False)
    well = spread[:, 1] >= MIN_SPREAD * np.maximum(spread[:, 0], 1e-12)
    if not well.any():
        return
    rows, w, layout_c = np.nonzero(todo)[0][well], w[well], centre[well]
    pts = out[rows][:, idx]
    rot = kabsch(layout, pts, w)  # weighted: only the seen points decide
    wsum = w.sum(axis=1, keepdims=True)
    obs_c = np.einsum("tn,tnc->tc", w, pts) / wsum
    fitted = obs_c[:, None, :] + np.einsum("tij,tnj->tni", rot, layout[None] - layout_c[:, None, :])
    for j, k in enumerate(idx):
        miss = w[:, j] == 0
        _put(out, known, rows[miss], k, fitted[miss, j], noise, line, gain=2.0)


def _guess(out: np.ndarray, known: np.ndarray, k: int, anchor: int, frames: np.ndarray) -> np.ndarray:
    """(T, 3) where point ``k`` would be from ``anchor`` if its offset, as the body part ``frames`` (T, 3, 3)
    sees it, moved linearly in time between the frames that show both: a dropped fingertip follows its hand and
    a dropped knee its pelvis through a fast swing or a turn, where a world-space line cuts the corner."""
    both = known[:, k] & known[:, anchor]
    offset = out[:, k] - out[:, anchor]
    if not both.any():
        return out[:, k]
    local = np.einsum("tji,tj->ti", frames, offset)
    local = fill_weak(local, both)
    return out[:, anchor] + np.einsum("tij,tj->ti", frames, local)


def _at_distance(out: np.ndarray, known: np.ndarray, k: int, anchor: int, length: float,
                 frames: np.ndarray, noise: float, line: np.ndarray) -> None:  # fmt: skip
    """A dropped point one ``length`` from a known ``anchor``, in the direction ``_guess`` gives. An anchor that
    was itself refilled (a knee placed from its hip, then the ankle from that knee) passes its error (what is left
    of it in ``line``) on, so a point further down a dropped chain gets less weight and less trust."""
    todo = ~known[:, k] & known[:, anchor]
    if not todo.any():
        return
    rows = np.nonzero(todo)[0]
    guess = _guess(out, known, k, anchor, frames)[todo]
    base = out[todo, anchor]
    estimate = base + length * normalize(guess - base)
    _put(out, known, rows, k, estimate, noise, line, gain=2.0, inherited=line[rows, anchor])


def _hinge(out: np.ndarray, known: np.ndarray, start: int, middle: int, end: int, upper: float,
           lower: float, frames: np.ndarray, noise: float, line: np.ndarray) -> None:  # fmt: skip
    """A dropped elbow/knee on the circle ``upper`` from the shoulder/hip and ``lower`` from the wrist/ankle, in
    the bend plane whose hinge axis, as the body part ``frames`` (T, 3, 3) sees it, moves linearly in time between
    the frames that show the limb bent (a hinge axis turns slowly in the body while the limb swings about it)."""
    todo = ~known[:, middle] & known[:, start] & known[:, end]
    if not todo.any():
        return
    s, e, m = out[:, start], out[:, end], out[:, middle]
    axis = np.cross(m - s, e - m)
    bent = np.linalg.norm(axis, axis=-1) > BENT * upper * lower
    shown = bent & known[:, start] & known[:, middle] & known[:, end]
    if not shown.any():
        _at_distance(out, known, middle, start, upper, frames, noise, line)
        return
    local = fill_weak(np.einsum("tji,tj->ti", frames, normalize(axis)), shown)
    axis = np.einsum("tij,tj->ti", frames, local)[todo]
    s, e = s[todo], e[todo]
    gap = e - s
    d = np.maximum(np.linalg.norm(gap, axis=-1), 1e-9)
    u = gap / d[:, None]
    along = np.clip((upper**2 - lower**2 + d**2) / (2.0 * d), -upper, upper)
    radius = np.sqrt(np.maximum(upper**2 - along**2, 0.0))
    towards = np.cross(u, normalize(reject(axis, u)))  # the side that bends the limb about +axis
    estimate = s + along[:, None] * u + radius[:, None] * towards
    # A nearly straight limb puts the joint far off its line for a small change of reach: the radius moves by
    # a (d - a) / (r d) per unit of d, which carries the noise of both ends.
    stretch = along * (d - along) / np.maximum(radius * d, 1e-12)
    rows = np.nonzero(todo)[0]
    # A refilled end (an ankle fitted from its foot) moves the joint by about half its own error, more when the
    # limb is nearly straight.
    inherited = 0.5 * (1.0 + stretch**2) * (line[rows, start] + line[rows, end])
    gain = 1.0 + (2.0 / 3.0) * stretch**2
    _put(out, known, rows, middle, estimate, noise, line, gain=gain, inherited=inherited)


def refill(tracks: np.ndarray, valid: np.ndarray, kp: KeypointIndex, m: Measurements) -> np.ndarray:
    """(T, K, 3) tracks whose low-confidence samples (``valid`` False; already filled linearly in time) are
    re-placed from the body's rigid shape where the frame shows enough of it; confident samples are unchanged."""
    return refill_with_trust(tracks, valid, kp, m)[0]


def refill_with_trust(
    tracks: np.ndarray, valid: np.ndarray, kp: KeypointIndex, m: Measurements
) -> tuple[np.ndarray, np.ndarray]:
    """``refill``'s tracks and (T, K) how far each sample can be trusted, in [0, 1]: a confident sample's expected
    error over the sample's (1 for confident samples; a refilled knee in a fast swing, 2-4 times the noise off,
    gets 0.1 or less). The solve's clean-up leans on the neighbours of a frame built on a low-trust sample."""
    out = np.array(tracks, dtype=np.float64, copy=True)
    known = np.array(valid, dtype=bool, copy=True)
    noise = noise_level(out, known, kp)
    line = line_variance(out, known, noise)
    i = kp.index
    L = m.lengths
    world = np.broadcast_to(np.eye(3), (out.shape[0], 3, 3))
    _at_distance(out, known, i["left_hip"], i["right_hip"], m.hip_width, world, noise, line)
    _at_distance(out, known, i["right_hip"], i["left_hip"], m.hip_width, world, noise, line)
    torso = hips_frame(out[:, i["left_hip"]], out[:, i["right_hip"]], out[:, i["neck"]])
    face = [n for n in kp.head_fit_names() if n in m.head_layout]  # bony points: expressions do not move them
    _fit_group(out, known, [i[n] for n in face], np.stack([m.head_layout[n] for n in face]), noise, line)
    for side in SIDES:
        n = body_names(side)
        _at_distance(out, known, i[n["shoulder"]], i["neck"], L["clavicle"], torso, noise, line)
        hand = [i[x] for x in [n["wrist"]] + [finger_joint(f, 1, side) for f in FINGER_WORD]]
        hand_layout = m.side_layout(m.hand_layout, side)
        _fit_group(out, known, hand, hand_layout, noise, line)
        foot = [i[n[r]] for r in ("ankle", "heel", "big_toe", "small_toe")]
        _fit_group(
            out, known, foot, np.vstack([np.zeros((1, 3)), m.side_layout(m.foot_layout, side)]), noise, line
        )
        for a, b, c, up, low in (
            ("shoulder", "elbow", "wrist", "upper_arm", "forearm"),
            ("hip", "knee", "ankle", "thigh", "shin"),
        ):
            _hinge(out, known, i[n[a]], i[n[b]], i[n[c]], L[up], L[low], torso, noise, line)
        # What is still unknown (an elbow with its wrist also dropped...): one bone from the joint before.
        for a, b, bone in (("shoulder", "elbow", "upper_arm"), ("elbow", "wrist", "forearm"),
                           ("hip", "knee", "thigh"), ("knee", "ankle", "shin")):  # fmt: skip
            _at_distance(out, known, i[n[b]], i[n[a]], L[bone], torso, noise, line)
        _fit_group(
            out, known, hand, hand_layout, noise, line
        )  # a wrist placed from its elbow completes a hand
        _fit_group(
            out, known, foot, np.vstack([np.zeros((1, 3)), m.side_layout(m.foot_layout, side)]), noise, line
        )
        palm = kabsch(hand_layout, out[:, hand])  # the hand's frame, its points now all placed
        for finger in FINGER_WORD:
            for j in (2, 3, 4):
                joint, before = i[finger_joint(finger, j, side)], i[finger_joint(finger, j - 1, side)]
                _at_distance(out, known, joint, before, L[f"{finger}{j - 1}"], palm, noise, line)
    trust = np.ones(valid.shape)
    if noise > 0:
        # A dropped sample with no seen one on one side (a clip's start or end) was held, not filled: no trust.
        held = line <= 0.0
        trust = np.where(
            valid, 1.0, np.where(held, 0.0, np.clip(3.0 * noise**2 / np.maximum(line, 1e-30), 0.0, 1.0))
        )
    return out, trust
