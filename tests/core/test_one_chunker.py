"""Issue 27 (one chunker) and issue 29 (a clip through the pose node: progress and cancel per chunk of frames).

Only the engine cuts a batch (`run_chunked` over `core.chunks.in_chunks`); a task's predictor runs the chunk it
gets in one forward pass. The pose node runs `run_tasks` with ComfyUI's Host, so a Host that records progress and
asks to stop mid-clip shows what the node's progress bar and Cancel do (the real ComfyUI check is
tests/comfy/inprocess_check.py)."""

from __future__ import annotations

import pytest
import torch
from sapiens2_studio.core.chunks import ChunkSizeError, in_chunks
from sapiens2_studio.core.pipeline.errors import PredictionInterrupted
from sapiens2_studio.core.studio.compute.run_tasks import TaskOptions, run_tasks
from sapiens2_studio.core.studio.runtime import models
from sapiens2_studio.core.studio.runtime.host import Host


@pytest.fixture(scope="module")
def loaded(tiny_checkpoints):
    return {t: models.load(tiny_checkpoints[t], device="cpu") for t in ("pose", "seg", "normal", "matting")}


class Counting(torch.nn.Module):
    """A real model that records the batch of each forward pass (and may ask its Host to stop while it runs)."""

    def __init__(self, inner: torch.nn.Module, name: str, seen: list, on_call=None) -> None:
        super().__init__()
        self.inner, self.name, self.seen, self.on_call = inner, name, seen, on_call

    def __getattr__(self, attr):
        try:
            return super().__getattr__(attr)
        except AttributeError:
            return getattr(self.inner, attr)

    def forward(self, x):
        self.seen.append((self.name, int(x.shape[0])))
        if self.on_call is not None:
            self.on_call(self.name)
        return self.inner(x)


class ClipHost(Host):
    """Records progress as a front-end's bar would; `stop` is the user's Cancel (checked where the engine asks)."""

    def __init__(self, seen: list, stop_when=None) -> None:
        super().__init__(on_note=None)
        self.seen, self.stop_when, self.stop, self.calls = seen, stop_when, False, []

    def activate_all(self, loaded):
        modules = super().activate_all(loaded)
        return {t: Counting(m, t, self.seen, self._maybe_stop) for t, m in modules.items()}

    def progress(self, done, total):
        self.calls.append((done, total))
        self.seen.append(("progress", done))
        self._maybe_stop(("progress", done))

    def _maybe_stop(self, event):
        if self.stop_when is not None and self.stop_when(event, self.seen):
            self.stop = True

    def check_cancel(self):
        if self.stop:
            raise PredictionInterrupted("stopped by request")


def _clip(frames: int) -> torch.Tensor:
    return torch.rand(frames, 40, 30, 3, generator=torch.Generator().manual_seed(frames))


def test_the_engine_cuts_and_each_predictor_runs_its_chunk_whole(loaded):
    """Five frames in chunks of 2: every task's model sees 2, 2, 1 images (pose: one crop per frame, no flip),
    progress moves after each chunk."""
    seen: list = []
    host = ClipHost(seen)
    options = TaskOptions(chunk_size=2, flip_test=False, boxes=[[(2.0, 2.0, 28.0, 38.0)]] * 5)
    run_tasks({"pose": loaded["pose"], "normal": loaded["normal"]}, _clip(5), host, options)
    assert host.calls == [(0, 5), (2, 5), (4, 5), (5, 5)]
    for task in ("pose", "normal"):
        assert [n for name, n in seen if name == task] == [2, 2, 1]
    # between two progress reports: one forward pass per task, over the whole chunk
    marks = [i for i, s in enumerate(seen) if s[0] == "progress"]
    assert [marks[k + 1] - marks[k] - 1 for k in range(len(marks) - 1)] == [2, 2, 2]


def test_pose_over_a_clip_reports_each_chunk_and_cancel_stops_before_the_next(loaded):
    """The pose node's path (seg finds the people, pose per chunk): Cancel pressed after the first chunk's
    progress stops the run before any model sees the next chunk."""
    seen: list = []
    host = ClipHost(seen, stop_when=lambda event, _: event == ("progress", 2))
    options = TaskOptions(chunk_size=2, flip_test=False)
    with pytest.raises(PredictionInterrupted):
        run_tasks({"pose": loaded["pose"], "seg": loaded["seg"]}, _clip(6), host, options)
    assert host.calls == [(0, 6), (2, 6)]
    assert seen[-1] == ("progress", 2)  # nothing ran after the chunk that was done when Cancel came
    assert [s[0] for s in seen] == ["progress", "seg", "pose", "progress"]


def test_cancel_stops_within_a_chunk(loaded):
    """Cancel pressed while the second chunk's segmentation runs: its pose pass does not start (the predictors
    check the Host before each forward pass), and the bar stays at the first chunk."""
    seen: list = []

    def during_second_seg(event, seen_so_far):
        return event == "seg" and sum(1 for s in seen_so_far if s[0] == "seg") == 2

    host = ClipHost(seen, stop_when=during_second_seg)
    with pytest.raises(PredictionInterrupted):
        run_tasks(
            {"pose": loaded["pose"], "seg": loaded["seg"]},
            _clip(6),
            host,
            TaskOptions(chunk_size=2, flip_test=False),
        )
    assert host.calls == [(0, 6), (2, 6)]
    assert [s[0] for s in seen] == ["progress", "seg", "pose", "progress", "seg"]


def test_out_of_memory_halves_the_chunk_the_predictors_get(loaded):
    """The engine's back-off is the only re-cut: after an out-of-memory error with 4 frames the matting model
    gets 2 at a time, and the results are those of a run in chunks of 2."""
    seen: list = []
    failed: list = []

    class OneOom(ClipHost):
        def activate_all(self, loaded_models):
            modules = super().activate_all(loaded_models)
            inner = modules["matting"]

            class Flaky(torch.nn.Module):
                task, device, dtype = inner.task, inner.device, inner.dtype

                def forward(self, x):
                    if not failed:
                        failed.append(int(x.shape[0]))
                        raise torch.OutOfMemoryError("CPU out of memory (simulated)")
                    return inner(x)

            return {"matting": Flaky()}

    clip = _clip(4)
    host = OneOom(seen)
    got = run_tasks({"matting": loaded["matting"]}, clip, host, TaskOptions(chunk_size=4))["matting"]
    assert failed == [4] and [n for name, n in seen if name == "matting"] == [2, 2]
    assert any("retrying with 2" in note for note in host.notes)
    want = run_tasks({"matting": loaded["matting"]}, clip, Host(on_note=None), TaskOptions(chunk_size=2))
    for a, b in zip(got.results, want["matting"].results):
        assert torch.equal(a.alpha, b.alpha) and torch.equal(a.foreground, b.foreground)


def test_the_one_chunker_itself():
    calls: list = []
    out = in_chunks(5, 2, lambda a, b: list(range(a, b)), progress=lambda d, t: calls.append((d, t)))
    assert out == [0, 1, 2, 3, 4] and calls == [(2, 5), (4, 5), (5, 5)]
    assert in_chunks(0, 3, lambda a, b: []) == []
    with pytest.raises(ChunkSizeError):
        in_chunks(3, 0, lambda a, b: [])
    with pytest.raises(RuntimeError, match="returned 1 results"):
        in_chunks(2, 2, lambda a, b: [a])
