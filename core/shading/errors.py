"""Errors of the shading layer (relighting, shadows, spherical harmonics, normal conventions)."""

from __future__ import annotations

from ..errors import Sapiens2Error


class ShadingError(Sapiens2Error, ValueError):
    """Relighting inputs that do not fit (shapes, light parameters, conventions)."""
