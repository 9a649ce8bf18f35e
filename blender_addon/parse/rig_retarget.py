"""Retargeting maths (numpy): move a character's bones the way the captured rig's bones move, whatever its rolls.

Each target bone copies the *change* of its source bone's world orientation since the rest pose, not the
orientation itself: ``target = D_source @ C @ target_rest`` with ``D = source_pose @ source_rest^T``. ``C`` turns the
target bone's rest direction onto the source's (identity for a character in the same T-pose), so an A-pose
character still follows. Root translation is scaled by the ratio of the two rests' hip heights.
"""

from __future__ import annotations

import numpy as np

from .rig_math import shortest_arc
from .rig_names import PRESETS

# Rigify's generated control rig (FK controls) for the canonical bones; the limbs must be switched to FK. The
# spine's FK controls (``spine_fk*``, one per ORG bone, on top of torso/chest) hold what the smooth torso/chest
# blend cannot: the capture's straight spine, which bends at its base where Rigify's blend bends evenly, so
# without them the chest, and the shoulders on it, end up to 3.5 cm away from the capture's. Its tweak
# controls hold each spine bone's twist (an ORG spine bone takes its roll from the tweak at its head, which
# Rigify hangs on the bone below, so without them it twists with its lower neighbour: 10 deg off).
RIGIFY_CONTROLS: dict[str, tuple[str, ...]] = {
    "hips": ("torso", "spine_fk", "tweak_spine"),
    "spine": ("spine_fk.001", "tweak_spine.001"),
    "spine1": ("spine_fk.002", "tweak_spine.002"),
    "spine2": ("chest", "spine_fk.003", "tweak_spine.003"),
    "neck": ("neck",),
    "head": ("head",),
}
for _s in ("L", "R"):
    RIGIFY_CONTROLS.update(
        {
            f"clavicle.{_s}": (f"shoulder.{_s}",),
            f"upper_arm.{_s}": (f"upper_arm_fk.{_s}",),
            f"forearm.{_s}": (f"forearm_fk.{_s}",),
            f"hand.{_s}": (f"hand_fk.{_s}",),
            f"thigh.{_s}": (f"thigh_fk.{_s}",),
            f"shin.{_s}": (f"shin_fk.{_s}",),
            f"foot.{_s}": (f"foot_fk.{_s}",),
            f"toe.{_s}": (f"toe.{_s}",),
        }
    )
    for _f in ("thumb", "index", "middle", "ring", "pinky"):
        for _k in (1, 2, 3):
            RIGIFY_CONTROLS[f"{_f}{_k}.{_s}"] = (PRESETS["RIGIFY"].name(f"{_f}{_k}.{_s}"),)
RIGIFY_FK_SWITCHES = ("upper_arm_parent.L", "upper_arm_parent.R", "thigh_parent.L", "thigh_parent.R")


def auto_mapping(canonical: list[str], source_names: list[str], target_names: list[str]) -> dict[str, str]:
    """target bone -> source bone, matched through the canonical skeleton: any preset's name for a bone (with or
    without a ``mixamorig<n>:`` prefix), or Rigify's control names."""
    target = {_plain(n): n for n in target_names}
    rigify_controls = "torso" in target and "upper_arm_fk.l" in target
    mapping = {}
    for c, source in zip(canonical, source_names):
        if rigify_controls:  # every control of the bone that this Rigify version made
            for control in RIGIFY_CONTROLS.get(c, ()):
                hit = target.get(_plain(control))
                if hit is not None and hit not in mapping:
                    mapping[hit] = source
            continue
        for candidate in (p.name(c) for p in PRESETS.values()):
            hit = target.get(_plain(candidate))
            if hit is not None and hit not in mapping:
                mapping[hit] = source
                break
    return mapping


def _plain(name: str) -> str:
    """Bone name without a Mixamo namespace (``mixamorig:``, ``mixamorig1:``...), lower case."""
    return name.split(":", 1)[-1].lower() if name.lower().startswith("mixamorig") else name.lower()


MAX_REST_DIFFERENCE = np.radians(60.0)


def rest_alignment(target_rest: np.ndarray, source_rest: np.ndarray) -> np.ndarray:
    """(3, 3) world rotation turning the target bone's rest y onto the source bone's rest y.

    Only for a rest-pose difference (an A-pose arm: up to ~45°); a bone pointing elsewhere altogether is a
    control with its own axes (Rigify's ``torso`` lies horizontal), which must copy the change as it is."""
    a, b = target_rest[:, 1], source_rest[:, 1]
    if np.arccos(np.clip(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), -1.0, 1.0)) > MAX_REST_DIFFERENCE:
        return np.eye(3)
    return shortest_arc(a, b)


def target_rotation(
    source_pose: np.ndarray, source_rest: np.ndarray, target_rest: np.ndarray, align: np.ndarray
) -> np.ndarray:
    """World orientation (..., 3, 3) for the target bone in the source's pose."""
    return source_pose @ np.swapaxes(source_rest, -1, -2) @ align @ target_rest
