"""Fixtures the engine, scale-out and output-store tests share: tiny checkpoints where the engine looks, and a
moving numbered sequence with two people (tests/studio_runs.py). A test module sets what its run needs as
module constants: `TASKS` (default "pose,pointmap,normal"), `FRAMES` (12) and `WALK_DRIFT` (3 grey levels a
frame)."""

from __future__ import annotations

from pathlib import Path

import pytest
from studio_runs import FRAMES, TASKS, write_checkpoints, write_walk


@pytest.fixture(scope="module")
def home(request, tmp_path_factory) -> Path:
    return write_checkpoints(tmp_path_factory.mktemp("home"), getattr(request.module, "TASKS", TASKS))


@pytest.fixture(scope="module")
def walk(request, tmp_path_factory) -> Path:
    frames = getattr(request.module, "FRAMES", FRAMES)
    drift = getattr(request.module, "WALK_DRIFT", 3.0)
    return write_walk(tmp_path_factory.mktemp("src") / "walk", frames, drift=drift)
