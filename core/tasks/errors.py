"""Errors of the task layer: an unknown task name, a plug-in that was not trusted or does not load."""

from __future__ import annotations

from ..errors import Sapiens2Error


class TaskError(Sapiens2Error, ValueError):
    """A task cannot be found, registered or loaded as asked (the message names the task and the choices)."""


class UntrustedTaskError(TaskError):
    """A plug-in task was found but its code was not allowed to run (no `--trust-task-code`)."""
