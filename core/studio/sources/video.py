"""A video's exact frame index, and frame-accurate decoding of a frame range (PyAV), so that one video can be
split into chunks across machines or Ray workers.

Why an index: a chunk (`--frames A-B`) and `finalize` must agree on every frame number of the finished sequence,
and a video's header count (`stream.frames`, or duration × rate) is an estimate. Demuxing the video stream's
packets without decoding them is cheap (it reads the file, decodes nothing) and exact: one packet is one frame, and
frame n (1-based, as everywhere for videos) is the n-th in presentation order, i.e. the packet with the n-th
smallest presentation timestamp (pts). Packets the demuxer marks as discarded (before an edit list's start) are
never shown and are left out, as the decoder drops them too. When some packet has no pts (e.g. some AVI files),
or two share one, the index falls back to one full decode, numbering the frames the decoder returns; if those
have no usable pts either, a range is decoded from the start and found by counting (correct, not cheap).

Why frames stay bit-identical to a sequential decode: a range is decoded from a keyframe at or before its first
frame, chosen by the demuxer's seek and checked on the packets (the first keyframe packet after the seek must
not come after the first wanted pts, else the seek goes further back), and frames are matched by pts, so B-frame
reordering and seeks that land early are harmless; a wanted frame that does not come out of the decoder is an
error, never a silent shift. Limits: it assumes the container's keyframes are real random-access points (true of
IDR/closed-GOP H.264, MPEG-4 part 2, FFV1 and what common encoders write); a range from frame 1, or a whole
video, is decoded sequentially as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError


@dataclass(frozen=True)
class VideoIndex:
    """Frames of a video's first video stream in presentation order. `pts[n - 1]`: frame n's timestamp in the
    stream's time base; None when the stream has no usable timestamps (ranges are then found by counting)."""

    count: int
    pts: tuple[int, ...] | None

    def numbers(self) -> list[int]:
        """The frame numbers of the finished sequence: 1..count."""
        return list(range(1, self.count + 1))


def require_av(path: Path) -> Any:
    """The av module, or an InputError saying how to install it (PyAV is an optional dependency)."""
    try:
        import av
    except ImportError:
        raise InputError(
            f'{path}: reading videos needs the optional PyAV package (pip install "sapiens2-studio[video]" or '
            "pip install av); or extract the frames to numbered images first"
        ) from None
    return av


def _unique(stamps: list[int | None]) -> bool:
    return None not in stamps and len(set(stamps)) == len(stamps)


def index_video(path: Path) -> VideoIndex:
    """The exact frame count and per-frame pts of `path` (module docstring); InputError when it cannot be read."""
    av = require_av(path)
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise InputError(f"{path}: the file has no video stream")
            stream = container.streams.video[0]
            stamps: list[int | None] = [
                packet.pts for packet in container.demux(stream) if packet.size and not packet.is_discard
            ]
        if _unique(stamps):
            return VideoIndex(len(stamps), tuple(sorted(stamps)))  # type: ignore[arg-type]
        # no (unique) pts on the packets: count what the decoder returns
        with av.open(str(path)) as container:
            decoded = [frame.pts for frame in container.decode(video=0)]
        increasing = _unique(decoded) and decoded == sorted(decoded)  # type: ignore[type-var]
        return VideoIndex(len(decoded), tuple(decoded) if increasing else None)  # type: ignore[arg-type]
    except av.error.FFmpegError as exc:
        raise InputError(f"{path}: cannot read video ({exc})") from None


def decode_all(path: Path) -> Iterator[np.ndarray]:
    """Every frame in order, as RGB uint8: the sequential decode (no index needed)."""
    av = require_av(path)
    try:
        with av.open(str(path)) as container:
            for frame in container.decode(video=0):
                yield frame.to_ndarray(format="rgb24")
    except av.error.FFmpegError as exc:
        raise InputError(f"{path}: cannot decode video ({exc})") from None


def decode_range(path: Path, index: VideoIndex, first: int, last: int) -> Iterator[tuple[int, np.ndarray]]:
    """(frame number, RGB uint8) for frames first..last (1-based, clipped to the video), equal to the same frames
    of `decode_all`: seek to a keyframe at or before `first`, decode forward, match by pts (module docstring)."""
    first, last = max(first, 1), min(last, index.count)
    if first > last:
        return
    if first > 1 and index.pts is not None:
        av = require_av(path)
        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                packets = _packets_from_keyframe(container, stream, index.pts, first)
                if packets is not None:
                    yield from _matched(path, packets, index.pts[first - 1 : last], first)
                    return
        except av.error.FFmpegError as exc:
            raise InputError(f"{path}: cannot decode video ({exc})") from None
    yield from _decode_from_start(path, first, last)  # nothing before `first` to seek to, or no pts to match


def _matched(
    path: Path, packets: Iterator[Any], wanted: tuple[int, ...], first: int
) -> Iterator[tuple[int, np.ndarray]]:
    """Decode `packets` (from a keyframe on) and yield the frames whose pts are `wanted`, numbered from `first`."""
    number = first
    for packet in packets:
        for frame in packet.decode():
            expected = wanted[number - first]
            if frame.pts is not None and frame.pts < expected:
                continue  # before the range (or a leading picture of an open GOP)
            if frame.pts != expected:
                raise InputError(
                    f"{path}: frame {number} (pts {expected}) did not decode after seeking (got pts {frame.pts}); "
                    "this video cannot be split into frame ranges — run it whole, or extract its frames to "
                    "numbered images first"
                )
            yield number, frame.to_ndarray(format="rgb24")
            if number == first + len(wanted) - 1:
                return
            number += 1
    raise InputError(
        f"{path}: the video ended before frame {first + len(wanted) - 1}, although its index counted it"
    )


def _decode_from_start(path: Path, first: int, last: int) -> Iterator[tuple[int, np.ndarray]]:
    """Frames first..last found by counting from the start (no seek)."""
    for number, image in enumerate(decode_all(path), start=1):
        if number >= first:
            yield number, image
        if number == last:
            return
    raise InputError(f"{path}: the video ended before frame {last}, although its index counted it")


def _packets_from_keyframe(
    container: Any, stream: Any, pts: tuple[int, ...], first: int
) -> Iterator[Any] | None:
    """The stream's packets from a keyframe whose pts is at or before frame `first`'s, after seeking there; each
    try that lands after it seeks twice as far back. None when only the start of the file would do."""
    target = pts[first - 1]
    back = 0
    while first - back > 1:
        container.seek(pts[first - back - 1], backward=True, any_frame=False, stream=stream)
        demuxed = container.demux(stream)
        anchor = next((p for p in demuxed if p.is_keyframe and p.pts is not None and p.size), None)
        if anchor is not None and anchor.pts <= target:
            return _chain(anchor, demuxed)
        back = max(1, 2 * back)
    return None


def _chain(head: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield head
    yield from rest
