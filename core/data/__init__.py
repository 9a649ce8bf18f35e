"""Package data: keypoint and class metadata of the released models."""
