"""The image runner of a predict job: single images in input order, each planned against what earlier runs left
(`resume.plan_frame`), computed in chunks (`stages.compute_frames`) and committed (`stages.commit_frame`).

`running` is the job's `FrameRun` (`frame_run.py`: the per-frame stages, below this module; `job.py` hands it
over and is never called back); the runner reads the `RunPlan` it is given and reports into `running.report`."""

from __future__ import annotations

from functools import partial

from ...timing import stage
from ..errors import InputError
from ..sources.given_boxes import boxes_for
from ..sources.inputs import load_image
from ..store.resume import image_source, plan_frame
from .frame_run import FrameRun
from .job_plan import RunPlan
from .stages import FrameItem


def run_images(running: FrameRun, plan: RunPlan) -> None:
    """The plan's single images in input order; consecutive images that need the same tasks share a chunk."""
    chunk: list[FrameItem] = []

    def flush() -> None:
        if not chunk:
            return
        frames, refused = running.compute(chunk)
        for index, (item, frame) in enumerate(zip(chunk, frames)):
            if index in refused:
                running.report.failures.append(refused[index].message)
                running.item_done(item.label)
            else:
                running.commit(item, frame, running.run_info, partial(running.item_done, item.label))
        chunk.clear()

    for entry in plan.images:
        try:
            source = image_source(entry.path)
            boxes = boxes_for(plan.boxes, entry.path.name)
            todo = plan_frame(running.out, entry.name, running.expectation(source, boxes, sequence=False))
            if todo.action != "write":
                running.kept(todo)
                running.item_done(entry.name)
                continue
            with stage("decode"):
                image = load_image(entry.path)
            size = (int(image.shape[1]), int(image.shape[0]))
            boxes = boxes_for(plan.boxes, entry.path.name, size=size)
        except (InputError, OSError) as exc:
            running.report.failures.append(
                exc.message if isinstance(exc, InputError) else f"{entry.path}: {exc}"
            )
            running.item_done(entry.name)
            continue
        item = FrameItem(
            running.out, entry.name, entry.path.name, entry.path.name, todo, source, image, boxes
        )
        if chunk and chunk[0].plan.compute != todo.compute:
            flush()
        chunk.append(item)
        if len(chunk) >= running.batch:
            flush()
    flush()
