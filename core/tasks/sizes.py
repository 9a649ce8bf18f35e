"""Sizes shared by the built-in tasks' facts (kept apart so the task modules need not import the catalogue)."""

# The sizes of the official task checkpoints (facebookresearch/sapiens2 docs/MODEL_ZOO.md); no 0.1B or 4K heads.
RELEASED_SIZES: tuple[str, ...] = ("0.4b", "0.8b", "1b", "5b")
