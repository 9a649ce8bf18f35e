"""Humanoid rig timing: solving a 300-frame single-person sequence, and the whole import + export in Blender.

    python benchmarks/bench_rig.py                                   # numpy solve only
    python benchmarks/bench_rig.py --blender .venv-blender/bin/python   # + File > Import with the rig, BVH, FBX

The sequence is the tests' ground-truth body (tests/blender/rig_truth.py) with 1.5 mm noise and 5 % dropped
joints. "solve" = gap filling + zero-phase One-Euro + measurements + rest pose + rotations (parse/rig_pipeline).
The Blender part writes the sequence with the project's writer and times, in a fresh bpy Python, the import
(JSON reading, solve, armature, keys), the BVH export and the FBX export. Results go to .bench/rig.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, tempfile, time
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp())
import importlib.util
import bpy
spec = importlib.util.spec_from_file_location("export_mocap", sys.argv[1])
script = importlib.util.module_from_spec(spec); spec.loader.exec_module(script)
addon = script.load_addon()
out = {}
for repeat in range(int(sys.argv[4])):
    bpy.ops.wm.read_homefile(use_empty=True)
    if sys.argv[5] == "default":  # the import's defaults (308-bone keypoint armature and all) plus the rig
        options = addon.parse.options.ImportOptions(import_rig=True)
    else:
        options = addon.parse.options.ImportOptions(import_mesh=False, import_armatures=False,
                                                    import_background=False, import_rig=True)
    start = time.perf_counter()
    result = addon.build.scene.import_files(bpy.context, [sys.argv[2]], options)
    t_import = time.perf_counter() - start
    rig = next(o for o in result.objects if "sapiens2_rig" in o)
    start = time.perf_counter()
    addon.build.mocap_export.export_bvh(bpy.context, os.path.join(sys.argv[3], "b.bvh"), rig)
    t_bvh = time.perf_counter() - start
    start = time.perf_counter()
    addon.build.mocap_export.export_fbx(bpy.context, os.path.join(sys.argv[3], "b.fbx"), rig)
    t_fbx = time.perf_counter() - start
    for key, value in (("import_s", t_import), ("bvh_export_s", t_bvh), ("fbx_export_s", t_fbx)):
        out.setdefault(key, []).append(value)
out["bpy"] = bpy.app.version_string
print("RESULT " + json.dumps(out))
"""


def _inputs(frames: int):
    """The ``parse`` dict, the slow truth's module and its keypoints with 1.5 mm noise and 5 % dropped."""
    spec = importlib.util.spec_from_file_location(
        "sapiens2_rig_truths_common", REPO / "tests" / "blender" / "rig_truths_common.py"
    )
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    parse = common.load_parse("bench_rig_parse")
    truth = common.load("rig_truth")
    clean = truth.truth(parse, frames)["keypoints"]
    noisy, scores = common.corrupt(clean, noise=0.0015, drop=0.05)
    return parse, truth, parse["names"], noisy, scores


def bench_solve(frames: int, repeat: int) -> dict:
    parse, truth, names, noisy, scores = _inputs(frames)
    pipeline = parse["rig_pipeline"]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        pipeline.solve_person(noisy, scores >= 0.3, names, truth.FPS, pipeline.RigSettings(foot_lock=True))
        times.append(time.perf_counter() - start)
    return {"frames": frames, "solve_s_best": min(times), "solve_s_median": statistics.median(times)}


def bench_blender(python: str, frames: int, repeat: int, default_import: bool = False) -> dict:
    _, truth, _, noisy, scores = _inputs(frames)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        truth._write_keypoint_sequence(folder, "bench", noisy, scores)
        proc = subprocess.run(
            [python, "-c", CHILD, str(REPO / "scripts" / "export_mocap.py"), str(folder / "bench.sequence.json"),
             tmp, str(repeat), "default" if default_import else "rig"],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"Blender run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    raw = json.loads(line[7:])
    return {k: (min(v) if isinstance(v, list) else v) for k, v in raw.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blender", help="a Python with the bpy wheel, to time the import and exports too")
    parser.add_argument(
        "--default-import",
        action="store_true",
        help="import with the add-on's defaults (keypoint armature too), as a user would",
    )
    parser.add_argument("--out", type=Path, default=REPO / ".bench" / "rig.json")
    args = parser.parse_args()
    result = {"python": platform.python_version(), "numpy": np.__version__, "date": time.strftime("%Y-%m-%d")}
    result["numpy_solve"] = bench_solve(args.frames, args.repeat)
    print(f"solve {args.frames} frames: best {result['numpy_solve']['solve_s_best']:.3f} s")
    if args.blender:
        result["blender"] = bench_blender(
            args.blender, args.frames, max(1, args.repeat // 2), args.default_import
        )
        b = result["blender"]
        print(f"Blender {b['bpy']}: import with rig {b['import_s']:.2f} s, BVH {b['bvh_export_s']:.2f} s, "
              f"FBX {b['fbx_export_s']:.2f} s")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
