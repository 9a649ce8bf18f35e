"""What the nodes' combo widgets show → the core option each label stands for.

Labels are part of saved workflows (ComfyUI stores widget values as text), so they change only with a migration.
"""

from __future__ import annotations

# The first label is the default for new nodes. "openpose" was added as the default after the other two, whose
# saved values keep producing what they always did.
POSE_FORMATS = {
    "openpose (1/0 confidence, feet: core + controlnet_aux)": "openpose",
    "core (real scores)": "comfyui",
    "controlnet_aux (1/0 confidence)": "controlnet_aux",
}
NECK_MODES = {
    "auto": "auto",
    "shoulder midpoint": "shoulder_midpoint",
    "anatomical (Sapiens2 neck)": "anatomical",
}
# A frame where seg_model finds nobody: the whole image is one person, or nobody.
NOBODY = {"whole image": "image", "no people": "empty"}
NOBODY_DEFAULT = "whole image"
NORMAL_CONVENTIONS = {
    "opengl (blender camera, y up)": "opengl",
    "controlnet (BAE colours)": "controlnet",
    "directx (y down)": "directx",
    "opencv (camera frame, y down)": "opencv",
}


def first(labels: dict[str, str]) -> str:
    """The default label (the first)."""
    return next(iter(labels))


def lookup(labels: dict[str, str], label: str, what: str) -> str:
    """The core option of a widget label; a clear error for a value no version of the node offered."""
    from ..core.studio.errors import StudioError

    if label not in labels:
        raise StudioError(f"unknown {what} {label!r}; choose one of {', '.join(labels)}")
    return labels[label]
