"""What a job reads: input paths, videos, sequences and given person boxes, as batches.

Docs: docs/architecture.md (layout).
"""
