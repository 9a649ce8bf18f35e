"""What people look at: previews, pose drawings, masks, mattes and relighting built from task results.

Docs: docs/architecture.md (layout).
"""
