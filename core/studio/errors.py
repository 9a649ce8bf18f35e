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


class FinalizeError(InputError):
    """The frames of a chunked sequence are not ready for finalize: missing, damaged, or of different runs."""

    def __init__(self, message: str, *, hints: dict[str, str] | None = None) -> None:
        super().__init__(
            message,
            hints=hints
            or {
                "cli": "run the missing chunks (same --run-id, with --skip-existing), then finalize again",
                "python": "run the missing chunks with JobSpec(frames=…, run_id=…), then finalize() again",
            },
        )


class EngineError(StudioError):
    """A distributed engine cannot run the job: Ray is missing, the cluster is unreachable, workers keep dying."""
