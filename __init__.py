"""Sapiens2 Studio: Meta's Sapiens2 models for ComfyUI, Blender and the command line.

ComfyUI imports this folder as a package and looks for ``comfy_entrypoint``; pip installs the same folder as
``sapiens2_studio``.  The ComfyUI part is imported only when ComfyUI asks for it, so the core and the CLI never
import ComfyUI.
"""

__version__ = "0.1.0"


def _alias_as_sapiens2_studio() -> None:
    """Under ComfyUI this package is imported under a path-like name, not ``sapiens2_studio``. Task plug-ins
    (docs/tasks.md) import ``sapiens2_studio``; an import finder maps that name and its submodules to this very
    package, so a plug-in shares the pack's modules (one registry, one engine) instead of needing a second copy
    of the project installed into ComfyUI's Python."""
    import importlib
    import importlib.abc
    import importlib.util
    import sys

    alias, real = "sapiens2_studio", __name__

    class _Loader(importlib.abc.Loader):
        def __init__(self, target: str) -> None:
            self.target = target

        def create_module(self, spec):  # the pack's own module object, not a copy
            module = importlib.import_module(self.target)
            self.spec = module.__spec__
            return module

        def exec_module(self, module) -> None:
            module.__spec__ = self.spec  # importlib set the alias's spec on it; the module keeps its own

    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != alias and not fullname.startswith(alias + "."):
                return None
            return importlib.util.spec_from_loader(fullname, _Loader(real + fullname[len(alias) :]))

    sys.meta_path.insert(0, _Finder())


def _needs_alias() -> bool:
    """Imported under another name, and no installed ``sapiens2_studio`` to import instead."""
    import importlib.util

    return __name__ != "sapiens2_studio" and importlib.util.find_spec("sapiens2_studio") is None


if _needs_alias():
    _alias_as_sapiens2_studio()


async def comfy_entrypoint():
    """ComfyUI V3 entry point: return the extension that lists every Sapiens2 node."""
    from .comfy_nodes import comfy_entrypoint as _entry

    return await _entry()
