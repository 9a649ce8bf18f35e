"""Errors of the application layer (the engine every front-end runs on)."""

from __future__ import annotations

from ..errors import Sapiens2Error


class StudioError(Sapiens2Error, ValueError):
    """Inputs that do not fit together: an empty batch, results of another image, a wrong kind of result, …"""


class InputError(StudioError):
    """An input path is missing, empty, unreadable or of an unsupported type."""


class OutputError(StudioError):
    """The output folder cannot take the results (not writable, full, a file, locked by another run, …)."""


class OutOfMemoryError(StudioError):
    """Even one image per forward pass does not fit in the device's memory."""


class NonFiniteOutputError(StudioError):
    """A model returned NaN/inf for a frame and the job was asked to refuse such frames."""
