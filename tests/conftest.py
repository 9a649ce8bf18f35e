"""Shared test fixtures: where the shared reference fixtures live, tiny checkpoints written as real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SAPIENS2_SHARED", REPO.parent / "shared"))
PARITY = SHARED / "fixtures" / "parity"
CHECKPOINT_KEYS = SHARED / "fixtures" / "checkpoint_keys"

torch.set_num_threads(min(2, os.cpu_count() or 1))


def need_shared(path: Path) -> Path:
    if not path.exists():
        message = f"reference fixtures not found at {path} (set SAPIENS2_SHARED to the shared/ folder)"
        if os.environ.get("SAPIENS2_REQUIRE_SHARED"):  # CI: parity must run, never skip silently
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Every test starts from the same random state, so tolerances are checked on fixed inputs."""
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def parity_dir() -> Path:
    return need_shared(PARITY)


@pytest.fixture(scope="session")
def checkpoint_keys_dir() -> Path:
    return need_shared(CHECKPOINT_KEYS)


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """One tiny official-layout .safetensors file per task (written once per session)."""
    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    folder = tmp_path_factory.mktemp("tiny_checkpoints")
    tasks = ("pretrain", "pose", "seg", "normal", "albedo", "pointmap", "matting")
    return {t: write_synthetic_checkpoint(folder / f"tiny_{t}.safetensors", task=t) for t in tasks}
