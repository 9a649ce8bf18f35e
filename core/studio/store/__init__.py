"""The output store: a frame's files as one transaction, the folder's lock, resume, orphans, finalize and remote publishing.

Docs: docs/architecture.md (layout).
"""
