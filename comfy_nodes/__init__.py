"""Sapiens2 ComfyUI nodes (V3 schema). Nothing here imports ComfyUI until ComfyUI calls ``comfy_entrypoint``.

Each ``nodes_*`` module is imported on its own, so a host that lacks something one module needs loses only that
module's nodes. Such a failure is logged as an error with its traceback and the names of the nodes it took down
(a node whose schema this host rejects costs that node alone).
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger("sapiens2")

# Module → the nodes it defines (named here so that a module that fails to import can say what is missing).
NODE_MODULES: dict[str, tuple[str, ...]] = {
    "nodes_model": ("Load Sapiens2 Model",),
    "nodes_pose": ("Sapiens2 Pose", "Sapiens2 Draw Pose"),
    "nodes_seg": ("Sapiens2 Segment", "Sapiens2 Body-Part Mask"),
    "nodes_dense": ("Sapiens2 Normals", "Sapiens2 Albedo", "Sapiens2 Pointmap"),
    "nodes_matting": ("Sapiens2 Matte",),
    "nodes_relight": ("Sapiens2 Directional Light", "Sapiens2 Relight"),
    "nodes_export": ("Sapiens2 Save Capture Bundle", "Sapiens2 Export Mesh"),
    "nodes_usd": ("Sapiens2 Save USD",),
    "nodes_task": ("Sapiens2 Run Task",),
}


def load_node_classes() -> list[type]:
    """Import every node module and keep the classes whose schema this host accepts."""
    classes: list[type] = []
    for name, nodes in NODE_MODULES.items():
        try:
            module = importlib.import_module(f".{name}", __name__)
        except Exception:  # one broken module must not take the pack down; say loudly what it cost
            log.exception(
                "Sapiens2: module %s failed to import on this ComfyUI; these nodes are missing: %s",
                name,
                ", ".join(nodes),
            )
            continue
        for cls in module.NODES:
            try:
                cls.define_schema().validate()
            except Exception as exc:
                log.error(
                    "Sapiens2: skipping node %s on this ComfyUI (its schema is not accepted): %s: %s",
                    cls.__name__,
                    type(exc).__name__,
                    exc,
                )
                continue
            classes.append(cls)
    return classes


async def comfy_entrypoint():
    """ComfyUI V3 entry point: an extension listing every Sapiens2 node this host supports."""
    from comfy_api.latest import ComfyExtension

    from . import comfy_host

    comfy_host.register_model_folder()

    class Sapiens2Extension(ComfyExtension):
        async def get_node_list(self) -> list[type]:
            return load_node_classes()

    return Sapiens2Extension()
