"""Capture bundle -> humanoid rig -> BVH / FBX, headless.

Run with a Python that has the ``bpy`` wheel, or inside Blender::

    python scripts/export_mocap.py walk.sequence.json --out takes/walk --format bvh fbx --naming MIXAMO
    blender -b -P scripts/export_mocap.py -- walk.sequence.json --out takes/walk --format fbx

It uses the installed Sapiens2 Capture extension when Blender has it enabled, else the add-on folder of this
checkout (loaded by path, nothing registered). One file per person: ``<out>.bvh`` for a single person,
``<out>_<id>.bvh`` otherwise; BVH files get their ``.camera.json`` beside them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

ADDON_DIR = Path(__file__).resolve().parents[1] / "blender_addon"
EXTENSION = "bl_ext.user_default.sapiens2_capture"


def load_addon():
    """The add-on package: the enabled extension if there is one, else this checkout's folder."""
    try:
        return importlib.import_module(EXTENSION)
    except ImportError:
        pass
    name = "sapiens2_capture_checkout"
    spec = importlib.util.spec_from_file_location(
        name, ADDON_DIR / "__init__.py", submodule_search_locations=[str(ADDON_DIR)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for sub in ("build.scene", "build.mocap_export", "parse.options"):
        importlib.import_module(f"{name}.{sub}")
    return module


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", type=Path, help="<name>.sequence.json (or a single frame's .json)")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    p.add_argument("--format", nargs="+", choices=["bvh", "fbx"], default=["bvh"])
    p.add_argument("--naming", choices=["MIXAMO", "RIGIFY", "UE"], default="MIXAMO")
    p.add_argument("--face", choices=["NONE", "BONES", "EMPTIES"], default="NONE")
    p.add_argument("--no-smoothing", action="store_true", help="follow the keypoints exactly (no clean-up)")
    p.add_argument(
        "--strength", type=float, default=1.0, help="clean-up strength (1 default, 2 twice as smooth)"
    )
    p.add_argument("--foot-lock", action="store_true")
    p.add_argument("--up", choices=["Z", "Y"], default="Z", help="scene up axis of the import")
    p.add_argument("--scale", type=float, default=1.0, help="metres -> scene units")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]
    args = parse_args(argv)
    import bpy

    addon = load_addon()
    options = addon.parse.options.ImportOptions(
        import_mesh=False,
        import_armatures=False,
        import_background=False,
        import_rig=True,
        rig_naming=args.naming,
        rig_face=args.face,
        rig_smoothing=not args.no_smoothing,
        rig_smoothing_strength=args.strength,
        rig_foot_lock=args.foot_lock,
        up_axis=args.up,
        global_scale=args.scale,
    )
    bpy.ops.wm.read_homefile(use_empty=True)
    result = addon.build.scene.import_files(bpy.context, [args.bundle], options)
    for warning in result.warnings:
        print(f"warning: {warning}")
    rigs = [o for o in result.objects if o.type == "ARMATURE" and "sapiens2_rig" in o]
    if not rigs:
        print("error: no humanoid rig was built (no person with 3D keypoints?)", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    export = addon.build.mocap_export
    for rig in rigs:
        stem = args.out if len(rigs) == 1 else args.out.with_name(f"{args.out.name}_{rig['sapiens2_person']}")
        bpy.context.view_layer.objects.active = rig
        for fmt in args.format:
            writer = export.export_bvh if fmt == "bvh" else export.export_fbx
            summary = writer(bpy.context, stem.with_suffix(f".{fmt}"), rig)
            print(
                f"{rig.name}: {summary['frames']} frames at {summary['fps']:g} fps -> {', '.join(summary['files'])}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
