"""Sapiens2 ComfyUI nodes (V3 schema).  Nothing here imports ComfyUI until ComfyUI calls ``comfy_entrypoint``.

Each ``nodes_*`` module is imported on its own: if a host lacks something one module needs, only that module's
nodes are skipped (with a warning naming the reason), never the whole pack.
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger("sapiens2")

NODE_MODULES = ("nodes_model", "nodes_pose", "nodes_seg", "nodes_dense", "nodes_relight", "nodes_export")


def load_node_classes() -> list[type]:
    """Import every node module and keep the classes whose schema this host accepts."""
    classes: list[type] = []
    for name in NODE_MODULES:
        try:
            module = importlib.import_module(f".{name}", __name__)
        except Exception as exc:  # a host too old for one module must not take the pack down
            log.warning(
                "Sapiens2: skipping the nodes of %s on this ComfyUI: %s: %s", name, type(exc).__name__, exc
            )
            continue
        for cls in module.NODES:
            try:
                cls.define_schema().validate()
            except Exception as exc:
                log.warning(
                    "Sapiens2: skipping node %s on this ComfyUI: %s: %s",
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
