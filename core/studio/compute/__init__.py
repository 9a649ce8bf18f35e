"""The run of tasks over a batch and what it yields: results, capture frames, carried-over tasks, the temporal pass.

Docs: docs/architecture.md (layout).
"""
