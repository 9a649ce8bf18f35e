"""Real video files for the tests, encoded with PyAV (B-frames and short GOPs, so that seeking is exercised)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# libx264 with two B-frames and a keyframe every 5 frames (closed GOPs, IDR keyframes): packets come in decode
# order, frames in presentation order, and a range starting mid-GOP needs a seek to the keyframe before it.
H264 = ("libx264", {"g": "5", "keyint_min": "5", "bf": "2", "sc_threshold": "0"})
# MPEG-4 part 2 with B-frames: in MP4 the demuxer's seek (by decode time) lands after some targets, so the
# decoder must seek further back.
MPEG4 = ("mpeg4", {"g": "5", "bf": "2"})


def write_video(path: Path, frames: Sequence[np.ndarray], codec: tuple[str, dict[str, str]] = H264) -> Path:
    """Encode RGB uint8 `frames` (H, W even) at 12 fps into `path`."""
    import av

    name, options = codec
    with av.open(str(path), "w") as container:
        stream = container.add_stream(name, rate=12, options=dict(options))
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = "yuv420p"
        for rgb in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def noise_frames(count: int, size: tuple[int, int] = (24, 32), seed: int = 0) -> list[np.ndarray]:
    """Unrelated random frames: any frame decoded in the wrong place differs."""
    shape = (*size, 3)
    return [np.random.default_rng(seed + n).integers(0, 256, shape).astype(np.uint8) for n in range(count)]


def walk_frames(count: int, drift: float = 3.0) -> list[np.ndarray]:
    """A slowly changing image (32 × 24, like test_scale's `walk`): the pointmap scale moves, people stay."""
    base = np.random.default_rng(0).integers(0, 256, (32, 24, 3)).astype(np.float64)
    frames = []
    for n in range(1, count + 1):
        noise = np.random.default_rng(n).normal(0, 12, base.shape)
        frames.append(np.clip(base + noise + drift * n, 0, 255).astype(np.uint8))
    return frames


def write_walk_video(folder: Path, count: int, drift: float = 3.0) -> Path:
    """`folder/walk.mp4` (H.264 with B-frames) and `folder/boxes.json` with two people, as `write_walk` does."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "boxes.json").write_text(json.dumps([[1, 1, 12, 30], [11, 2, 23, 31]]), encoding="utf-8")
    return write_video(folder / "walk.mp4", walk_frames(count, drift))
