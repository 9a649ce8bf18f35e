"""The one conversion of tensors and array-likes to numpy used by the writers and the engine."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_numpy(value: Any) -> np.ndarray:
    """A numpy array on the host: torch tensors are detached and copied off their device (float tensors of any
    precision become float32, integer and bool tensors keep their type); everything else goes through np.asarray."""
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu()
        if value.is_floating_point():
            value = value.float()
        return value.numpy()
    return np.asarray(value)
