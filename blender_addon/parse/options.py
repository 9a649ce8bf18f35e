"""Import options as a plain dataclass, so scripts and tests can call the importer without the operator."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class ImportOptions:
    import_mesh: bool = True
    import_points: bool = False
    import_armatures: bool = True
    import_camera: bool = True
    import_background: bool = True
    mesh_stride: int = 1
    depth_threshold: float = 0.05  # relative depth jump that breaks a face; 0 keeps every face
    drop_background: bool = True
    use_normals: bool = True
    color_source: str = "IMAGE"  # "IMAGE" | "ALBEDO" | "NONE": what the material shows
    keypoint_threshold: float = 0.3  # joints below this score are hidden
    keypoint_depth: float = 3.0  # metres, for people without any 3D keypoint
    up_axis: str = "Z"  # "Z" (person upright, camera looks along +Y) | "Y" (pure OpenCV -> Blender camera)
    global_scale: float = 1.0
    mesh_per_frame: bool = False  # sequences: a mesh for every frame (visible on its frame only)
    smoothing: int = 0  # sequences: moving-average window in frames (0 = off)
    # Humanoid rig (parse/rig_*.py, build/rig*.py): a fixed-length, rotation-driven skeleton beside the armature.
    import_rig: bool = False
    rig_naming: str = "MIXAMO"  # "MIXAMO" | "RIGIFY" | "UE" (parse/rig_names.py)
    rig_face: str = "NONE"  # "NONE" | "BONES" | "EMPTIES": the face points, following the head
    rig_smoothing: bool = True  # the solve's speed-adaptive clean-up (off: keypoints followed exactly)
    rig_smoothing_strength: float = 1.0  # 1 = default, 2 = twice as smooth (parse/rig_filters.CleanUp)
    rig_foot_lock: bool = False

    @classmethod
    def from_keywords(cls, keywords: dict) -> ImportOptions:
        """Keep only the fields this dataclass knows (an operator's ``as_keywords()`` has more)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in keywords.items() if k in names})

    def validate(self) -> None:
        if self.mesh_stride < 1:
            raise ValueError(f"mesh_stride must be >= 1, got {self.mesh_stride}")
        if self.global_scale <= 0:
            raise ValueError(f"global_scale must be > 0, got {self.global_scale}")
        if self.up_axis not in ("Y", "Z"):
            raise ValueError(f"up_axis must be 'Y' or 'Z', got {self.up_axis!r}")
        if self.color_source not in ("IMAGE", "ALBEDO", "NONE"):
            raise ValueError(f"color_source must be IMAGE, ALBEDO or NONE, got {self.color_source!r}")
        if self.rig_naming not in ("MIXAMO", "RIGIFY", "UE"):
            raise ValueError(f"rig_naming must be MIXAMO, RIGIFY or UE, got {self.rig_naming!r}")
        if self.rig_face not in ("NONE", "BONES", "EMPTIES"):
            raise ValueError(f"rig_face must be NONE, BONES or EMPTIES, got {self.rig_face!r}")
        if not 0 < self.rig_smoothing_strength <= 10:
            raise ValueError(f"rig_smoothing_strength must be in (0, 10], got {self.rig_smoothing_strength}")
