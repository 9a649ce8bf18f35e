"""Keypoint and class metadata of the released models, loaded once from `core/data/*.json`."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from .. import data as core_data


@cache
def _load(name: str) -> dict[str, Any]:
    # Relative to this package, so it works under any import name (ComfyUI imports the pack by folder path).
    text = resources.files(core_data).joinpath(name).read_text(encoding="utf-8")
    return json.loads(text)


def keypoints308() -> dict[str, Any]:
    """Names, flip_indices, skeleton links, colours of the 308 Goliath keypoints."""
    return _load("keypoints308.json")


def seg29() -> dict[str, Any]:
    """Names and RGB palette of the 29 body-part classes."""
    return _load("seg29.json")


@cache
def keypoint_names() -> tuple[str, ...]:
    return tuple(keypoints308()["keypoint_names"])


@cache
def flip_indices() -> tuple[int, ...]:
    return tuple(int(i) for i in keypoints308()["flip_indices"])


@cache
def seg_class_names() -> tuple[str, ...]:
    return tuple(seg29()["names"])
