"""Regenerate the example workflows (UI format in workflows/, API twins in workflows/api/) from one description.

Run with a ComfyUI checkout configured (COMFYUI_PATH, COMFYUI_PYTHON); it starts a server only to read
``/object_info``:   python tests/comfy/build_workflows.py   (or: ... --url http://127.0.0.1:8188)
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"sapiens2_comfy_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load("harness")
builder = _load("workflow_builder")
IMAGE = harness.EXAMPLE_IMAGE


def loader(g, task: str, title: str):
    return g.node(
        "Sapiens2ModelLoader",
        title=title,
        checkpoint=f"sapiens2_1b_{task}.safetensors",
        dtype="auto",
        attention="auto",
    )


def relight(g) -> None:
    image = g.node("LoadImage", image=IMAGE)
    seg_model = loader(g, "seg", "Load Sapiens2 seg")
    normal_model = loader(g, "normal", "Load Sapiens2 normal")
    pointmap_model = loader(g, "pointmap", "Load Sapiens2 pointmap")
    seg = g.node("Sapiens2Segment", model=seg_model.out(0), image=image.out(0))
    normals = g.node("Sapiens2Normals", model=normal_model.out(0), image=image.out(0), mask=seg.out(2))
    pointmap = g.node("Sapiens2Pointmap", model=pointmap_model.out(0), image=image.out(0), mask=seg.out(2))
    key = g.node(
        "Sapiens2DirectionalLight",
        title="Key light",
        azimuth=55.0,
        elevation=35.0,
        color="#ffd9b0",
        intensity=1.1,
    )
    rim = g.node(
        "Sapiens2DirectionalLight",
        title="Rim light",
        azimuth=-150.0,
        elevation=20.0,
        color="#9fc4ff",
        intensity=0.8,
        lights=key.out(0),
    )
    relit = g.node(
        "Sapiens2Relight",
        normals=normals.out(0),
        image=image.out(0),
        mask=seg.out(2),
        lights=rim.out(0),
        pointmap=pointmap.out(0),
        ambient=0.15,
        specular=0.1,
    )
    g.node("SaveImage", images=relit.out(0), filename_prefix="sapiens2/relit")
    g.node("SaveImage", title="Save light map", images=relit.out(1), filename_prefix="sapiens2/light_map")


def tryon(g) -> None:
    image = g.node("LoadImage", image=IMAGE)
    seg_model = loader(g, "seg", "Load Sapiens2 seg")
    seg = g.node("Sapiens2Segment", model=seg_model.out(0), image=image.out(0))
    garment = g.node(
        "Sapiens2BodyPartMask", title="Upper-body garment mask", seg=seg.out(0), preset="tryon_upper", grow=6,
        feather=2.0,
    )  # fmt: skip
    g.node("SaveImage", title="Save parts preview", images=seg.out(1), filename_prefix="sapiens2/tryon_parts")
    mask_image = g.node("MaskToImage", mask=garment.out(0))
    g.node("SaveImage", title="Save mask", images=mask_image.out(0), filename_prefix="sapiens2/tryon_mask")
    cutout = g.node("JoinImageWithAlpha", image=image.out(0), alpha=garment.out(0))
    g.node(
        "SaveImage",
        title="Save inpaint-ready RGBA",
        images=cutout.out(0),
        filename_prefix="sapiens2/tryon_inpaint",
    )


def pose(g) -> None:
    image = g.node("LoadImage", image=IMAGE)
    pose_model = loader(g, "pose", "Load Sapiens2 pose")
    seg_model = loader(g, "seg", "Load Sapiens2 seg (finds people)")
    estimate = g.node(
        "Sapiens2Pose",
        model=pose_model.out(0),
        image=image.out(0),
        seg_model=seg_model.out(0),
        flip_test=True,
    )
    drawn = g.node("Sapiens2DrawPose", keypoints=estimate.out(0))
    g.node("SaveImage", title="Save OpenPose image", images=drawn.out(0), filename_prefix="sapiens2/openpose")
    g.node("PreviewAny", title="POSE_KEYPOINT JSON", source=estimate.out(0))


def blender(g) -> None:
    image = g.node("LoadImage", image=IMAGE)
    seg_model = loader(g, "seg", "Load Sapiens2 seg")
    pose_model = loader(g, "pose", "Load Sapiens2 pose")
    normal_model = loader(g, "normal", "Load Sapiens2 normal")
    pointmap_model = loader(g, "pointmap", "Load Sapiens2 pointmap")
    seg = g.node("Sapiens2Segment", model=seg_model.out(0), image=image.out(0))
    estimate = g.node(
        "Sapiens2Pose",
        model=pose_model.out(0),
        image=image.out(0),
        seg_model=seg_model.out(0),
        flip_test=False,
    )
    normals = g.node("Sapiens2Normals", model=normal_model.out(0), image=image.out(0), mask=seg.out(2))
    pointmap = g.node("Sapiens2Pointmap", model=pointmap_model.out(0), image=image.out(0), mask=seg.out(2))
    bundle = g.node(
        "Sapiens2SaveCaptureBundle",
        image=image.out(0),
        pose=estimate.out(1),
        seg=seg.out(0),
        normals=normals.out(0),
        pointmap=pointmap.out(0),
        filename_prefix="sapiens2/capture",
    )
    g.node("PreviewAny", title="Bundle to open in Blender", source=bundle.out(0))
    g.node(
        "Sapiens2ExportMesh", pointmap=pointmap.out(0), image=image.out(0), normals=normals.out(0), format="glb",
        filename_prefix="sapiens2/mesh",
    )  # fmt: skip
    g.node("SaveImage", title="Save depth preview", images=pointmap.out(1), filename_prefix="sapiens2/depth")


WORKFLOWS = {
    "sapiens2_relight": relight,
    "sapiens2_tryon_mask": tryon,
    "sapiens2_pose_controlnet": pose,
    "sapiens2_blender_export": blender,
}


def build_all(object_info: dict, out_dir: Path = harness.WORKFLOWS) -> list[Path]:
    written = []
    (out_dir / "api").mkdir(parents=True, exist_ok=True)
    for name, describe in WORKFLOWS.items():
        g = builder.Graph(object_info)
        describe(g)
        for path, doc in (
            (out_dir / f"{name}.json", g.to_ui()),
            (out_dir / "api" / f"{name}.json", g.to_api()),
        ):
            path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
            written.append(path)
    return written


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--url":  # reuse a running server
        for path in build_all(harness.Client(sys.argv[2]).get("/object_info")):
            print(path.relative_to(harness.REPO))
        return 0
    found = harness.comfy_paths()
    if isinstance(found, str):
        print(found, file=sys.stderr)
        return 2
    checkout, python = found
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        harness.write_models(models)
        server = harness.ComfyServer(checkout, python, Path(tmp) / "base", harness.free_port())
        server.start(models)
        try:
            info = harness.Client(server.url).get("/object_info")
        finally:
            server.stop()
    for path in build_all(info):
        print(path.relative_to(harness.REPO))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
