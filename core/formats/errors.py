"""Errors of the formats layer: capture bundles, EXR files, keypoint formats and meshes."""

from __future__ import annotations

from ..errors import Sapiens2Error


class FormatError(Sapiens2Error, ValueError):
    """Data that cannot be written to, or read from, one of the project's file formats."""


class BundleError(FormatError):
    """A capture bundle is missing, corrupt, of a newer major version, or inconsistent."""


class ExrError(FormatError, RuntimeError):
    """An EXR file could not be read or written; the message names the file and the problem."""
