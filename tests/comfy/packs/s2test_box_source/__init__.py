"""Test-only node pack: person boxes as ComfyUI's two box types, for the Pose node's ``bboxes`` socket.

No core node outputs ``BOUNDING_BOXES`` (newer cores only use it for widget state) and 0.3.64 has no
``BOUNDING_BOX`` source without a detector model, so the tests link this one.  A V1 node: it loads on every host.
"""

from __future__ import annotations

import json


class TestBoxSource:
    """``boxes`` (JSON list of {x, y, width, height}) as one frame's BOUNDING_BOX and as BOUNDING_BOXES; a JSON
    list of such lists is one per frame (BOUNDING_BOX per frame, BOUNDING_BOXES of the first)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"boxes": ("STRING", {"default": "[]", "tooltip": "JSON list of boxes"})}}

    RETURN_TYPES = ("BOUNDING_BOX", "BOUNDING_BOXES")
    RETURN_NAMES = ("bboxes", "bounding_boxes")
    FUNCTION = "make"
    CATEGORY = "testing"

    def make(self, boxes: str):
        value = json.loads(boxes)
        if value and all(isinstance(v, list) for v in value):  # one list per frame: a clip's moving people
            frames = [[dict(box) for box in frame] for frame in value]
            return (frames, [{**box, "metadata": {"label": "person"}} for box in frames[0]])
        frame = [dict(box) for box in value]
        with_metadata = [{**box, "metadata": {"label": "person"}} for box in frame]
        return ([frame], with_metadata)


NODE_CLASS_MAPPINGS = {"TestBoxSource": TestBoxSource}
