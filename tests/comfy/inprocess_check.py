"""Run inside ComfyUI's own Python (not pytest's): the pack against ComfyUI's real modules, in one process.

Checks what an HTTP round trip cannot see: the loader's ModelPatcher joins ComfyUI's loaded-model list and can be
unloaded, outputs live on ``intermediate_device()``, ComfyUI's ProgressBar hook receives chunk progress, an
interrupt stops a task node, and a node whose schema fails is dropped alone.  Prints one JSON object.

Usage: COMFYUI_PYTHON inprocess_check.py COMFYUI_PATH REPO WORK_DIR
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys


def prepare_clone(cls, hidden: dict):
    """The per-run class clone the executor makes, on either host API: 0.3.x passes the hidden inputs,
    newer hosts (0.3x) a ``V3Data`` dict that holds them under ``hidden_inputs``."""
    import inspect

    params = list(inspect.signature(cls.PREPARE_CLASS_CLONE).parameters)
    if params and params[0] == "v3_data":
        return cls.PREPARE_CLASS_CLONE({"hidden_inputs": hidden})
    return cls.PREPARE_CLASS_CLONE(hidden)


def pose_clip(node, pose_model, mm, utils, torch) -> dict:
    """A 5-frame clip through Sapiens2 Pose in chunks of 2 (issue 29): ComfyUI's progress bar moves per chunk of
    frames; Cancel pressed once the first chunk is done stops the run before the next; a VIDEO of the same
    frames (as GetVideoComponents gives them) gives the same keypoints."""
    from fractions import Fraction
    from types import SimpleNamespace

    from sapiens2_pack.comfy_nodes import labels

    clip = torch.rand(5, 40, 30, 3, generator=torch.Generator().manual_seed(4))
    widgets = {
        "flip_test": False,
        "keypoint_format": labels.first(labels.POSE_FORMATS),
        "neck_mode": labels.first(labels.NECK_MODES),
        "score_threshold": 0.3,
        "chunk_size": 2,
    }
    calls: list = []
    utils.set_progress_bar_global_hook(
        lambda value, total, preview, node_id=None: calls.append([value, total])
    )
    frames = node("Sapiens2Pose").execute(pose_model, clip, **widgets).args[0]
    result = {"progress": list(calls)}

    calls.clear()

    def cancel_after_first_chunk(value, total, preview, node_id=None):
        calls.append([value, total])
        if value == 2:
            mm.interrupt_current_processing(True)  # what the Cancel button does

    utils.set_progress_bar_global_hook(cancel_after_first_chunk)
    try:
        node("Sapiens2Pose").execute(pose_model, clip, **widgets)
        interrupted = False
    except mm.InterruptProcessingException:
        interrupted = True
    mm.interrupt_current_processing(False)
    result["cancelled"] = {"interrupted": interrupted, "progress": list(calls)}
    utils.set_progress_bar_global_hook(None)

    video = SimpleNamespace(get_components=lambda: SimpleNamespace(images=clip, frame_rate=Fraction(25)))
    from_video = node("Sapiens2Pose").execute(pose_model, video, **widgets).args[0]
    result["video_same"] = json.dumps(from_video) == json.dumps(frames)
    return result


def main() -> None:
    comfy, repo, work = sys.argv[1:4]
    os.chdir(comfy)
    sys.path.insert(0, comfy)  # ComfyUI's own layout: its root is on sys.path in the server too
    from comfy.cli_args import args

    args.cpu = True
    import comfy.model_management as mm
    import comfy.utils
    import folder_paths
    import torch

    spec = importlib.util.spec_from_file_location("sapiens2_pack", os.path.join(repo, "__init__.py"),
                                                  submodule_search_locations=[repo])  # fmt: skip
    pack = importlib.util.module_from_spec(spec)
    sys.modules["sapiens2_pack"] = pack
    spec.loader.exec_module(pack)
    extension = asyncio.run(pack.comfy_entrypoint())
    classes = {c.__name__: c for c in asyncio.run(extension.get_node_list())}
    out: dict = {"nodes": sorted(classes)}

    from sapiens2_pack.comfy_nodes import load_node_classes, nodes_relight

    original = nodes_relight.Sapiens2Relight.define_schema
    nodes_relight.Sapiens2Relight.define_schema = classmethod(
        lambda cls: (_ for _ in ()).throw(TypeError("old host"))
    )
    out["nodes_when_one_schema_fails"] = sorted(c.__name__ for c in load_node_classes())
    nodes_relight.Sapiens2Relight.define_schema = original

    from sapiens2_pack.core.testing.synthetic import write_synthetic_checkpoint

    models = os.path.join(work, "models")
    write_synthetic_checkpoint(os.path.join(models, "sub", "tiny_seg.safetensors"), task="seg")
    folder_paths.add_model_folder_path("sapiens2", models)

    def node(name):
        return prepare_clone(classes[name], {"unique_id": "7"})

    loader = node("Sapiens2ModelLoader")
    loaded, info = loader.execute("sub/tiny_seg.safetensors", "seg", "1b", "auto", "auto", False).args
    mm.load_models_gpu([loaded.host_handle])
    out["info"] = info
    out["patcher_loaded"] = any(m.model is loaded.host_handle for m in mm.current_loaded_models)

    calls = []
    comfy.utils.set_progress_bar_global_hook(
        lambda value, total, preview, node_id=None: calls.append([value, total])
    )
    image = torch.rand(3, 40, 32, 3)
    seg, preview, person = node("Sapiens2Segment").execute(loaded, image, 2).args
    out["progress"] = list(calls)
    out["output_devices"] = sorted({str(t.device) for t in (preview, person, seg.results[0].labels)})
    out["intermediate_device"] = str(mm.intermediate_device())

    mm.interrupt_current_processing(True)
    try:
        node("Sapiens2Segment").execute(loaded, image, 1)
        out["interrupted"] = False
    except mm.InterruptProcessingException:
        out["interrupted"] = True
    mm.interrupt_current_processing(False)

    # Out of memory next to another model (e.g. a diffusion model of the same workflow): the pack asks ComfyUI
    # to evict the other models before it shrinks the chunk, and keeps its own model loaded.
    from sapiens2_pack.comfy_nodes.comfy_host import ComfyHost
    from sapiens2_pack.core.studio.runtime.chunking import run_chunked

    write_synthetic_checkpoint(os.path.join(models, "tiny_pose.safetensors"), task="pose")
    other, _ = loader.execute("tiny_pose.safetensors", "pose", "1b", "auto", "auto", False).args
    mm.load_models_gpu([other.host_handle])
    runtime = ComfyHost("7")
    runtime.activate(loaded)
    failures = [torch.OutOfMemoryError("CUDA out of memory (simulated)")]

    def flaky_work(start, stop):
        if failures:
            raise failures.pop()
        return list(range(start, stop))

    run_chunked(2, 2, flaky_work, runtime)
    out["after_oom"] = {
        "other_loaded": any(m.model is other.host_handle for m in mm.current_loaded_models),
        "own_loaded": any(m.model is loaded.host_handle for m in mm.current_loaded_models),
    }

    # A newer host with ComfyUI's 3D file type whose File3D constructor differs from the one the pack knows:
    # Export Mesh must still save the mesh (model_3d degrades to None with a warning), not fail every run.
    from comfy_api import latest as api_latest
    from comfy_api.latest import io as api_io

    class IncompatibleFile3D:
        def __init__(self, *args, **kwargs):
            raise TypeError("File3D() takes different arguments on this host")

    api_io.File3DAny = api_io.Custom("FILE_3D")
    api_latest.Types.File3D = IncompatibleFile3D
    folder_paths.set_output_directory(os.path.join(work, "output"))
    write_synthetic_checkpoint(os.path.join(models, "tiny_pointmap.safetensors"), task="pointmap")
    pm_model, _ = loader.execute("tiny_pointmap.safetensors", "pointmap", "1b", "auto", "auto", False).args
    pointmap = node("Sapiens2Pointmap").execute(pm_model, torch.rand(1, 32, 24, 3), 1, True, False).args[0]
    mesh_node = node("Sapiens2ExportMesh")
    outputs = [o.id for o in mesh_node.define_schema().outputs]
    try:
        values = mesh_node.execute(pointmap, "glb", "mesh/m", 10.0).args
        out["mesh_on_new_host"] = {"outputs": outputs, "path": values[0], "model_3d": values[1]}
    except Exception as exc:
        out["mesh_on_new_host"] = {"outputs": outputs, "error": f"{type(exc).__name__}: {exc}"}
    del api_io.File3DAny, api_latest.Types.File3D

    out["pose_clip"] = pose_clip(node, other, mm, comfy.utils, torch)

    mm.unload_all_models()
    out["patcher_loaded_after_unload"] = any(m.model is loaded.host_handle for m in mm.current_loaded_models)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
