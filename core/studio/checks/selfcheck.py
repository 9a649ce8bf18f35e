"""`sapiens2 check`: run the tasks on images and report the cross-task geometry self-checks, writing nothing.

This is how a user with real weights learns at once whether the conventions hold (normals against the pointmap,
keypoints against the segmentation, pointmap validity): docs/conventions.md says what good numbers look like.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..compute.capture import capture_frames
from ..compute.geometry_checks import GeometryReport
from ..compute.run_tasks import TaskOptions, run_tasks
from ..jobs.job import JobSpec, load_models, resolve_checkpoints
from ..runtime.host import Host
from ..sources.inputs import ImageJob, collect_inputs, load_image


@dataclass
class CheckedImage:
    """One image's name and its report (None when its tasks allow no check)."""

    name: str
    report: GeometryReport | None


def check_images(spec: JobSpec, host: Host | None = None) -> list[CheckedImage]:
    """Every input image (sequence frames included) through the spec's tasks, one at a time; nothing is written."""
    spec.validate()
    host = host or Host(on_note=None)
    jobs = collect_inputs([str(p) for p in spec.inputs])
    models = load_models(spec, resolve_checkpoints(spec))
    host.device = next(iter(models.values())).plan.device
    out: list[CheckedImage] = []
    for job in jobs:
        frames = [(job.path.name, load_image(job.path))] if isinstance(job, ImageJob) else job.iter_frames()
        for name, image in frames:
            batches = run_tasks(models, [image], host, TaskOptions(chunk_size=1, flip_test=spec.flip_test))
            frame = capture_frames([image], batches, source_names=[name])[0]
            out.append(CheckedImage(name, frame.checks))
    return out
