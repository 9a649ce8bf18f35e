"""The project's one error base class, and advice that differs per front-end.

Every deliberate raise in the project is a `Sapiens2Error` subclass (one per layer: checkpoints, downloads, image
input, pipeline, formats, engine, and the front-ends' own), so a front-end can tell "the user must fix something"
(one clear line) from "this is a bug" (a traceback and where to report it). The message says what is wrong in
words every front-end shares; advice that only makes sense in one front-end (a CLI flag, a ComfyUI widget, a Python
argument) goes into `hints`, keyed by front-end, so ComfyUI never tells a user to pass `--checkpoint`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Frontend = Literal["python", "cli", "comfyui"]
BUG_REPORT_URL = "https://github.com/sapiens2-studio/sapiens2-studio/issues"


class Sapiens2Error(Exception):
    """Something the user can fix; the message says what and how.

    hints: front-end → one sentence of extra advice for that front-end only ("python", "cli", "comfyui").
    `str(error)` is the message with the Python hint (what a script author sees); front-ends call `text()`.
    """

    def __init__(self, message: str, *, hints: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = str(message)
        self.hints: dict[str, str] = {k: v for k, v in (hints or {}).items() if v}

    def text(self, frontend: Frontend = "python") -> str:
        """The message as `frontend` should show it: the shared text plus that front-end's hint, if any."""
        hint = self.hints.get(frontend)
        if not hint:
            return self.message
        separator = " " if self.message.endswith((".", ";", ":")) else "; "
        return f"{self.message}{separator}{hint}"

    def __str__(self) -> str:
        return self.text("python")

    def __reduce__(
        self,
    ):  # keep hints when the error crosses a process boundary (Ray workers, multiprocessing)
        return (_rebuild, (type(self), self.message, self.hints))


def _rebuild(cls: type[Sapiens2Error], message: str, hints: dict[str, str]) -> Sapiens2Error:
    error = cls.__new__(cls)
    Sapiens2Error.__init__(error, message, hints=hints)
    return error
