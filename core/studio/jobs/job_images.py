"""The image runner of a predict job: single images in input order, each planned against what earlier runs left
(`resume.plan_frame`), computed in chunks (`stages.compute_frames`) and committed (`stages.commit_frame`).

`job` is the running `PredictJob` (`job.py`, which imports this module: it is not imported back); the runner
reads the `RunPlan` it is given and reports into `job.report`."""

from __future__ import annotations

from functools import partial

from ...timing import stage
from ..errors import InputError
from ..sources.given_boxes import boxes_for
from ..sources.inputs import load_image
from ..store.resume import image_source, plan_frame
from .job_plan import RunningJob, RunPlan
from .stages import FrameItem


def run_images(job: RunningJob, plan: RunPlan) -> None:
    """The plan's single images in input order; consecutive images that need the same tasks share a chunk."""
    chunk: list[FrameItem] = []

    def flush() -> None:
        if not chunk:
            return
        frames, refused = job.compute(chunk)
        for index, (item, frame) in enumerate(zip(chunk, frames)):
            if index in refused:
                job.report.failures.append(refused[index].message)
                job.item_done(item.label)
            else:
                job.commit(item, frame, job.run_info, partial(job.item_done, item.label))
        chunk.clear()

    for entry in plan.images:
        try:
            source = image_source(entry.path)
            boxes = boxes_for(plan.boxes, entry.path.name)
            todo = plan_frame(job.out, entry.name, job.expectation(source, boxes, sequence=False))
            if todo.action != "write":
                job.kept(todo)
                job.item_done(entry.name)
                continue
            with stage("decode"):
                image = load_image(entry.path)
            size = (int(image.shape[1]), int(image.shape[0]))
            boxes = boxes_for(plan.boxes, entry.path.name, size=size)
        except (InputError, OSError) as exc:
            job.report.failures.append(exc.message if isinstance(exc, InputError) else f"{entry.path}: {exc}")
            job.item_done(entry.name)
            continue
        item = FrameItem(job.out, entry.name, entry.path.name, entry.path.name, todo, source, image, boxes)
        if chunk and chunk[0].plan.compute != todo.compute:
            flush()
        chunk.append(item)
        if len(chunk) >= job.batch:
            flush()
    flush()
