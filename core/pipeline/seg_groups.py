"""Named groups of the 29 body-part classes (one table), and mask helpers.

Group names are what the ComfyUI Mask node and the CLI offer; the try-on presets follow what virtual try-on
graphs repaint (clothes plus the skin they may uncover, never hands or face).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from .errors import UnknownSegClassError
from .metadata import seg_class_names

# group name → class names (exact names from core/data/seg29.json)
SEG_GROUPS: dict[str, tuple[str, ...]] = {
    "background": ("Background",),
    "person": tuple(n for n in seg_class_names() if n != "Background"),
    "upper_clothes": ("Upper_Clothing",),
    "lower_clothes": ("Lower_Clothing",),
    "apparel": ("Apparel",),
    "clothes": ("Apparel", "Upper_Clothing", "Lower_Clothing"),
    "full_outfit": (
        "Apparel",
        "Upper_Clothing",
        "Lower_Clothing",
        "Left_Shoe",
        "Right_Shoe",
        "Left_Sock",
        "Right_Sock",
    ),
    "skin": (
        "Face_Neck",
        "Torso",
        "Left_Upper_Arm",
        "Right_Upper_Arm",
        "Left_Lower_Arm",
        "Right_Lower_Arm",
        "Left_Hand",
        "Right_Hand",
        "Left_Upper_Leg",
        "Right_Upper_Leg",
        "Left_Lower_Leg",
        "Right_Lower_Leg",
        "Left_Foot",
        "Right_Foot",
        "Upper_Lip",
        "Lower_Lip",
    ),
    "face": ("Face_Neck", "Upper_Lip", "Lower_Lip", "Upper_Teeth", "Lower_Teeth", "Tongue"),
    "head": (
        "Face_Neck",
        "Hair",
        "Eyeglass",
        "Upper_Lip",
        "Lower_Lip",
        "Upper_Teeth",
        "Lower_Teeth",
        "Tongue",
    ),
    "hair": ("Hair",),
    "eyeglasses": ("Eyeglass",),
    "torso": ("Torso",),
    "arms": (
        "Left_Upper_Arm",
        "Right_Upper_Arm",
        "Left_Lower_Arm",
        "Right_Lower_Arm",
        "Left_Hand",
        "Right_Hand",
    ),
    "arms_without_hands": ("Left_Upper_Arm", "Right_Upper_Arm", "Left_Lower_Arm", "Right_Lower_Arm"),
    "left_arm": ("Left_Upper_Arm", "Left_Lower_Arm", "Left_Hand"),
    "right_arm": ("Right_Upper_Arm", "Right_Lower_Arm", "Right_Hand"),
    "hands": ("Left_Hand", "Right_Hand"),
    "legs": ("Left_Upper_Leg", "Right_Upper_Leg", "Left_Lower_Leg", "Right_Lower_Leg"),
    "left_leg": ("Left_Upper_Leg", "Left_Lower_Leg"),
    "right_leg": ("Right_Upper_Leg", "Right_Lower_Leg"),
    "feet": ("Left_Foot", "Right_Foot"),
    "shoes": ("Left_Shoe", "Right_Shoe"),
    "socks": ("Left_Sock", "Right_Sock"),
    "feet_and_shoes": ("Left_Foot", "Right_Foot", "Left_Shoe", "Right_Shoe", "Left_Sock", "Right_Sock"),
    "lips": ("Upper_Lip", "Lower_Lip"),
    "mouth": ("Upper_Lip", "Lower_Lip", "Upper_Teeth", "Lower_Teeth", "Tongue"),
    "teeth": ("Upper_Teeth", "Lower_Teeth"),
    # try-on presets: what a garment swap repaints
    "tryon_upper": (
        "Upper_Clothing",
        "Apparel",
        "Torso",
        "Left_Upper_Arm",
        "Right_Upper_Arm",
        "Left_Lower_Arm",
        "Right_Lower_Arm",
    ),
    "tryon_lower": (
        "Lower_Clothing",
        "Left_Upper_Leg",
        "Right_Upper_Leg",
        "Left_Lower_Leg",
        "Right_Lower_Leg",
    ),
    "tryon_full": (
        "Upper_Clothing",
        "Lower_Clothing",
        "Apparel",
        "Torso",
        "Left_Upper_Arm",
        "Right_Upper_Arm",
        "Left_Lower_Arm",
        "Right_Lower_Arm",
        "Left_Upper_Leg",
        "Right_Upper_Leg",
        "Left_Lower_Leg",
        "Right_Lower_Leg",
    ),
}


def class_id(name_or_id: str | int) -> int:
    """A class name (case-insensitive, '-'/' ' accepted for '_') or id → id 0..28."""
    names = seg_class_names()
    if isinstance(name_or_id, int) and not isinstance(name_or_id, bool):
        if 0 <= name_or_id < len(names):
            return int(name_or_id)
        raise UnknownSegClassError(f"class id {name_or_id} is out of range 0..{len(names) - 1}")
    key = str(name_or_id).strip().lower().replace("-", "_").replace(" ", "_")
    for i, n in enumerate(names):
        if n.lower() == key:
            return i
    raise UnknownSegClassError(
        f"unknown segmentation class {name_or_id!r}; known classes: {', '.join(names)}"
    )


def group_class_ids(group: str) -> tuple[int, ...]:
    """Class ids of a named group (see `SEG_GROUPS`)."""
    key = group.strip().lower().replace("-", "_").replace(" ", "_")
    if key not in SEG_GROUPS:
        raise UnknownSegClassError(
            f"unknown segmentation group {group!r}; known groups: {', '.join(SEG_GROUPS)}"
        )
    return tuple(sorted(class_id(n) for n in SEG_GROUPS[key]))


def resolve_classes(selection: str | int | Iterable[str | int]) -> tuple[int, ...]:
    """Group names, class names or ids (single or many) → sorted unique class ids."""
    items = [selection] if isinstance(selection, (str, int)) else list(selection)
    ids: set[int] = set()
    for item in items:
        if isinstance(item, str) and item.strip().lower().replace("-", "_").replace(" ", "_") in SEG_GROUPS:
            ids.update(group_class_ids(item))
        else:
            ids.add(class_id(item))
    return tuple(sorted(ids))


def labels_to_mask(labels: Tensor, selection: str | int | Iterable[str | int]) -> Tensor:
    """(…, H, W) int labels → bool mask of the selected classes/groups."""
    ids = torch.tensor(resolve_classes(selection), dtype=labels.dtype, device=labels.device)
    return torch.isin(labels, ids)
