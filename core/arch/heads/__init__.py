"""Task heads: pose heatmaps, segmentation logits, and the dense normal/albedo/pointmap heads."""

from .dense_heads import DenseHead
from .heatmap import HeatmapHead

__all__ = ["DenseHead", "HeatmapHead"]
