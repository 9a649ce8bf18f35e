"""A predict job as stages: its spec, plan, models, image and sequence runners, per-frame stages, estimates and preflight.

Docs: docs/architecture.md (layout).
"""
