"""Checks of predictions and of an install: cross-task geometry, `sapiens2 check`, `sapiens2 selftest`.

Docs: docs/architecture.md (layout).
"""
