"""Where the pack's output nodes write: one numbered name inside ComfyUI's output folder per run.

Save Capture Bundle, Export Mesh and Save USD name their files the way ComfyUI's own save nodes do
(`folder_paths.get_save_image_path`: the prefix may hold sub-folders, a counter keeps earlier runs, a path outside
the output folder is refused) and answer with paths relative to that folder, which the UI and the next node take.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class OutputTarget:
    """A run's place in the output folder: `folder` on disk, the prefix's own `filename`, the run's `counter`
    and the `subfolder` the prefix named (relative to the output folder)."""

    folder: str
    filename: str
    counter: int
    subfolder: str

    @property
    def base(self) -> str:
        """The run's unique base name (`capture_00001_`): the writers add frame numbers and the extension."""
        return f"{self.filename}_{self.counter:05}_"

    def relative(self, path: str | os.PathLike) -> str:
        """A file written into `folder`, as the output folder's relative path (forward slashes on every OS)."""
        return os.path.join(self.subfolder, os.path.basename(path)).replace("\\", "/")


def output_target(prefix: str, width: int, height: int) -> OutputTarget:
    """The next free numbered name for `prefix` (`width`/`height` fill ComfyUI's %width%/%height%)."""
    import folder_paths

    folder, filename, counter, subfolder, _ = folder_paths.get_save_image_path(
        prefix, folder_paths.get_output_directory(), width, height
    )
    return OutputTarget(folder, filename, counter, subfolder)
