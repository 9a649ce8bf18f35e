"""What an estimator that knows the truth could reach on the legs, hips, neck and head (issue 28's noisy bound).

    python benchmarks/bench_rig_oracle.py                      # walk, seeds 5 6 7, 3 mm noise
    python benchmarks/bench_rig_oracle.py --truth run --seeds 11 12

The oracle gets everything but the noise: the true layouts and bone lengths, the true parent of every bone (so a
bone's error is its own), no dropped joints, and ideal zero-phase low-passes (FFT, mirrored ends; a Gaussian
normalised convolution where frames are weighted). Per frame it reads each bone the way the solver does -- the
hips from the hip line and the neck, the neck from the neck point to mid-ears, the head and the feet from a rigid
fit of their points, a thigh's direction from hip to knee and its twist from the bend plane (weighted by sin^2 of
the bend: a straight knee shows no plane), a knee's angle from hip, knee and ankle -- in joint space. Figures per
reading, worst frame over the clip (3 frames at each end aside), degrees (cm for the joints):

- ``noise@2Hz`` / ``3Hz`` / ``5Hz``: the filtered noise alone (no bias at all), as the hand's limit was measured
  (tests/blender_addon/test_rig_solver.py); ``raw``: unfiltered;
- ``fixed``: truth + noise through the one cut-off (of ``CUTOFFS``) whose worst frame is best, bias included;
- ``best``: per frame the lowest cut-off whose bias on the TRUE signal stays within a tolerance (chosen from the
  truth alone, never from the noise), with the tolerance that gives the best worst frame -- the limit of any
  smoother, since a real one must guess from the noisy data where the motion needs a wide band.

``joints``: the knee, ankle and neck keypoints filtered the same way in position (what no rig chain can beat).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

CUTOFFS = (0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
INNER = slice(3, -3)


def _bench():
    """``bench_rig_noise.py`` (its truths, loaders and ``C``, the truths' common module), loaded once."""
    global _BENCH
    if _BENCH is None:
        spec = importlib.util.spec_from_file_location(
            "bench_rig_noise_o", Path(__file__).with_name("bench_rig_noise.py")
        )
        _BENCH = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_BENCH)
    return _BENCH


_BENCH = None


def lowpass(x: np.ndarray, cutoff: float, fps: float, weights: np.ndarray | None = None) -> np.ndarray:
    """Ideal zero-phase low-pass over axis 0 (mirrored ends); with ``weights`` (T,) a normalised convolution
    (frames that see the quantity badly count less)."""
    if weights is not None:  # a positive (Gaussian) kernel, -3 dB at the cut-off: the ideal one rings below 0
        sigma = fps * np.sqrt(np.log(2.0)) / (np.sqrt(2.0) * np.pi * cutoff)
        k = np.arange(-int(4 * sigma) - 1, int(4 * sigma) + 2)
        kernel = np.exp(-0.5 * (k / sigma) ** 2)
        w = weights.reshape(-1, *([1] * (x.ndim - 1)))
        pad = len(k) // 2
        mirrored = np.concatenate([(w * x)[pad:0:-1], w * x, (w * x)[-2 : -pad - 2 : -1]])
        wm = np.concatenate([weights[pad:0:-1], weights, weights[-2 : -pad - 2 : -1]])
        num = np.apply_along_axis(lambda v: np.convolve(v, kernel, mode="valid"), 0, mirrored)
        den = np.convolve(wm, kernel, mode="valid").reshape(w.shape)
        return num / np.maximum(den, 1e-9)
    return _bench().C.ideal_lowpass(x, cutoff, fps)


def project(flat: np.ndarray) -> np.ndarray:
    """(T, 9) -> nearest rotations (T, 3, 3)."""
    u, _, vt = np.linalg.svd(flat.reshape(-1, 3, 3))
    d = np.sign(np.linalg.det(u @ vt))
    u[..., :, 2] *= d[:, None]
    return u @ vt


def angle(rm, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.degrees(rm.rotation_angle(a, b))


def oracle_series(
    obs: np.ndarray, true: np.ndarray, fps: float, weights=None, wrap=False
) -> dict[str, float]:
    """Worst-frame errors of linear (T, C) readings ``obs`` of ``true`` (radians) under ideal filtering:
    ``noise@c`` the noise alone at cut-off c; ``best`` the oracle-adaptive filter (per frame the lowest cut-off
    whose bias on the TRUE signal stays within a tolerance -- chosen from the truth alone, never from the noise,
    then the tolerance that gives the best worst frame); ``fixed`` the best single cut-off (bias included)."""
    d = obs - true
    if wrap:
        d = np.angle(np.exp(1j * d))
    obs = true + d
    out = {}
    for c in (2.0, 3.0, 5.0):
        out[f"noise@{c:g}Hz"] = float(
            np.degrees(np.linalg.norm(lowpass(d, c, fps, weights), axis=-1))[INNER].max()
        )
    out["raw"] = float(np.degrees(np.linalg.norm(d, axis=-1))[INNER].max())
    filtered = [lowpass(obs, c, fps, weights) for c in CUTOFFS] + [obs]
    bias = [np.linalg.norm(lowpass(true, c, fps, weights) - true, axis=-1) for c in CUTOFFS] + [
        np.zeros(len(true))
    ]
    error = [np.linalg.norm(f - true, axis=-1) for f in filtered]
    fixed = min(e[INNER].max() for e in error[:-1])
    best = np.inf
    frames = np.arange(len(true))
    for tol in np.radians([0.1, 0.25, 0.5, 1.0, 1.5, 2.0]):
        pick = np.argmax(np.stack([b <= tol for b in bias]), axis=0)  # the lowest cut-off within tolerance
        best = min(best, np.stack(error)[pick, frames][INNER].max())
    out["fixed"] = float(np.degrees(fixed))
    out["best"] = float(np.degrees(min(best, fixed)))  # a single cut-off is one of the oracle's choices too
    return out


class Oracle:
    """Per-frame readings of one truth + noise draw, in the solver's way, with the true parents."""

    def __init__(self, parse: dict, truth: dict, fps: float, noisy: np.ndarray):
        self.P, self.t, self.fps = parse, truth, fps
        self.rm, self.rk, self.rs = parse["rig_math"], parse["rig_keypoints"], parse["rig_skeleton"]
        self.kp = self.rk.KeypointIndex.from_names(parse["names"])
        self.noisy, self.clean = noisy, truth["keypoints"]
        self.rest, self.world, self.m = truth["rest"], truth["world"], truth["m"]

    def p(self, name: str, clean: bool = False) -> np.ndarray:
        return self.kp(self.clean if clean else self.noisy, name)

    def local(self, bone: str, world: np.ndarray) -> np.ndarray:
        """A world frame of ``bone`` as its true parent sees it (identity in the rest pose)."""
        b = self.rest.index(bone)
        p = self.rest.parent[b]
        parent = (
            np.broadcast_to(np.eye(3), world.shape) if p < 0 else self.world[:, p] @ self.rest.frames[p].T
        )
        return np.swapaxes(parent, -1, -2) @ world @ self.rest.frames[b].T

    def rotation(self, bone: str, obs_world: np.ndarray) -> dict[str, float]:
        """Oracle figures of a whole rotation, as a rotation vector about a smooth reference the oracle knows."""
        true = self.local(bone, self.world[:, self.rest.index(bone)])
        ref = project(lowpass(true.reshape(-1, 9), 0.5, self.fps))
        x_true = _bench().C.rotation_vector(np.swapaxes(ref, -1, -2) @ true)
        x_obs = _bench().C.rotation_vector(np.swapaxes(ref, -1, -2) @ self.local(bone, obs_world))
        return oracle_series(x_obs, x_true, self.fps)

    def fit(self, bone: str, names: list[str], layout: np.ndarray, part_rest: np.ndarray):
        obs = np.stack([self.p(n) for n in names], axis=1)
        rot = self.rm.kabsch(layout, obs - obs.mean(axis=1, keepdims=True))
        return rot @ part_rest.T @ self.rest.frames[self.rest.index(bone)]

    def head(self):
        layout = self.m.head_layout
        names = [n for n in self.kp.head_fit_names() if n in layout]
        return self.fit("head", names, np.stack([layout[n] for n in names]), self.rs.HEAD_REST)

    def foot(self, side):
        n = self.rk.body_names(side)
        layout = np.vstack([np.zeros((1, 3)), self.m.side_layout(self.m.foot_layout, side)])
        names = [n[r] for r in ("ankle", "heel", "big_toe", "small_toe")]
        return self.fit(f"foot.{side}", names, layout, self.rs.side_frame(self.rs.SOLE_REST, side))

    def aimed(self, bone: str, target: np.ndarray, start: np.ndarray) -> np.ndarray:
        """The bone aimed at ``target`` from ``start``, keeping the TRUE twist (what no point shows)."""
        true = self.world[:, self.rest.index(bone)]
        return self.rm.shortest_arc(true[..., :, 1], self.rm.normalize(target - start)) @ true

    def leg(self, side, clean=False):
        """(thigh direction in the hips' frame, thigh twist, bend information, knee angle) read per frame."""
        rm = self.rm
        n = self.rk.body_names(side)
        hip, knee, ankle = (self.p(n[r], clean) for r in ("hip", "knee", "ankle"))
        up = rm.normalize(knee - hip)
        low = rm.normalize(ankle - knee)
        plane = np.cross(up, low)
        bent = np.linalg.norm(plane, axis=-1)
        b = self.rest.index(f"thigh.{side}")
        true = self.world[:, b]
        swung = rm.shortest_arc(true[..., :, 1], up) @ true
        unit = rm.normalize(plane)
        twist = np.arctan2(-np.sum(unit * swung[..., :, 2], -1), np.sum(unit * swung[..., :, 0], -1))
        hips = self.world[:, self.rest.index("hips")] @ self.rest.frames[self.rest.index("hips")].T
        local_up = np.einsum("tji,tj->ti", hips, up)
        info = np.clip(bent / np.sin(np.radians(24.0)), 0, 1) ** 2
        return local_up, twist, info, np.arccos(np.clip(np.sum(up * low, -1), -1, 1))


def oracle_rows(parse: dict, truth: dict, fps: float, noisy: np.ndarray) -> dict[str, dict[str, float]]:
    o = Oracle(parse, truth, fps, noisy)
    rows: dict[str, dict[str, float]] = {}
    rows["hips"] = o.rotation(
        "hips", parse["rig_solve"].hips_frame(o.p("left_hip"), o.p("right_hip"), o.p("neck"))
    )
    rows["neck"] = o.rotation("neck", o.aimed("neck", o.kp.head_centre(o.noisy), o.p("neck")))
    rows["head"] = o.rotation("head", o.head())
    for side in ("L", "R"):
        up, twist, info, knee = o.leg(side)
        up0, twist0, _, knee0 = o.leg(side, clean=True)
        rows[f"thigh_dir.{side}"] = oracle_series(up, up0, fps)  # a unit vector: radians of direction, small
        rows[f"thigh_twist.{side}"] = oracle_series(
            twist[:, None], np.unwrap(twist0)[:, None], fps, info, wrap=True
        )
        rows[f"knee.{side}"] = oracle_series(knee[:, None], knee0[:, None], fps)
        rows[f"foot.{side}"] = o.rotation(f"foot.{side}", o.foot(side))
    used = [parse["names"].index(n) for n in ("left_knee", "right_knee", "left_ankle", "right_ankle", "neck")]
    pts = {}
    for i in used:
        r = oracle_series(noisy[:, i], truth["keypoints"][:, i], fps)
        pts = {key: max(pts.get(key, 0.0), v) for key, v in r.items()}
    rows["joints (cm)"] = {k: np.radians(v) * 100 for k, v in pts.items()}
    return rows


def report(kind: str, seeds: list[int], noise: float) -> None:
    bench = _bench()
    parse = bench.load_parse()
    truth, fps = bench.make_truth(parse, kind)
    for seed in seeds:
        noisy, _ = bench.C.corrupt(truth["keypoints"], noise=noise, drop=0.0, seed=seed)
        rows = oracle_rows(parse, truth, fps, noisy)
        print(f"oracle, {kind}, seed {seed}, {1000 * noise:g} mm (deg; worst frame):")
        for name, row in rows.items():
            print(f"  {name:8s} " + "  ".join(f"{k} {v:.2f}" for k, v in row.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--truth", default="walk")
    ap.add_argument("--seeds", type=int, nargs="+", default=[5, 6, 7])
    ap.add_argument("--noise", type=float, default=0.003)
    args = ap.parse_args()
    report(args.truth, args.seeds, args.noise)


if __name__ == "__main__":
    main()
