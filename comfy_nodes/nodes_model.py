"""Load Sapiens2 Model: a checkpoint from models/sapiens2 (or a verified download) wrapped for ComfyUI."""

from __future__ import annotations

from comfy_api.latest import io

from ..core import catalogue
from ..core.checkpoints import hub
from ..core.studio.runtime import execution, models
from ..core.studio.runtime.models import file_fingerprint
from . import comfy_host
from .compat import Sapiens2Model, schema
from .errors import node_errors

DISPLAY_NAME = "Load Sapiens2 Model"
DOWNLOAD_TASKS = (*catalogue.TASKS, catalogue.PRETRAIN)
# Released task sizes first (what people pick), then the backbone-only sizes.
DOWNLOAD_SIZES = (
    *catalogue.TASK_SIZES_RELEASED,
    *(s for s in catalogue.SIZES if s not in catalogue.TASK_SIZES_RELEASED),
)


def _download_target(task: str, size: str) -> str | None:
    """Where the download entry keeps task/size under models/sapiens2 (None where no official file exists)."""
    try:
        return str(hub.local_checkpoint_path(task, size, home=comfy_host.model_folders()[0]))
    except hub.HubError:
        return None


class Sapiens2ModelLoader(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        files = comfy_host.checkpoint_names()
        return schema(
            node_id="Sapiens2ModelLoader",
            display_name=DISPLAY_NAME,
            search_aliases=["sapiens", "sapiens2 loader", "human model"],
            description=(
                f"Loads a Sapiens2 checkpoint ({', '.join(catalogue.TASKS)}; any size) from models/sapiens2. "
                "The architecture and task are read from the weights. The model joins ComfyUI's memory management."
            ),
            inputs=[
                io.Combo.Input(
                    "checkpoint",
                    options=[*files, comfy_host.DOWNLOAD_CHOICE],
                    default=files[0] if files else comfy_host.DOWNLOAD_CHOICE,
                    tooltip=(
                        "A .safetensors file in models/sapiens2 (subfolders are fine), or the download entry to "
                        "fetch the official file chosen by task and size (sha256-verified). An .onnx file from "
                        "'sapiens2 export onnx' runs with ONNX Runtime instead of PyTorch (CUDA, DirectML, OpenVINO, "
                        "CoreML or CPU, whichever is installed; needs onnxruntime in ComfyUI's Python)."
                    ),
                ),
                io.Combo.Input(
                    "download_task",
                    options=list(DOWNLOAD_TASKS),
                    default="pose",
                    tooltip="Task to download when 'checkpoint' is the download entry; ignored otherwise.",
                ),
                io.Combo.Input(
                    "download_size",
                    options=list(DOWNLOAD_SIZES),
                    default="1b",
                    tooltip="Model size to download (0.4b fastest, 5b best); ignored for a local checkpoint.",
                ),
                io.Combo.Input(
                    "dtype",
                    options=list(execution.DTYPE_CHOICES),
                    default="auto",
                    tooltip="auto: bf16 on GPUs that support it (as trained), fp16 on other GPUs, fp32 on the CPU.",
                ),
                io.Combo.Input(
                    "attention",
                    options=list(execution.ATTENTION_CHOICES),
                    default="auto",
                    tooltip="auto/sdpa: PyTorch fused attention (auto pads the 5B's head size for fast kernels); "
                    "math: the slow reference path, for debugging.",
                ),
                io.Boolean.Input(
                    "compile",
                    default=False,
                    tooltip="torch.compile the model: slower first run, faster afterwards (needs a working "
                    "compiler toolchain, e.g. Triton on CUDA).",
                ),
            ],
            outputs=[
                Sapiens2Model.Output(
                    id="model", display_name="model", tooltip="The loaded model, for the Sapiens2 task nodes."
                ),
                io.String.Output(
                    id="info", display_name="info", tooltip="What was loaded: size, task, dtype, parameters."
                ),
            ],
        )

    @classmethod
    def fingerprint_inputs(cls, checkpoint, download_task, download_size, **_) -> str:
        """Size and mtime of the file: an unchanged checkpoint stays cached, a replaced one loads again."""
        if checkpoint == comfy_host.DOWNLOAD_CHOICE:
            return file_fingerprint(_download_target(download_task, download_size))
        return file_fingerprint(comfy_host.find_checkpoint(checkpoint))

    @classmethod
    @node_errors(DISPLAY_NAME)
    def execute(cls, checkpoint, download_task, download_size, dtype, attention, compile) -> io.NodeOutput:
        folder = comfy_host.model_folders()[0]
        if checkpoint == comfy_host.DOWNLOAD_CHOICE:
            path = str(hub.ensure_checkpoint(download_task, download_size, home=folder))
        else:
            path = comfy_host.resolve_checkpoint(checkpoint)
        compute = comfy_host.compute_device()
        runtime = models.runtime_for(path)  # an exported .onnx file runs with ONNX Runtime (docs/deploy.md)
        loaded = models.load(
            path,
            device=compute if runtime == "torch" else "auto",  # ONNX Runtime: the best provider installed
            dtype=dtype,
            attention=attention,
            compile=compile,
            storage=comfy_host.offload_device(),
            bf16_supported=comfy_host.supports_bf16(compute),
            name=checkpoint if checkpoint != comfy_host.DOWNLOAD_CHOICE else None,
            hash_cache_dir=folder,
            runtime=runtime,
        )
        if runtime == "torch":  # an ONNX Runtime session holds its own device memory
            loaded.host_handle = comfy_host.make_patcher(loaded.model)
        info = f"{loaded.describe()}\n{loaded.spec.describe()}\n{loaded.plan.describe()}"
        return io.NodeOutput(loaded, info)


NODES = [Sapiens2ModelLoader]
