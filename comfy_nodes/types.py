"""Socket type names: the pack's public contract (a ComfyUI type is a string matched by equality, so renaming one
breaks saved workflows). The values on the sockets are core.studio's objects: SAPIENS2_MODEL carries a
`LoadedModel`, the task sockets a `TaskBatch` (one result per image, tensors on ComfyUI's intermediate device)."""

from __future__ import annotations

MODEL = "SAPIENS2_MODEL"  # core.studio.LoadedModel
POSE = "SAPIENS2_POSE"  # TaskBatch of PoseResult: raw 308 keypoints per person, per image
SEG = "SAPIENS2_SEG"  # TaskBatch of SegResult: class ids (H, W) per image
NORMAL = "SAPIENS2_NORMAL"  # TaskBatch of NormalResult: unit float normals, canonical (OpenCV) camera frame
POINTMAP = "SAPIENS2_POINTMAP"  # TaskBatch of PointmapResult: metric XYZ + scale + intrinsics
MATTING = (
    "SAPIENS2_MATTING"  # TaskBatch of MattingResult: soft alpha + pre-multiplied and straight foreground
)
TASK_RESULTS = "SAPIENS2_TASK_RESULTS"  # TaskBatch of any registered task's results (Sapiens2 Run Task)
LIGHTS = "SAPIENS2_LIGHTS"  # tuple[DirectionalLight, ...]
POSE_KEYPOINT = "POSE_KEYPOINT"  # ComfyUI / controlnet_aux OpenPose frames (list of dicts)
BOUNDING_BOX = "BOUNDING_BOX"  # ComfyUI core boxes: per image a list of {x, y, width, height}
