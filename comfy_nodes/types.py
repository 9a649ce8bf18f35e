"""Socket type names and the Python values that travel on them (no ComfyUI imports).

A ComfyUI type is only a string matched by equality, so these names are the pack's public contract: renaming one
breaks saved workflows.  Values are plain Python/torch objects; every tensor lives on ComfyUI's intermediate device
(the CPU unless ``--gpu-only``), one entry per image of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MODEL = "SAPIENS2_MODEL"  # LoadedModel
POSE = "SAPIENS2_POSE"  # TaskBatch of PoseResult: raw 308 keypoints per person, per image
SEG = "SAPIENS2_SEG"  # TaskBatch of SegResult: int64 class ids (H, W) per image
NORMAL = "SAPIENS2_NORMAL"  # TaskBatch of NormalResult: unit float normals, OpenCV camera frame
POINTMAP = "SAPIENS2_POINTMAP"  # TaskBatch of PointmapResult: metric XYZ + scale + intrinsics
LIGHTS = "SAPIENS2_LIGHTS"  # tuple[DirectionalLight, ...]
POSE_KEYPOINT = "POSE_KEYPOINT"  # ComfyUI / controlnet_aux OpenPose frames (list of dicts)
BOUNDING_BOX = "BOUNDING_BOX"  # ComfyUI core boxes: per image a list of {x, y, width, height}

TASKS = ("pose", "seg", "normal", "albedo", "pointmap")
TASK_LABELS = {
    "pose": "pose (308 keypoints)",
    "seg": "segmentation (29 body parts)",
    "normal": "surface normals",
    "albedo": "albedo",
    "pointmap": "pointmap / depth",
    "pretrain": "pretrained backbone (no task head)",
}


@dataclass
class LoadedModel:
    """What the loader node hands to task nodes.

    ``model`` is the eval-mode ``Sapiens2Model`` (weights resting on ``offload_device`` until a task node asks for
    them); ``patcher`` is ComfyUI's ``ModelPatcher`` around it when running inside ComfyUI (None in scripts), so
    ComfyUI can evict it like any other model.  ``compiled`` is the ``torch.compile``d forward, or None.
    """

    model: Any
    task: str
    spec: Any
    checkpoint: str
    sha256: str | None = None
    dtype: Any = None
    attention: str = "sdpa"
    compile: bool = False
    patcher: Any = None
    compiled: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"Sapiens2 {self.spec.size} {TASK_LABELS.get(self.task, self.task)} from {self.checkpoint}"

    def model_record(self) -> dict[str, Any]:
        """The capture-bundle ``models`` entry; ``path`` lets the exporter hash the file only when it is needed."""
        return {
            "task": self.task,
            "size": self.spec.size,
            "checkpoint": self.checkpoint,
            "sha256": self.sha256,
            "path": self.extra.get("path"),
        }


@dataclass
class TaskBatch:
    """Results of one task for a whole image batch (one entry per image) and the model that made them."""

    task: str
    results: list[Any]
    model: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.results)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the images, read from the first result."""
        first = self.results[0]
        if hasattr(first, "image_size"):
            return tuple(first.image_size)
        for name in ("labels", "normals", "albedo", "points"):
            value = getattr(first, name, None)
            if value is not None:
                return int(value.shape[1]), int(value.shape[0])
        raise ValueError(f"cannot tell the image size of a {self.task} result")


def require_batch(value: Any, task: str, node: str, socket: str) -> TaskBatch:
    """A clear error when a socket gets the wrong kind of Sapiens2 data (or none)."""
    if not isinstance(value, TaskBatch) or value.task != task:
        got = value.task if isinstance(value, TaskBatch) else type(value).__name__
        raise TypeError(f"{node}: '{socket}' needs Sapiens2 {TASK_LABELS[task]} results, got {got}")
    if len(value) == 0:
        raise ValueError(f"{node}: '{socket}' holds no images (empty batch)")
    return value


def require_task(loaded: Any, task: str, node: str) -> LoadedModel:
    """Raise a clear error when a node gets no model, or a model of another task."""
    if not isinstance(loaded, LoadedModel):
        raise TypeError(
            f"{node} needs a {MODEL} from 'Load Sapiens2 Model', got {type(loaded).__name__}; "
            "connect the loader's output to this node"
        )
    if loaded.task != task:
        raise ValueError(
            f"{node} needs a Sapiens2 {TASK_LABELS[task]} model, but the connected model is "
            f"{TASK_LABELS.get(loaded.task, loaded.task)} ({loaded.checkpoint}); load a *_{task} checkpoint "
            f"(task '{task}') in 'Load Sapiens2 Model'"
        )
    return loaded
