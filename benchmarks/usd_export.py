"""USD export of a long sequence: time and memory of `core.formats.usd.write_usd` over N realistic-size frames.

Why: a sequence's mesh changes topology every frame, so the writer puts each frame's mesh into its own clip file
and releases it before reading the next frame (docs/formats.md, USD). This measures that the memory stays bounded
(the resident set after the first frames and at the end of a 300-frame run are the same within a frame's worth)
and how long a frame takes.

Data (default 768×1024, 300 frames): a person-sized ellipsoid 2.5 m away with a 2 mm cloth-like ripple, swaying
and walking towards the camera (topology changes with the silhouette), its normals, an sRGB plate, 20 body-part
ids, a soft matte and one person with 308 keypoints on the body; generated one frame at a time, as the sequence
reader yields them, so the frames never sit in memory together. Time spent making the frames is measured apart
and left out of the writer's time.

    python benchmarks/usd_export.py --frames 300 --width 768 --height 1024 --out /tmp/usd_bench
    python benchmarks/usd_export.py --frames 30 --format usdz      # the package path (zips the clips at the end)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np


def rss_mb() -> float:
    """The resident set now (Linux /proc), MB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # Linux: kB


class Frames:
    """The synthetic sequence, one CaptureFrame at a time; records its own time and the RSS per frame."""

    def __init__(self, frames: int, width: int, height: int, fps: float) -> None:
        self.count, self.width, self.height, self.fps = frames, width, height, fps
        self.make_s = 0.0
        self.rss: list[float] = []
        rng = np.random.default_rng(31)
        self.plate = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
        self.albedo = rng.uniform(0, 1, size=(height, width, 3)).astype(np.float32)
        self.kp_uv = rng.uniform(0.35, 0.65, size=(308, 2)) * (width, height)

    def __iter__(self) -> Iterator:
        from sapiens2_studio.core.formats.bundle import CaptureFrame, CapturePerson
        from sapiens2_studio.core.testing.scenes import ellipsoid_scene

        for i in range(self.count):
            start = time.perf_counter()
            t = i / self.fps
            center = (0.08 * np.sin(2 * np.pi * 0.7 * t), 0.0, 2.5 - 0.3 * t / (self.count / self.fps))
            scene = ellipsoid_scene(
                self.width, self.height, center=center, semi_axes=(0.45, 0.85, 0.3), background_depth=None
            )
            yy, xx = np.mgrid[0 : self.height, 0 : self.width].astype(np.float32)
            ripple = 0.002 * np.sin(xx / 7.0 + i) * np.cos(yy / 11.0)
            points = scene.points.astype(np.float32)
            points[..., 2] += np.where(scene.mask, ripple, 0.0)
            seg = np.where(scene.mask, 1 + ((xx // 37 + yy // 53) % 20), 0).astype(np.int32)
            keypoints = np.c_[self.kp_uv, np.full(308, 0.9)].astype(np.float32)
            frame = CaptureFrame(
                width=self.width, height=self.height, image=self.plate, points=points,
                normals=scene.normals.astype(np.float32), albedo=self.albedo, seg=seg,
                mask=scene.mask.astype(np.float32), alpha=scene.mask.astype(np.float32),
                camera={"fx": float(scene.intrinsics[0]), "fy": float(scene.intrinsics[1]),
                        "cx": float(scene.intrinsics[2]), "cy": float(scene.intrinsics[3])},
                people=[CapturePerson(bbox=(0.0, 0.0, self.width, self.height), keypoints=keypoints, track_id=1)],
                frame=i + 1,
            )  # fmt: skip
            del scene, yy, xx, ripple, points, seg
            self.make_s += time.perf_counter() - start
            self.rss.append(rss_mb())
            yield frame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--height", type=int, default=1024)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--format", choices=("usdc", "usdz", "usda"), default="usdc")
    parser.add_argument("--out", type=Path, default=Path("/tmp/sapiens2_usd_bench"))
    parser.add_argument(
        "--keep", action="store_true", help="keep the files (default: removed after measuring)"
    )
    args = parser.parse_args(argv)

    from sapiens2_studio.core.formats.usd import write_usd

    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    frames = Frames(args.frames, args.width, args.height, args.fps)
    rss_before = rss_mb()
    start = time.perf_counter()
    cpu_start = time.process_time()
    summary = write_usd(frames, args.out / f"bench.{args.format}", fps=args.fps, name="bench")
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    early = frames.rss[min(9, len(frames.rss) - 1)]
    result = {
        "frames": summary.frames,
        "size": f"{args.width}x{args.height}",
        "format": args.format,
        "max_mesh_vertices": summary.vertices,
        "writer_wall_s": round(wall - frames.make_s, 1),
        "writer_s_per_frame": round((wall - frames.make_s) / summary.frames, 3),
        "frame_making_s": round(frames.make_s, 1),
        "process_cpu_s": round(cpu, 1),
        "rss_before_mb": round(rss_before),
        "rss_after_10_frames_mb": round(early),
        "rss_last_frame_mb": round(frames.rss[-1]),
        "peak_rss_mb": round(peak_rss_mb()),
        "files_mb": round(size / 1e6),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=1))
    if not args.keep:
        shutil.rmtree(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
