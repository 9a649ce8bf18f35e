"""Package data: keypoint and class metadata of the released models, loaded once.

Looked up relative to this package, so it also works when ComfyUI imports the pack under a path-derived name.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def _load(name: str) -> dict[str, Any]:
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


def keypoints308() -> dict[str, Any]:
    """Names, flip_indices, skeleton links, colours and sigmas of the 308 Goliath keypoints."""
    return _load("keypoints308.json")


def seg29() -> dict[str, Any]:
    """Names and RGB palette of the 29 body-part classes."""
    return _load("seg29.json")
