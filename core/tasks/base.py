"""The one Task interface: everything the rest of the system asks about a task, declared in one object.

Why: a task used to be a thread through the code (if-chains comparing task names in capture, carry, previews,
estimates, the bundle writer, the CLI). Now each task is one module holding one `Task` subclass; the engine,
writers, previews, estimates and front-ends ask the registry (`core.tasks.registry`) for it and read these
attributes and methods instead of naming tasks. A user's fine-tuned head for a new task implements the same
class (see docs/tasks.md) and registers through an entry point or `SAPIENS2_TASK_MODULES`.

This module imports no torch or numpy (the CLI's parser reads the registry and must stay instant); task modules
import their heavy dependencies inside methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

HEAD_KINDS = ("heatmap", "dense")


@dataclass(frozen=True)
class Layer:
    """One bundle EXR layer a task writes.

    name: the layer's id (also the key of the disk estimate); channels: EXR channel names; pixel_type: "half" |
    "float"; bytes_per_pixel: compression ("none", "zip", "zips") → bytes per pixel on disk, measured on real
    runs (`core.studio.jobs.estimate`); meaning: one line for the bundle JSON and docs.
    """

    name: str
    channels: tuple[str, ...]
    pixel_type: str = "half"
    bytes_per_pixel: Mapping[str, float] = field(default_factory=dict)
    meaning: str = ""


# A preview's drawer: (frame, image) → a callable that makes the preview's uint8 pixels, or None where the frame
# has nothing to draw (the pixels are made only when the writer asks, so a skipped preview costs nothing).
DrawFn = Callable[[Any, Any], "Callable[[], Any] | None"]


@dataclass(frozen=True)
class Preview:
    """One PNG preview a task draws: file suffix (`<name>.<suffix>.png`) and bytes per pixel on disk.

    How it is drawn: `draw(frame, image)` when given (a plug-in's own drawer), else the studio's drawer of `kind`
    ("skeleton", "classes", "normals", "depth", "colour", "matte", "cutout") over the frame attribute `source`.
    rank: order of the previews a frame writes (lower first).
    """

    suffix: str
    bytes_per_pixel: float
    kind: str = ""
    source: str = ""
    rank: int = 100
    draw: DrawFn | None = None
    over_image: bool = False  # drawn over the input image (a redraw after the temporal pass needs the image)


@dataclass
class PredictContext:
    """What one task's `predict` gets besides its module and images, for one batch (the engine chunks).

    needs: results of the tasks this one `needs` (task → one result per image of the batch), when they ran or were
    given; masks: per-image person masks for dense tasks (a bool tensor, or a seg result), overriding `needs`;
    boxes: per-image person boxes (None per image: find them); start: the batch's first image index in the run.
    options: task-specific options a front-end passes through (plug-ins read theirs here).
    """

    device: Any = None
    output_device: Any = "cpu"
    should_stop: Callable[[], Any] | None = None
    needs: dict[str, list[Any]] = field(default_factory=dict)
    masks: Sequence[Any] | None = None
    boxes: Sequence[Any] | None = None
    flip_test: bool = True
    if_no_person: str = "image"
    keep_logits: bool = False
    bands_above: int | None = None
    start: int = 0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoreContext:
    """What `Task.store` gets besides the frame and its result: `consume` (the caller hands the result over, so it
    may be reused in place instead of copied) and the frame's person mask as decided so far."""

    consume: bool = False
    mask: Any = None


class Task:
    """One task: set the class attributes, override the methods your task needs (defaults do nothing).

    Facts:
      name: the id in the CLI (`--tasks`), the API and the bundle's `models[].task`; label: front-end label;
      batch_field: the Python/ComfyUI input name of its results; run_rank: order in a multi-task run (lower
      first); list_rank: order in listings; needs: tasks whose results it uses when they run (pose uses seg for
      its boxes); released: sizes with official files; unreleased_reason: why there are none; default_in_cli:
      part of the CLI's default `--tasks`.
    Head: output_conv (the task's head is `decode_head.<output_conv>.weight`), head_kind ("heatmap" | "dense"),
      out_channels (None: any).
    Capture: layers (bundle EXR layers), previews, json_fields (JSON keys it adds per frame), temporal (the
      sequence pass changes it), mask_rank (where its result can give the frame's person mask: lower wins; None:
      never), geometry_input (the keyword of `check_geometry` its result feeds in the cross-task self-checks:
      "normals", "pointmap" or "pose"; None: not checked).
    """

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    noun: ClassVar[str] = ""  # the word messages use ("a segmentation file"); the name when empty
    batch_field: ClassVar[str] = ""
    run_rank: ClassVar[int] = 100
    list_rank: ClassVar[int] = 100
    needs: ClassVar[tuple[str, ...]] = ()
    released: ClassVar[tuple[str, ...]] = ()
    unreleased_reason: ClassVar[str | None] = None
    default_in_cli: ClassVar[bool] = False
    builtin: ClassVar[bool] = False

    output_conv: ClassVar[str] = ""
    head_kind: ClassVar[str] = "dense"
    out_channels: ClassVar[int | None] = None

    layers: ClassVar[tuple[Layer, ...]] = ()
    previews: ClassVar[tuple[Preview, ...]] = ()
    json_fields: ClassVar[tuple[str, ...]] = ()
    temporal: ClassVar[bool] = False
    mask_rank: ClassVar[int | None] = None
    geometry_input: ClassVar[str | None] = None
    frame_arrays: ClassVar[
        tuple[str, ...]
    ] = ()  # the CaptureFrame attributes of its per-pixel data (H, W[, C])

    def __init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise TypeError(f"{type(self).__name__}.name must be a non-empty identifier, got {self.name!r}")
        if self.head_kind not in HEAD_KINDS:
            raise TypeError(
                f"{type(self).__name__}.head_kind must be one of {HEAD_KINDS}, got {self.head_kind!r}"
            )

    @property
    def field(self) -> str:
        """The input/attribute name of its results (batch_field, or the name)."""
        return self.batch_field or self.name

    def __repr__(self) -> str:
        return f"<task {self.name!r} ({type(self).__module__}.{type(self).__qualname__})>"

    # ---------------------------------------------------------------------------------------------- the head
    def matches_head(self, head_shapes: Mapping[str, Sequence[int]]) -> bool:
        """Whether a checkpoint's head (`decode_head.` keys without the prefix) is this task's head."""
        return bool(self.output_conv) and f"{self.output_conv}.weight" in head_shapes

    def check_head(self, head_shapes: Mapping[str, Sequence[int]]) -> None:
        """Refuse a head that is not this task's, naming the mismatching tensors (before any image is read)."""
        from ..checkpoints.errors import CheckpointError

        key = f"{self.output_conv}.weight"
        if key not in head_shapes:
            convs = sorted(
                k
                for k in head_shapes
                if k.startswith("conv_") and k.count(".") == 1 and k.endswith(".weight")
            )
            found = ", ".join(f"decode_head.{k}" for k in convs) or "no output conv"
            raise CheckpointError(
                f"the {self.name} task needs decode_head.{key} but the checkpoint's head has {found}; "
                f"this is not a {self.name} checkpoint"
            )
        shape = tuple(head_shapes[key])
        if self.out_channels is not None and shape[0] != self.out_channels:
            raise CheckpointError(
                f"decode_head.{key} has shape {shape}: {shape[0]} output channels, but the {self.name} task "
                f"expects {self.out_channels}"
            )

    # ------------------------------------------------------------------------------------------- predicting
    def predict(self, module: Any, images: Sequence[Any], ctx: PredictContext) -> list[Any]:
        """One result per image of one batch (pre-processing, forward, post-processing); no chunking here."""
        raise NotImplementedError(f"the {self.name} task does not implement predict()")

    def result_size(self, result: Any) -> tuple[int, int] | None:
        """(width, height) of a result, for checking it belongs to its image; None: not known."""
        return None

    def nonfinite(self, result: Any) -> int:
        """How many NaN/inf values a result holds (0: none, or not checked)."""
        return 0

    def warnings(self, result: Any) -> Sequence[str]:
        """Per-result warnings the engine reports once per kind (e.g. 'found no person')."""
        return getattr(result, "warnings", None) or ()

    # ---------------------------------------------------------------------------------------------- capture
    def person_mask(self, frame: Any) -> Any:
        """The person mask (H, W) float32 this task's stored data gives a frame, for tasks with a `mask_rank`."""
        return None

    def from_frame(self, frame: Any) -> Any:
        """The stored data of a frame as a result, for tasks others `need` when it is carried over; None: not."""
        return None

    def batch_notes(self, results: list[Any], names: list[str]) -> list[str]:
        """Notes about a batch's results besides non-finite values (e.g. a fallback the frames record)."""
        return []

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        """Put the result into a capture frame (a plug-in task: `frame.extra[self.name][channel] = (H, W) array`)."""

    def own_layers(self, frame: Any) -> list[str]:
        """The frame's task layers (`frame.extra`) this task wrote: declared with its name as `task`, or named
        after it."""
        declared = getattr(frame, "task_layers", None) or {}
        mine = []
        for layer in getattr(frame, "extra", None) or {}:
            spec = declared.get(layer)
            task = spec.get("task") if isinstance(spec, Mapping) else getattr(spec, "task", None)
            if (task or layer) == self.name:
                mine.append(layer)
        return mine

    def carry(self, frame: Any, old: Any) -> None:
        """Copy this task's data from a verified old frame into a new one (a re-run of other tasks keeps it): by
        default its task layers, each with its declaration."""
        for layer in self.own_layers(old):
            frame.extra[layer] = dict(old.extra[layer])
            if layer in (old.task_layers or {}):
                frame.task_layers[layer] = old.task_layers[layer]

    def stored(self, frame: Any) -> bool:
        """Whether a frame holds this task's data."""
        return bool(self.own_layers(frame))

    def check_stored(self, frame: Any) -> list[str]:
        """What is wrong with this task's data in a frame read back from its bundle (empty: complete), for the
        self-test: by default its per-pixel arrays (`frame_arrays`) must all be there at the frame's size."""
        size = (frame.height, frame.width)
        arrays = [getattr(frame, name, None) for name in self.frame_arrays]
        if any(a is None or a.shape[:2] != size for a in arrays):
            return [f"the {self.name} layers are missing or of another size"]
        return []

    # ----------------------------------------------------------------------------------------- ONNX export
    # The exported graph's outputs in order, as (name, meaning) pairs (the PyTorch head's outputs; the meaning
    # is written into the file for readers in any language); empty: the head cannot be exported.
    onnx_outputs: ClassVar[tuple[tuple[str, str], ...]] = ()

    def onnx_props(self) -> dict[str, Any]:
        """Extra `sapiens2.*` metadata an exported file of this task carries so a reader can interpret its outputs
        (class or keypoint names, coordinate frames); JSON-able values."""
        return {}

    mesh: ClassVar[bool] = False  # whether the frame's mesh export is made from this task's data
    mesh_normals: ClassVar[bool] = False  # whether the mesh takes its vertex normals from this task's data

    # ----------------------------------------------------------------------------------------- resume
    def run_settings(
        self, *, flip_test: bool, boxes: Any, smooth: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The settings a frame's run record keeps for this task (`run.settings[name]`; a re-run with other
        settings recomputes it); None: none recorded. `smooth`: {"smooth": bool} in a sequence, else {}."""
        return None

    def held_settings(self, held: set[str], boxes_given: bool) -> dict[str, Any]:
        """Settings that depend on which tasks a frame holds (pose: where its boxes came from)."""
        return {}

    def follows(self, computed: set[str], boxes_given: bool) -> bool:
        """Whether this task's stored data must be recomputed when the tasks `computed` are (its stored data was
        made from theirs: the pointmap is masked by seg, pose's boxes come from seg)."""
        return False
