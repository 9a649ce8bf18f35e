"""One `auto` dtype rule: the low-level loader and the engine every front-end uses agree on every device kind."""

from __future__ import annotations

import pytest
import torch
from sapiens2_studio.core.checkpoints.loader import resolve_dtype as loader_dtype
from sapiens2_studio.core.dtypes import auto_dtype
from sapiens2_studio.core.studio.runtime.execution import resolve_dtype as engine_dtype


@pytest.mark.parametrize("kind", ["cpu", "cuda", "mps"])
def test_loader_and_engine_pick_the_same_auto_dtype(kind: str) -> None:
    device = torch.device(kind)
    assert loader_dtype("auto", device) == engine_dtype("auto", device)[0]
    assert loader_dtype(None, device) == auto_dtype(device)[0]


def test_the_rule_itself() -> None:
    assert auto_dtype(torch.device("cpu")) == (torch.float32, "auto: fp32 on the CPU")
    assert auto_dtype(torch.device("cuda"), bf16_supported=True)[0] == torch.bfloat16
    assert auto_dtype(torch.device("mps"), bf16_supported=False)[0] == torch.float16
    # the MPS case the two rules used to disagree on: the loader said fp32, the engine bf16/fp16
    assert loader_dtype("auto", torch.device("mps")) != torch.float32


def test_explicit_choices_are_kept() -> None:
    assert loader_dtype("fp16", torch.device("cpu")) == torch.float16
    assert engine_dtype("bf16", torch.device("cpu"))[0] == torch.bfloat16


def test_one_parser_each_layer_its_own_error() -> None:
    """Both doors parse names with `core/dtypes.resolve_dtype`: the same aliases, the same message, and a bad name
    is the calling layer's error (a CheckpointError from the loader, a StudioError from the engine)."""
    from sapiens2_studio.core.checkpoints.errors import CheckpointError
    from sapiens2_studio.core.dtypes import UnknownDtypeError, resolve_dtype
    from sapiens2_studio.core.studio.errors import StudioError

    cpu = torch.device("cpu")
    for name, dtype in [("float16", torch.float16), ("bfloat16", torch.bfloat16), ("fp32", torch.float32)]:
        assert loader_dtype(name, cpu) == engine_dtype(name, cpu)[0] == resolve_dtype(name, cpu)[0] == dtype
    with pytest.raises(UnknownDtypeError) as shared:
        resolve_dtype("int8", cpu)
    with pytest.raises(CheckpointError, match="unknown dtype 'int8'") as from_loader:
        loader_dtype("int8", cpu)
    with pytest.raises(StudioError, match="unknown dtype 'int8'") as from_engine:
        engine_dtype("int8", cpu)
    assert from_loader.value.message == from_engine.value.message == shared.value.message
    assert not isinstance(from_loader.value, StudioError) and not isinstance(
        from_engine.value, CheckpointError
    )
