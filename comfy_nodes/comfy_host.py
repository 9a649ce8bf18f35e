"""Everything that touches ComfyUI's own modules: model folder, model management, progress and interrupts.

Imported only by the node modules, which only ComfyUI imports, so the core, the CLI and the unit tests never need
ComfyUI.  ``folder_paths`` and ``comfy.*`` are top-level modules of the ComfyUI process.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from ..core import catalogue
from ..core.errors import Sapiens2Error
from ..core.studio.runtime.host import Host
from ..core.studio.runtime.models import LoadedModel

MODEL_FOLDER = "sapiens2"
# .onnx: a file from `sapiens2 export onnx`, run with ONNX Runtime (docs/deploy.md)
MODEL_EXTENSIONS = {".safetensors", ".sft", ".onnx"}


def register_model_folder() -> None:
    """Register ``models/sapiens2`` (keeping folders an extra_model_paths.yaml already added) for safetensors."""
    import folder_paths

    default = os.path.join(folder_paths.models_dir, MODEL_FOLDER)
    paths, exts = folder_paths.folder_names_and_paths.get(MODEL_FOLDER, ([], set()))
    paths = list(paths)
    if default not in paths:
        paths.append(default)
    # A fresh set: never mutate a set another folder may share.
    folder_paths.folder_names_and_paths[MODEL_FOLDER] = (paths, set(exts) | MODEL_EXTENSIONS)


def checkpoint_names() -> list[str]:
    import folder_paths

    register_model_folder()
    return folder_paths.get_filename_list(MODEL_FOLDER)


def model_folders() -> list[str]:
    import folder_paths

    register_model_folder()
    return folder_paths.get_folder_paths(MODEL_FOLDER)


def find_checkpoint(name: str) -> str | None:
    """Absolute path of a file listed in models/sapiens2, or None (``..`` cannot escape: folder_paths normalises)."""
    import folder_paths

    register_model_folder()
    return folder_paths.get_full_path(MODEL_FOLDER, name)


DOWNLOAD_CHOICE = "(download: task + size below)"


def missing_checkpoint_hint(name: str) -> str:
    """For a missing file named like an official one (`sapiens2_1b_pose.safetensors`, as the example workflows
    name them), how to fetch it with the loader's download entry; '' otherwise."""
    parsed = catalogue.parse_official_name(name)
    if parsed is None or not catalogue.is_released(*parsed):
        return ""
    task, size = parsed
    return (
        f", or set 'checkpoint' to '{DOWNLOAD_CHOICE}' with download_task '{task}' and download_size '{size}' to "
        "fetch the official file"
    )


class CheckpointNotFound(Sapiens2Error, FileNotFoundError):
    """A checkpoint chosen in the loader is not (or no longer) in models/sapiens2."""


def resolve_checkpoint(name: str) -> str:
    """Absolute path of a file listed in models/sapiens2; a clear error naming the folders when it is not there."""
    path = find_checkpoint(name)
    if path is None:
        raise CheckpointNotFound(
            f"Sapiens2 checkpoint '{name}' was not found in {', '.join(model_folders())}; put the .safetensors file "
            f"there (subfolders are fine) and press R in ComfyUI to refresh the list{missing_checkpoint_hint(name)}"
        )
    return path


class PatchableModel(torch.nn.Module):
    """Holder that ComfyUI's ModelPatcher may annotate (it sets ``device`` and bookkeeping attributes)."""

    def __init__(self, inner: torch.nn.Module, device: torch.device) -> None:
        super().__init__()
        self.inner = inner
        self.device = device

    def forward(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - nodes call ``inner``
        return self.inner(*args, **kwargs)


def make_patcher(model: torch.nn.Module) -> Any:
    """Wrap a CPU-resident model for ComfyUI's memory management (load on demand, evict when others need room)."""
    import comfy.model_management as mm
    import comfy.model_patcher

    holder = PatchableModel(model, mm.unet_offload_device())
    return comfy.model_patcher.ModelPatcher(
        holder, load_device=mm.get_torch_device(), offload_device=mm.unet_offload_device()
    )


def compute_device() -> torch.device:
    import comfy.model_management as mm

    return mm.get_torch_device()


def offload_device() -> torch.device:
    import comfy.model_management as mm

    return mm.unet_offload_device()


def supports_bf16(device: torch.device) -> bool:
    import comfy.model_management as mm

    if device.type == "cpu":
        return False
    return bool(mm.should_use_bf16(device))


class ComfyHost(Host):
    """The engine's host inside ComfyUI: ``load_models_gpu``, ``intermediate_device``, ProgressBar, interrupts."""

    def __init__(self, node_id: str | None = None) -> None:
        import comfy.model_management as mm

        super().__init__(mm.get_torch_device(), mm.intermediate_device())
        self._mm = mm
        self._node_id = node_id
        self._bar: Any = None
        self._patchers: list[Any] = []
        self._evicted = False

    def activate(self, loaded: LoadedModel) -> Any:
        return self.activate_all({"model": loaded})["model"]

    def activate_all(self, models: dict[str, LoadedModel]) -> dict[str, Any]:
        """All models of one run loaded together, so loading one never evicts another."""
        patchers = [m.host_handle for m in models.values() if m.host_handle is not None]
        if patchers:
            self._mm.load_models_gpu(patchers, force_full_load=True)
            self._patchers = patchers
        return {
            task: (
                m.host_handle.model.inner if m.host_handle is not None else super(ComfyHost, self).activate(m)
            )
            for task, m in models.items()
        }

    def progress(self, done: int, total: int) -> None:
        import comfy.utils

        if self._bar is None or self._bar.total != total:
            self._bar = comfy.utils.ProgressBar(total, node_id=self._node_id)
        self._bar.update_absolute(done, total)  # the server hook also checks the interrupt flag here

    def check_cancel(self) -> None:
        self._mm.throw_exception_if_processing_interrupted()

    def release_memory(self) -> None:
        """After an out-of-memory error: the first time, ask ComfyUI to evict every other model it holds on this
        device (a diffusion model of the same workflow, say), keeping ours; then return cached memory."""
        if self._patchers and not self._evicted:
            self._evicted = True
            keep = [m for m in self._mm.current_loaded_models if any(m.model is p for p in self._patchers)]
            self._mm.free_memory(float("inf"), self.device, keep_loaded=keep)
        self._mm.soft_empty_cache()
