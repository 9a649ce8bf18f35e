"""Errors of the architecture layer: a model description that cannot be built."""

from __future__ import annotations

from ..errors import Sapiens2Error


class ModelConfigError(Sapiens2Error, ValueError):
    """An architecture, head or option that does not describe a buildable Sapiens2 model."""


class ModelOverflowError(Sapiens2Error, FloatingPointError):
    """The forward pass produced non-finite features (float16 overflow); another dtype is the fix."""
