"""Blender import speed and memory for synthetic captures (1024x768 and 4096x3072, several strides).

    python benchmarks/bench_blender_import.py                       # default table, JSON to .bench/
    python benchmarks/bench_blender_import.py --sizes 1024x768 --strides 1 --repeat 3
    python benchmarks/bench_blender_import.py --sizes 1024x768 --strides 1 --repeat 5 \
        --python .hosts/bpy-4.5.15/bin/python,.hosts/bpy-5.3.0/bin/python     # one Blender against another

Bundles are written with the project's writer (this process); each measurement runs in a fresh Python with the
bpy wheel and the built extension installed (so the peak RSS is that import's own). Sizes are H x W, like the
network input (1024 x 768). Times are wall-clock for the whole File > Import operator: JSON + EXR read, mesh,
custom normals, attributes, material, camera with packed background plate, armature.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys, tempfile, time
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp())
import bpy, addon_utils
zip_path, bundle, options, repeat = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
assert bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True) == {"FINISHED"}

def status_mb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

with open("/proc/self/clear_refs", "w") as f:  # reset the peak (VmHWM) so it measures the import only
    f.write("5")
rss_before = status_mb("VmRSS")
times = []
try:
    for _ in range(repeat):
        bpy.ops.wm.read_homefile(use_empty=True)
        start = time.perf_counter()
        result = bpy.ops.import_scene.sapiens2_capture(filepath=bundle, **options)
        times.append(time.perf_counter() - start)
        assert result == {"FINISHED"}, result
    meshes = [o.data for o in bpy.data.objects if o.type == "MESH"]
    out = {
        "seconds": times,
        "vertices": sum(len(m.vertices) for m in meshes),
        "faces": sum(len(m.polygons) for m in meshes),
        "bones": sum(len(o.data.bones) for o in bpy.data.objects if o.type == "ARMATURE"),
        "rss_before_import_mb": rss_before,
        "peak_rss_mb": status_mb("VmHWM"),
        "bpy": bpy.app.version_string,
    }
finally:
    addon_utils.disable("bl_ext.user_default.sapiens2_capture")
print("RESULT " + json.dumps(out))
"""


def _synthetic():
    path = REPO / "tests" / "blender" / "synthetic_capture.py"
    spec = importlib.util.spec_from_file_location("sapiens2_blender_synthetic_capture", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_zip(python: str, folder: Path) -> Path:
    """The extension zip, built by the Python that has bpy (the build uses the wheel's own extension CLI)."""
    out = subprocess.run(
        [python, str(REPO / "scripts" / "build_blender_extension.py"), "--output-dir", str(folder)],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def measure(python: str, zip_path: Path, bundle: Path, options: dict, repeat: int) -> dict:
    proc = subprocess.run(
        [python, "-c", CHILD, str(zip_path), str(bundle), json.dumps(options), str(repeat)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(
            f"import failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return json.loads(line[len("RESULT ") :])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1024x768,4096x3072", help="comma-separated HxW")
    parser.add_argument("--strides", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=2, help="imports per process (first one is cold)")
    parser.add_argument(
        "--python",
        default=os.environ.get("SAPIENS2_BLENDER_PYTHON", sys.executable),
        help="Python(s) with bpy, comma-separated for a side-by-side (e.g. .hosts/bpy-4.5.15/bin/python,"
        ".hosts/bpy-5.3.0/bin/python); each row runs in a fresh process of each",
    )
    parser.add_argument("--out", type=Path, default=REPO / ".bench" / "blender_import.json")
    args = parser.parse_args(argv)

    sc = _synthetic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sapiens2_bench_blender_") as tmp:
        folder = Path(tmp)
        pythons = [p for p in args.python.split(",") if p]
        zips = {py: build_zip(py, folder / f"dist{i}") for i, py in enumerate(pythons)}
        for size in args.sizes.split(","):
            height, width = (int(v) for v in size.lower().split("x"))
            start = time.perf_counter()
            bundle = sc.write_figure(folder, f"figure_{height}x{width}", width, height)
            write_s = time.perf_counter() - start
            exr_mb = bundle.with_suffix(".exr").stat().st_size / 2**20
            # Worst case: a pointmap that was not masked, so every pixel becomes a vertex.
            unmasked = sc.write_figure(
                folder, f"unmasked_{height}x{width}", width, height, background_points=True
            )
            strides = [int(s) for s in args.strides.split(",")]
            configs = [("person (background dropped)", bundle, {"mesh_stride": s}) for s in strides]
            configs += [
                ("every pixel (unmasked P)", unmasked, {"mesh_stride": s, "drop_background": False})
                for s in strides
            ]
            configs.append(("armature + camera only", bundle, {"import_mesh": False}))
            for (label, path, options), python in ((c, py) for c in configs for py in pythons):
                result = measure(python, zips[python], path, options, args.repeat)
                row = {"size": f"{height}x{width}", "label": label, "options": options, "exr_mb": round(exr_mb, 1),
                       "bundle_write_s": round(write_s, 2), **result}  # fmt: skip
                rows.append(row)
                best = min(result["seconds"])
                print(
                    f"bpy {result['bpy']:<12} {row['size']:>10} {label:<28} {json.dumps(options):<48} best {best:6.2f} s "
                    f"(first {result['seconds'][0]:.2f} s)  {result['vertices']:>9} verts {result['faces']:>9} faces "
                    f"peak RSS {result['peak_rss_mb']:.0f} MB (bpy alone {result['rss_before_import_mb']:.0f} MB)",
                    flush=True,
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    machine = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        # bpy 5.3's numpy 2.5 uses multi-threaded OpenBLAS: its thread start-up shows in small matmuls on a busy
        # machine, so the setting is part of the result.
        "blas_threads": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")},
    }
    args.out.write_text(json.dumps({"machine": machine, "rows": rows}, indent=1), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
