"""Keypoint and class metadata of the released models, loaded once from `core/data/*.json`."""

from __future__ import annotations

from functools import cache

from ..data import keypoints308, seg29

__all__ = ["flip_indices", "keypoint_names", "keypoints308", "seg29", "seg_class_names"]


@cache
def keypoint_names() -> tuple[str, ...]:
    return tuple(keypoints308()["keypoint_names"])


@cache
def flip_indices() -> tuple[int, ...]:
    return tuple(int(i) for i in keypoints308()["flip_indices"])


@cache
def seg_class_names() -> tuple[str, ...]:
    return tuple(seg29()["names"])
