"""Sapiens2 Studio: Meta's Sapiens2 models for ComfyUI, Blender and the command line.

ComfyUI imports this folder as a package and looks for ``comfy_entrypoint``; pip installs the same folder as
``sapiens2_studio``.  The ComfyUI part is imported only when ComfyUI asks for it, so the core and the CLI never
import ComfyUI.
"""

__version__ = "0.1.0"


async def comfy_entrypoint():
    """ComfyUI V3 entry point: return the extension that lists every Sapiens2 node."""
    from .comfy_nodes import comfy_entrypoint as _entry

    return await _entry()
