"""Bone-naming presets: the rig's canonical bones under Mixamo, Rigify-metarig and UE-mannequin names.

Names follow each convention as published (Mixamo's ``mixamorig:`` skeleton, Rigify's human metarig, Unreal's
mannequin skeleton), so retargeting tools and those rigs' own workflows match bones by name. Rigify also needs
rig types on a few bones of a metarig (``rigify_types``) and a heel bone under each foot; the UE mannequin has a
``root`` bone on the ground above which the pelvis moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .rig_skeleton import FINGERS

_MIXAMO_FINGER = {"thumb": "Thumb", "index": "Index", "middle": "Middle", "ring": "Ring", "pinky": "Pinky"}
_RIGIFY_FINGER = {
    "thumb": "thumb",
    "index": "f_index",
    "middle": "f_middle",
    "ring": "f_ring",
    "pinky": "f_pinky",
}


@dataclass(frozen=True)
class NamingPreset:
    key: str
    label: str
    names: dict[str, str]  # canonical -> preset name
    with_root: bool = False
    with_heel: bool = False
    rigify_types: dict[str, str] = field(default_factory=dict)  # canonical -> rigify_type
    rest_bend: float = 0.0  # degrees of elbow/knee flexion in the rest pose

    def name(self, canonical: str) -> str:
        return self.names.get(canonical, canonical)


def _mixamo() -> dict[str, str]:
    names = {
        "hips": "Hips",
        "spine": "Spine",
        "spine1": "Spine1",
        "spine2": "Spine2",
        "neck": "Neck",
        "head": "Head",
    }
    for side, word in (("L", "Left"), ("R", "Right")):
        names.update(
            {
                f"clavicle.{side}": f"{word}Shoulder",
                f"upper_arm.{side}": f"{word}Arm",
                f"forearm.{side}": f"{word}ForeArm",
                f"hand.{side}": f"{word}Hand",
                f"thigh.{side}": f"{word}UpLeg",
                f"shin.{side}": f"{word}Leg",
                f"foot.{side}": f"{word}Foot",
                f"toe.{side}": f"{word}ToeBase",
            }
        )
        for finger in FINGERS:
            for k in (1, 2, 3):
                names[f"{finger}{k}.{side}"] = f"{word}Hand{_MIXAMO_FINGER[finger]}{k}"
    return {c: f"mixamorig:{n}" for c, n in names.items()}


def _rigify() -> dict[str, str]:
    names = {
        "hips": "spine",
        "spine": "spine.001",
        "spine1": "spine.002",
        "spine2": "spine.003",
        "neck": "spine.004",
        "head": "spine.006",  # Rigify's human metarig: spine.004-.005 are the neck, spine.006 the head
    }
    for side in ("L", "R"):
        names.update(
            {
                f"clavicle.{side}": f"shoulder.{side}",
                f"upper_arm.{side}": f"upper_arm.{side}",
                f"forearm.{side}": f"forearm.{side}",
                f"hand.{side}": f"hand.{side}",
                f"thigh.{side}": f"thigh.{side}",
                f"shin.{side}": f"shin.{side}",
                f"foot.{side}": f"foot.{side}",
                f"toe.{side}": f"toe.{side}",
                f"heel.{side}": f"heel.02.{side}",
            }
        )
        for finger in FINGERS:
            for k in (1, 2, 3):
                names[f"{finger}{k}.{side}"] = f"{_RIGIFY_FINGER[finger]}.0{k}.{side}"
    return names


def _rigify_types() -> dict[str, str]:
    types = {"hips": "spines.basic_spine", "neck": "spines.super_head"}
    for side in ("L", "R"):
        types[f"clavicle.{side}"] = "basic.super_copy"
        types[f"upper_arm.{side}"] = "limbs.arm"
        types[f"thigh.{side}"] = "limbs.leg"
        types.update({f"{finger}1.{side}": "limbs.super_finger" for finger in FINGERS})
    return types


def _unreal() -> dict[str, str]:
    names = {
        "root": "root",
        "hips": "pelvis",
        "spine": "spine_01",
        "spine1": "spine_02",
        "spine2": "spine_03",
        "neck": "neck_01",
        "head": "head",
    }
    for side, s in (("L", "l"), ("R", "r")):
        names.update(
            {
                f"clavicle.{side}": f"clavicle_{s}",
                f"upper_arm.{side}": f"upperarm_{s}",
                f"forearm.{side}": f"lowerarm_{s}",
                f"hand.{side}": f"hand_{s}",
                f"thigh.{side}": f"thigh_{s}",
                f"shin.{side}": f"calf_{s}",
                f"foot.{side}": f"foot_{s}",
                f"toe.{side}": f"ball_{s}",
            }
        )
        for finger in FINGERS:
            for k in (1, 2, 3):
                names[f"{finger}{k}.{side}"] = f"{finger}_0{k}_{s}"
    return names


PRESETS: dict[str, NamingPreset] = {
    "MIXAMO": NamingPreset("MIXAMO", "Mixamo", _mixamo()),
    "RIGIFY": NamingPreset(
        "RIGIFY", "Rigify metarig", _rigify(), with_heel=True, rigify_types=_rigify_types(), rest_bend=6.0
    ),
    "UE": NamingPreset("UE", "UE mannequin", _unreal(), with_root=True),
}

# Chain bones whose head sits on the parent's tail and that rigs expect connected (Rigify finds its chains so).
CONNECTED = (
    {"spine", "spine1", "spine2", "head"}
    | {f"{b}.{s}" for s in ("L", "R") for b in ("forearm", "hand", "shin", "foot", "toe")}
    | {f"{f}{k}.{s}" for s in ("L", "R") for f in FINGERS for k in (2, 3)}
)


def preset(key: str) -> NamingPreset:
    try:
        return PRESETS[key]
    except KeyError:
        raise ValueError(f"rig naming must be one of {sorted(PRESETS)}, got {key!r}") from None
