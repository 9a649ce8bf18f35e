"""Humanoid rig accuracy under keypoint noise, per bone group, against the truths of tests/blender/ (issue 28).

    python benchmarks/bench_rig_noise.py                      # walk, seeds 5 6 7, 3 mm noise, 5 % dropped
    python benchmarks/bench_rig_noise.py --truth run --seeds 11 12
    python benchmarks/bench_rig_noise.py --oracle             # + the oracle limit of legs, hips, neck, head

Prints, per bone group, the worst frame's rotation error (degrees) and the joints' max / p99 error (cm) of the
solve with the default clean-up. ``--oracle`` adds what an estimator that knows the truth could reach
(``benchmarks/bench_rig_oracle.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "sapiens2_rig_truths_common", REPO / "tests" / "blender" / "rig_truths_common.py"
)
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)
NAMES = C.keypoint_names()
TRUTHS = {"walk": "rig_truth_walk", "run": "rig_truth_run", "slow": "rig_truth"}
GROUPS = {
    "hips": ("hips",),
    "spine": ("spine", "spine1", "spine2"),
    "neck": ("neck",),
    "head": ("head",),
    "clavicle": ("clavicle",),
    "upper_arm": ("upper_arm",),
    "forearm": ("forearm",),
    "hand": ("hand",),
    "thigh": ("thigh",),
    "shin": ("shin",),
    "foot": ("foot", "toe"),
}


def load_parse() -> dict:
    """The add-on's bpy-free ``parse`` package under a private name (its parent package imports bpy)."""
    return C.load_parse("sapiens2_rig_bench_parse")


def make_truth(parse: dict, kind: str) -> tuple[dict, float]:
    """(truth dict with m, rest, world, heads, keypoints; fps) of the walk, the run or the slow truth."""
    module = C.load(TRUTHS[kind])
    return module.truth(parse), module.FPS


def group_max(rotation: np.ndarray, names: list[str]) -> dict[str, float]:
    out = {}
    for group, bones in GROUPS.items():
        cols = [b for b, n in enumerate(names) if n.split(".")[0] in bones]
        out[group] = float(rotation[:, cols].max())
    return out


def leg_joints(parse: dict, truth: dict, solved) -> float:
    """Worst error (m) of the leg and torso keypoints (hips, knees, ankles, heels, toes, neck, ears)."""
    posed = C.posed_keypoints(parse, solved)
    picked = ["neck", "left_ear", "right_ear", "nose"]
    for side in "LR":
        n = parse["rig_keypoints"].body_names(side)
        picked += [n[r] for r in ("hip", "knee", "ankle", "heel", "big_toe", "small_toe")]
    idx = [NAMES.index(x) for x in picked]
    return float(np.linalg.norm(posed[:, idx] - truth["keypoints"][:, idx], axis=-1).max())


def run(kind: str, seeds: list[int], noise: float, drop: float, strength: float = 1.0) -> list[dict]:
    parse = load_parse()
    truth, fps = make_truth(parse, kind)
    rows = []
    for seed in seeds:
        noisy, scores = C.corrupt(truth["keypoints"], noise=noise, drop=drop, seed=seed)
        settings = parse["rig_pipeline"].RigSettings(smoothing=strength > 0, strength=max(strength, 1e-9))
        solved = parse["rig_pipeline"].solve_person(noisy, scores >= 0.3, NAMES, fps, settings)
        position, rotation = C.errors(parse, truth, solved)
        row = {"truth": kind, "seed": seed} | group_max(rotation, solved.rest.names)
        row |= {"joints_max_cm": 100 * float(position.max()),
                "joints_p99_cm": 100 * float(np.percentile(position, 99)),
                "leg_torso_joints_max_cm": 100 * leg_joints(parse, truth, solved)}  # fmt: skip
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--truth", default="walk", help="walk, run or slow")
    ap.add_argument("--seeds", type=int, nargs="+", default=[5, 6, 7])
    ap.add_argument("--noise", type=float, default=0.003)
    ap.add_argument("--drop", type=float, default=0.05)
    ap.add_argument("--strength", type=float, default=1.0)
    ap.add_argument("--oracle", action="store_true")
    args = ap.parse_args()
    rows = run(args.truth, args.seeds, args.noise, args.drop, args.strength)
    keys = [k for k in rows[0] if k not in ("truth", "seed")]
    print(f"{args.truth}, noise {1000 * args.noise:g} mm, drop {100 * args.drop:g} %  (deg; cm for joints)")
    print("seed " + " ".join(f"{k[:9]:>9}" for k in keys))
    for row in rows:
        print(f"{row['seed']:>4} " + " ".join(f"{row[k]:9.2f}" for k in keys))
    if args.oracle:
        path = Path(__file__).with_name("bench_rig_oracle.py")
        spec = importlib.util.spec_from_file_location("bench_rig_oracle", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.report(args.truth, args.seeds, args.noise)


if __name__ == "__main__":
    main()
