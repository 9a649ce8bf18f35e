"""Errors of the pipeline layer (pre-processing, predictors, post-processing)."""

from __future__ import annotations

from ..errors import Sapiens2Error


class PipelineError(Sapiens2Error, ValueError):
    """A prediction cannot run as asked (wrong model for the task, bad boxes, unknown class, …)."""


class TaskMismatchError(PipelineError):
    """The model was trained for another task than the predictor needs."""


class NoPersonFoundError(PipelineError):
    """The segmentation has no foreground component large enough to be a person."""


class UnknownSegClassError(PipelineError, KeyError):
    """A body-part class or group name that does not exist."""


class PredictionInterrupted(Sapiens2Error):
    """`should_stop()` asked the predictor to stop (a user's cancel, not a failure)."""
