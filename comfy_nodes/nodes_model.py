"""Load Sapiens2 Model: a checkpoint from models/sapiens2 (or a verified download) wrapped for ComfyUI."""

from __future__ import annotations

from comfy_api.latest import io

from . import comfy_host, loader_logic
from .compat import Sapiens2Model, schema


class Sapiens2ModelLoader(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        files = comfy_host.checkpoint_names()
        return schema(
            node_id="Sapiens2ModelLoader",
            display_name="Load Sapiens2 Model",
            search_aliases=["sapiens", "sapiens2 loader", "human model"],
            description=(
                "Loads a Sapiens2 checkpoint (pose, seg, normal, albedo or pointmap; any size) from models/sapiens2. "
                "The architecture and task are read from the weights. The model joins ComfyUI's memory management."
            ),
            inputs=[
                io.Combo.Input(
                    "checkpoint",
                    options=[*files, loader_logic.DOWNLOAD_CHOICE],
                    default=files[0] if files else loader_logic.DOWNLOAD_CHOICE,
                    tooltip=(
                        "A .safetensors file in models/sapiens2 (subfolders are fine), or the download entry to "
                        "fetch the official file chosen by task and size (sha256-verified)."
                    ),
                ),
                io.Combo.Input(
                    "download_task",
                    options=list(loader_logic.DOWNLOAD_TASKS),
                    default="pose",
                    tooltip="Task to download when 'checkpoint' is the download entry; ignored otherwise.",
                ),
                io.Combo.Input(
                    "download_size",
                    options=list(loader_logic.DOWNLOAD_SIZES),
                    default="1b",
                    tooltip="Model size to download (0.4b fastest, 5b best); ignored for a local checkpoint.",
                ),
                io.Combo.Input(
                    "dtype",
                    options=list(loader_logic.DTYPE_CHOICES),
                    default="auto",
                    tooltip="auto: bf16 on GPUs that support it (as trained), fp16 on other GPUs, fp32 on the CPU.",
                ),
                io.Combo.Input(
                    "attention",
                    options=list(loader_logic.ATTENTION_CHOICES),
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
        if checkpoint == loader_logic.DOWNLOAD_CHOICE:
            path = loader_logic.download_target(download_task, download_size, comfy_host.model_folders()[0])
        else:
            path = comfy_host.find_checkpoint(checkpoint)
        return loader_logic.checkpoint_fingerprint(path)

    @classmethod
    def execute(cls, checkpoint, download_task, download_size, dtype, attention, compile) -> io.NodeOutput:
        if checkpoint == loader_logic.DOWNLOAD_CHOICE:
            folder = comfy_host.model_folders()[0]
            path = str(loader_logic.download(download_task, download_size, folder))
        else:
            path = comfy_host.resolve_checkpoint(checkpoint)
        compute = comfy_host.compute_device()
        loaded = loader_logic.load_sapiens2(
            path,
            name=checkpoint if checkpoint != loader_logic.DOWNLOAD_CHOICE else None,
            dtype=dtype,
            attention=attention,
            compile_model=compile,
            compute=compute,
            storage=comfy_host.offload_device(),
            bf16_supported=comfy_host.supports_bf16(compute),
        )
        loaded.patcher = comfy_host.make_patcher(loaded.model)
        info = (
            f"{loaded.describe()}\n{loaded.spec.describe()}\n"
            f"dtype {str(loaded.dtype).removeprefix('torch.')}, attention {loaded.attention}, "
            f"compile {'on' if compile else 'off'}, compute device {compute}"
        )
        return io.NodeOutput(loaded, info)


NODES = [Sapiens2ModelLoader]
