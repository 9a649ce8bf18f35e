"""What the engine needs from the program it runs in: a device, progress, cancel, memory relief, notes, stage times.

`Host` is the plain implementation for the CLI, scripts and tests (callbacks optional). ComfyUI's node pack
subclasses it with ComfyUI's model management, progress bar and interrupt flag; a Ray worker uses the plain one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from ...pipeline.errors import PredictionInterrupted
from ...timing import ReportFn

log = logging.getLogger("sapiens2")
ProgressFn = Callable[[int, int], Any]
StopFn = Callable[[], bool]
NoteFn = Callable[[str], Any]
StageFn = ReportFn  # (stage name, wall seconds, CPU seconds): every stage a job runs (`core/timing.py`)


class Host:
    """Compute on `device`, hand results over on `output_device`.

    Notes are collected in `notes` and passed to `on_note` (default: the "sapiens2" logger; None: collect only,
    for front-ends that print them themselves). `on_stage` hears each stage of a job as it ends (name, exclusive
    wall and CPU seconds; the job's report keeps the totals either way); `sync_stages` makes stage boundaries wait
    for the accelerator, so that its asynchronous work is charged to the stage that launched it (benchmarks only:
    it stalls the device queue)."""

    def __init__(
        self,
        device: str | torch.device = "cpu",
        output_device: str | torch.device = "cpu",
        *,
        progress: ProgressFn | None = None,
        should_stop: StopFn | None = None,
        on_note: NoteFn | None = log.warning,
        on_stage: StageFn | None = None,
        sync_stages: bool = False,
    ) -> None:
        self.device = torch.device(device)
        self.output_device = torch.device(output_device)
        self._progress = progress
        self._should_stop = should_stop
        self._on_note = on_note
        self.notes: list[str] = []
        self._on_stage = on_stage
        self.sync_stages = sync_stages

    def activate(self, loaded: Any) -> torch.nn.Module:
        """The module to call, with its weights on the compute device."""
        model = loaded.model
        if model.device != self.device:
            model.to(self.device)
        return model

    def activate_all(self, models: dict[str, Any]) -> dict[str, torch.nn.Module]:
        """Every model of one run on the compute device at once (a host that evicts models under memory pressure
        must not evict one of them to make room for another)."""
        return {task: self.activate(loaded) for task, loaded in models.items()}

    def progress(self, done: int, total: int) -> None:
        """Report progress (a host may raise here to stop, as ComfyUI's progress hook does)."""
        if self._progress is not None:
            self._progress(done, total)

    def check_cancel(self) -> None:
        """Raise PredictionInterrupted when the user asked to stop."""
        if self._should_stop is not None and self._should_stop():
            raise PredictionInterrupted("stopped by request")

    def should_stop(self) -> bool:
        """Predictor hook: raises (through check_cancel) rather than returning True."""
        self.check_cancel()
        return False

    def release_memory(self) -> None:
        """After an out-of-memory error: give cached accelerator memory back before retrying smaller."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        elif self.device.type == "mps":
            torch.mps.empty_cache()

    def note(self, message: str) -> None:
        """Something the user should see (warnings, back-off decisions)."""
        self.notes.append(message)
        if self._on_note is not None:
            self._on_note(message)

    def stage_done(self, name: str, wall: float, cpu: float) -> None:
        """One stage of a job ended (`core/timing.py`); it runs on the thread that ran the stage."""
        if self._on_stage is not None:
            self._on_stage(name, wall, cpu)

    def stage_sync(self) -> Callable[[], Any] | None:
        """What a stage boundary waits for (`sync_stages`), or None."""
        if not self.sync_stages:
            return None
        if self.device.type == "cuda":
            return torch.cuda.synchronize
        if self.device.type == "mps":
            return torch.mps.synchronize
        return None
