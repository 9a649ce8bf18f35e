"""Regenerate the example workflows (UI format in workflows/, API twins in workflows/api/) from one description.

Run with the main venv once the hosts are set up (``.hosts/hosts.json``, or COMFYUI_PATH); it starts the oldest
backend of the matrix only to read ``/object_info``:
    .venv/bin/python tests/comfy/build_workflows.py        (or: ... --url http://127.0.0.1:8188)
"""

from __future__ import annotations

import importlib.util
import json
import sys
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
hosts = _load("hosts")
IMAGE = harness.EXAMPLE_IMAGE
VIDEO = harness.EXAMPLE_VIDEO


MODELS_HELP = (
    "Models: put the official files (sapiens2_1b_<task>.safetensors from huggingface.co/facebook/"
    "sapiens2-<task>-1b) in ComfyUI/models/sapiens2/, or set a loader's checkpoint to '(download: task + size "
    "below)': it downloads that task's official file (sha256-checked) once. 0.4b is faster, 5b more accurate."
)
MATTING_HELP = (
    "Matting is released at 1b only (sapiens2_1b_matting.safetensors from huggingface.co/facebook/"
    "sapiens2-matting-1b)."
)


MODEL_DIRECTORY = (
    "sapiens2"  # ComfyUI/models/sapiens2: the folder the loader lists (comfy_nodes MODEL_FOLDER)
)
SIZE = "1b"


def official_model(task: str, size: str = SIZE) -> dict[str, str]:
    """The official file for ``task``/``size`` as the frontend's model metadata: name, download URL, folder."""
    from sapiens2_studio.core.checkpoints.hub import checkpoint_ref

    ref = checkpoint_ref(task, size)
    return {"name": ref.filename, "url": ref.url, "directory": MODEL_DIRECTORY}


def loader(g, task: str, title: str | None = None, **where):
    """A loader whose download entry fetches the same task as its checkpoint (switching to it just works), and
    whose ``properties.models`` names that file: a workflow someone receives says exactly what to fetch."""
    model = official_model(task)
    return g.node(
        "Sapiens2ModelLoader",
        title=title or f"Load Sapiens2 {task}",
        models=[model],
        checkpoint=model["name"],
        download_task=task,
        download_size=SIZE,
        dtype="auto",
        attention="auto",
        **where,
    )


def loaders(g, *tasks: str) -> dict:
    """One loader per task, in this order (their node ids follow it)."""
    return {task: loader(g, task) for task in tasks}


def pose_loaders(g) -> dict:
    """The pose model and the seg model that finds its people (both pose workflows)."""
    return {"pose": loader(g, "pose"), "seg": loader(g, "seg", "Load Sapiens2 seg (finds people)")}


def groups(g, *titles: str) -> None:
    """One titled group per column, left to right."""
    for column, title in enumerate(titles):
        g.group(title, column)


def lights(g):
    """The key and rim Directional Lights both relight workflows chain (warm key, cool rim); the rim's output
    carries both."""
    key = g.node(
        "Sapiens2DirectionalLight",
        title="Key light",
        column=1,
        azimuth=55.0,
        elevation=35.0,
        color="#ffd9b0",
        intensity=1.1,
    )
    return g.node(
        "Sapiens2DirectionalLight",
        title="Rim light",
        azimuth=-150.0,
        elevation=20.0,
        color="#9fc4ff",
        intensity=0.8,
        lights=key.out(0),
        column=1,
    )


def normals_and_pointmap(g, models: dict, image, seg, **pointmap_options) -> tuple:
    """Normals and Pointmap of the person Segment masks (seg's person_mask output)."""
    normals = g.node("Sapiens2Normals", model=models["normal"].out(0), image=image, mask=seg.out(2))
    pointmap = g.node(
        "Sapiens2Pointmap", model=models["pointmap"].out(0), image=image, mask=seg.out(2), **pointmap_options
    )
    return normals, pointmap


def relight_node(g, image, normals, pointmap, lights_end, **mask):
    """Relight with the look both relight workflows share (ambient 0.15, specular 0.1); ``mask`` names the
    person's mask (and, from a matte, its foreground)."""
    return g.node(
        "Sapiens2Relight",
        normals=normals.out(0),
        image=image,
        lights=lights_end.out(0),
        pointmap=pointmap.out(0),
        ambient=0.15,
        specular=0.1,
        **mask,
    )


def save_video(g, images, parts, title: str, filename_prefix: str, **where) -> None:
    """Frames back into a video at the input's frame rate, with its audio (Get Video Components' outputs)."""
    clip = g.node("CreateVideo", images=images, fps=parts.out(2), audio=parts.out(1))
    g.node("SaveVideo", title=title, video=clip.out(0), filename_prefix=filename_prefix, **where)


def relight(g) -> None:
    g.note(
        "Relight a photo of a person with new lights.\n"
        "1. Load your photo.\n"
        "2. " + MODELS_HELP + "\n"
        "3. Place the lights: azimuth 0 = from the camera, +90 = from the right, 180 = from behind (rim);\n"
        "   elevation = height. Chain more Directional Light nodes for more lights.\n"
        "4. Queue. 'image' is the relit photo; 'light_map' can condition IC-Light.\n"
        "Matte: Sapiens2 Matte's soft alpha is Relight's mask and its straight foreground the surface colour, so\n"
        "   hair strands and soft edges are relit and blended instead of cut at the segmentation's hard edge, and\n"
        "   the old background does not glow through them onto a new 'background'. " + MATTING_HELP + "\n"
        "   Without it, connect Segment's person_mask to Relight's mask and leave 'foreground' empty.\n"
        "Tips: connect a Sapiens2 Albedo image to 'albedo' for cleaner colours; turn 'shadows' off for speed."
    )
    image = g.node("LoadImage", image=IMAGE)
    models = loaders(g, "seg", "normal", "pointmap", "matting")
    seg = g.node("Sapiens2Segment", model=models["seg"].out(0), image=image.out(0))
    matte = g.node("Sapiens2Matte", model=models["matting"].out(0), image=image.out(0))
    normals, pointmap = normals_and_pointmap(g, models, image.out(0), seg)
    rim = lights(g)
    relit = relight_node(g, image.out(0), normals, pointmap, rim, mask=matte.out(1), foreground=matte.out(2))
    g.node("SaveImage", images=relit.out(0), filename_prefix="sapiens2/relit")
    g.node("SaveImage", title="Save light map", images=relit.out(1), filename_prefix="sapiens2/light_map")
    groups(g, "1 · Photo and models", "2 · Mask, matte, lights", "3 · Normals and depth", "4 · Relight",
           "5 · Save")  # fmt: skip


def tryon(g) -> None:
    g.note(
        "Mask the garment area for virtual try-on or inpainting.\n"
        "1. Load the photo of the person.\n"
        "2. " + MODELS_HELP + "\n"
        "3. Body-Part Mask: preset tryon_upper / tryon_lower / tryon_full covers clothes plus the skin a new\n"
        "   garment may uncover (never hands or face). 'grow' widens the mask, 'feather' softens its edge;\n"
        "   'exclude' removes parts (e.g. hair).\n"
        "4. Feed 'mask' to your try-on / inpaint node (CatVTON, IDM-VTON, Inpaint...). The RGBA cut-out is\n"
        "   transparent where the mask is.\n"
        "Matte: Sapiens2 Matte's alpha is the Body-Part Mask's person_mask, so where the garment meets the\n"
        "   background (loose sleeves, hair over the shoulders) the mask follows the soft matte instead of the\n"
        "   segmentation's stair-step edge, and the repaint blends there. " + MATTING_HELP + " Without it,\n"
        "   disconnect person_mask. Matte's 'composite' (background_color #ffffff) is the person on white, which\n"
        "   try-on models trained on studio photos handle best."
    )
    image = g.node("LoadImage", image=IMAGE)
    models = loaders(g, "seg", "matting")
    seg = g.node("Sapiens2Segment", model=models["seg"].out(0), image=image.out(0))
    matte = g.node(
        "Sapiens2Matte", model=models["matting"].out(0), image=image.out(0), background_color="#ffffff"
    )
    garment = g.node(
        "Sapiens2BodyPartMask", title="Upper-body garment mask", seg=seg.out(0), preset="tryon_upper", grow=6,
        feather=2.0, person_mask=matte.out(1),
    )  # fmt: skip
    g.node(
        "SaveImage",
        title="Save parts preview",
        images=seg.out(1),
        filename_prefix="sapiens2/tryon_parts",
        column=1,
    )
    mask_image = g.node("MaskToImage", mask=garment.out(0))
    g.node("SaveImage", title="Save mask", images=mask_image.out(0), filename_prefix="sapiens2/tryon_mask")
    cutout = g.node("JoinImageWithAlpha", image=image.out(0), alpha=garment.out(0))
    g.node(
        "SaveImage",
        title="Save inpaint-ready RGBA",
        images=cutout.out(0),
        filename_prefix="sapiens2/tryon_inpaint",
    )
    groups(g, "1 · Photo and model", "2 · Segment and matte", "3 · Garment mask", "4 · Mask image and cut-out",
           "5 · Save")  # fmt: skip


def pose(g) -> None:
    g.note(
        "Whole-body pose (308 keypoints) as OpenPose data and a skeleton image for ControlNet.\n"
        "1. Load your photo (any number of people).\n"
        "2. " + MODELS_HELP + "\n"
        "3. The seg model finds the people (one box per person). You can instead connect person boxes\n"
        "   (BOUNDING_BOX, e.g. from RT-DETR) to 'bboxes'.\n"
        "4. Use the skeleton image with an OpenPose ControlNet. The keypoints (openpose format) also feed\n"
        "   controlnet_aux's render/edit nodes and ComfyUI's SDPose nodes."
    )
    image = g.node("LoadImage", image=IMAGE)
    models = pose_loaders(g)
    estimate = g.node(
        "Sapiens2Pose",
        model=models["pose"].out(0),
        image=image.out(0),
        seg_model=models["seg"].out(0),
        flip_test=True,
    )
    drawn = g.node("Sapiens2DrawPose", keypoints=estimate.out(0))
    g.node("SaveImage", title="Save OpenPose image", images=drawn.out(0), filename_prefix="sapiens2/openpose")
    g.node("PreviewAny", title="POSE_KEYPOINT JSON", source=estimate.out(0))
    groups(g, "1 · Photo and models", "2 · Pose", "3 · Skeleton and keypoints", "4 · Save")


def video_pose(g) -> None:
    g.note(
        "Pose for a video ControlNet (WAN/VACE, AnimateDiff, UniAnimate...): a video in, one smoothed, tracked\n"
        "skeleton per frame out, as `sapiens2 predict CLIP --smooth` gives it.\n"
        "1. Load your video (Load Video: upload or pick a file in ComfyUI/input). Long clips are fine: the frames\n"
        "   go through in chunks; cap them with Get Video Components + an image batch node if you need to.\n"
        "2. " + MODELS_HELP + "\n"
        "3. Pose takes the VIDEO directly (or an IMAGE batch of its frames: same result). 'smooth' removes the\n"
        "   frame-to-frame jitter (One-Euro filter per person); people keep their id across the clip\n"
        "   (POSE_KEYPOINT person_id). fps 0 = the video's frame rate. 'when_nobody_found' = no people:\n"
        "   frames where everyone left stay empty instead of drawing a whole-frame skeleton.\n"
        "4. The skeleton video (same frame rate and audio as the input) feeds your video ControlNet; the\n"
        "   POSE_KEYPOINT list feeds controlnet_aux's render/edit nodes."
    )
    video = g.node("LoadVideo", file=VIDEO)
    models = pose_loaders(g)
    parts = g.node("GetVideoComponents", video=video.out(0), column=1)
    estimate = g.node(
        "Sapiens2Pose",
        model=models["pose"].out(0),
        image=video.out(0),
        seg_model=models["seg"].out(0),
        flip_test=False,
        when_nobody_found="no people",
        smooth=True,
        fps=0.0,
        column=1,
    )
    drawn = g.node("Sapiens2DrawPose", keypoints=estimate.out(0))
    save_video(g, drawn.out(0), parts, "Save skeleton video", "sapiens2/pose_video")
    groups(g, "1 · Video and models", "2 · Smoothed, tracked pose", "3 · Skeleton frames", "4 · Skeleton video",
           "5 · Save")  # fmt: skip


def video_relight(g) -> None:
    g.note(
        "Relight a video of a person without flicker.\n"
        "1. Load your video.\n"
        "2. " + MODELS_HELP + "\n"
        "3. Every frame gets the same lights (Directional Light nodes) and the depth preview one depth range for\n"
        "   the whole clip (Pointmap's normalize_per_image off), so nothing jumps from frame to frame.\n"
        "4. Queue. The relit frames become a video at the input's frame rate, with its audio.\n"
        "Tips: turn 'shadows' off for speed on long clips; connect a Sapiens2 Albedo image to 'albedo' for\n"
        "   cleaner colours. For a Blender capture of the same clip use Save Capture Bundle with 'smooth' on\n"
        "   (it smooths the pointmap scale across the frames, as `sapiens2 predict --smooth`)."
    )
    video = g.node("LoadVideo", file=VIDEO)
    models = loaders(g, "seg", "normal", "pointmap")
    parts = g.node("GetVideoComponents", video=video.out(0), column=1)
    seg = g.node("Sapiens2Segment", model=models["seg"].out(0), image=parts.out(0), column=1)
    rim = lights(g)
    normals, pointmap = normals_and_pointmap(g, models, parts.out(0), seg, normalize_per_image=False)
    relit = relight_node(g, parts.out(0), normals, pointmap, rim, mask=seg.out(2))
    save_video(g, relit.out(0), parts, "Save relit video", "sapiens2/relit_video", column=4)
    g.node(
        "SaveImage",
        title="Save depth frames",
        images=pointmap.out(1),
        filename_prefix="sapiens2/video_depth",
        column=4,
    )
    groups(g, "1 · Video and models", "2 · Frames, mask, lights", "3 · Normals and depth", "4 · Relight",
           "5 · Video and save")  # fmt: skip


def blender(g) -> None:
    g.note(
        "Everything Sapiens2 sees, saved for Blender and 3D viewers.\n"
        "1. Load your photo (a batch of video frames becomes a numbered sequence).\n"
        "2. " + MODELS_HELP + "\n"
        "3. Queue. Save Capture Bundle writes EXR + JSON into ComfyUI/output/sapiens2/ (needs the 'openexr'\n"
        "   package); open the .json in Blender: File > Import > Sapiens2 Capture (.json).\n"
        "4. Export Mesh writes a GLB you can preview in ComfyUI's Preview 3D or open anywhere."
    )
    image = g.node("LoadImage", image=IMAGE)
    models = loaders(g, "seg", "pose", "normal", "pointmap")
    seg = g.node("Sapiens2Segment", model=models["seg"].out(0), image=image.out(0))
    estimate = g.node(
        "Sapiens2Pose",
        model=models["pose"].out(0),
        image=image.out(0),
        seg_model=models["seg"].out(0),
        flip_test=False,
    )
    normals, pointmap = normals_and_pointmap(g, models, image.out(0), seg)
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
    groups(g, "1 · Photo and models", "2 · Segment and pose", "3 · Normals and depth", "4 · Export",
           "5 · Bundle path")  # fmt: skip


WORKFLOWS = {
    "sapiens2_relight": relight,
    "sapiens2_tryon_mask": tryon,
    "sapiens2_pose_controlnet": pose,
    "sapiens2_blender_export": blender,
    "sapiens2_video_pose_controlnet": video_pose,
    "sapiens2_video_relight": video_relight,
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


def object_info() -> dict | None:
    """The backend's /object_info: from --url's running server, else from the oldest backend of the matrix
    (what it describes, every newer one loads), started for this; None (and why, on stderr) without hosts."""
    if len(sys.argv) > 2 and sys.argv[1] == "--url":  # reuse a running server
        return harness.Client(sys.argv[2]).get("/object_info")
    matrix = hosts.load_matrix()
    if not matrix.hosts:
        print(matrix.reason, file=sys.stderr)
        return None
    host = matrix.hosts[0]
    with harness.started_server(host) as server:
        return harness.Client(server.url).get("/object_info")


def main() -> int:
    info = object_info()
    if info is None:
        return 2
    for path in build_all(info):
        print(path.relative_to(harness.REPO))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
