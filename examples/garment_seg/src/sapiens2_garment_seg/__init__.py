"""Garment parsing for Sapiens2 Studio: an example of a task from outside the project (docs/tasks.md).

`garment.GarmentTask` is the whole task; `checkpoint.write_tiny_checkpoint` writes a small checkpoint of its head in
the official layout (backbone + decode_head) for tests and demos without trained weights.
"""

from .garment import CLASSES, GarmentResult, GarmentTask

__all__ = ["CLASSES", "GarmentResult", "GarmentTask"]
