"""How errors reach a ComfyUI user: the node's name and the message with ComfyUI's advice, no module paths.

ComfyUI shows an error as `<module>.<Class>: <message>` (its `full_type_name`), which for a pack's own classes
prints the whole custom_nodes path. Deliberate errors (`Sapiens2Error`) are therefore re-raised as
`Sapiens2NodeError`, whose module is set so that ComfyUI shows just the class name, with `text("comfyui")`: the
shared message plus the ComfyUI hint (never a CLI flag). Anything else propagates unchanged: it is a bug, and
ComfyUI shows its traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ..core.errors import Sapiens2Error

F = TypeVar("F", bound=Callable[..., Any])


class Sapiens2NodeError(Exception):
    """A Sapiens2 node could not run as wired; the message says what to change."""


Sapiens2NodeError.__module__ = "builtins"  # ComfyUI prints builtins classes by their bare name


def node_message(display_name: str, error: Sapiens2Error) -> str:
    """'Sapiens2 Pose: <message with the ComfyUI hint>'."""
    return f"{display_name}: {error.text('comfyui')}"


def node_errors(display_name: str) -> Callable[[F], F]:
    """Decorate a node's `execute`: deliberate errors become one clear Sapiens2NodeError naming the node."""

    def decorate(execute: F) -> F:
        @functools.wraps(execute)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return execute(*args, **kwargs)
            except Sapiens2Error as exc:
                raise Sapiens2NodeError(node_message(display_name, exc)) from exc

        return wrapper  # type: ignore[return-value]

    return decorate
