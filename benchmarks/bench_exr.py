"""EXR encoding per bundle layer: bytes, encode/decode core-ms and error for each pixel type × compression.

Why: a capture bundle is written per video frame, so its encoding decides both the writers' CPU time and the
disk per frame; the choice (`core.formats.bundle.LAYER_ENCODING`, docs/formats.md) must be measured, per layer.
Each layer is written alone (its channels only) at the frame size, so the numbers say what that layer costs; the
full frame in the chosen encoding is measured last, against the previous encoding.

Data, 1080×1920 by default:
- `rgba`: the demo photo on a gradient (`bench_pipeline.demo_frame`), sRGB-decoded, A = 1;
- `P`, `N`, `mask`: an analytic person-sized ellipsoid 2.5 m away with a 2 mm cloth-like ripple (smooth
  geometry with real float32 mantissa noise), points zero outside the mask as the writer stores them, normals
  everywhere (the writer does not mask them);
- `seg`: 20 body-part-like regions inside the mask (angular sectors × bands), 0 outside;
- `--bundle FILE.exr`: additionally every layer of a real bundle (e.g. one written by `bench_pipeline.py`).

`zip` is our writer (core/formats/exr_scanline.py, ISA-L deflate); `zip@zlib` the same with its zlib fallback;
`zip@openexr` the `openexr` binding's ZIP writer, side by side.

    python benchmarks/bench_exr.py --repeat 3 [--bundle out/frame_0001.exr]
    python benchmarks/bench_exr.py --repeat 3 --compressions zip,zip@zlib,zip@openexr,none
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

COMPRESSIONS = ("none", "rle", "zips", "zip", "zip@zlib", "zip@openexr", "piz", "pxr24", "b44", "dwaa")
LAYER_CHANNELS = {
    "rgba": ("R", "G", "B", "A"),
    "P": ("P.X", "P.Y", "P.Z"),
    "N": ("N.X", "N.Y", "N.Z"),
    "seg": ("seg",),
    "mask": ("mask",),
}


def scene_layers(height: int, width: int) -> dict[str, np.ndarray]:
    """Float32 channel arrays of every layer (before the pixel type is chosen)."""
    from bench_pipeline import demo_frame
    from sapiens2_studio.core.formats.exr import srgb_to_linear
    from sapiens2_studio.core.testing.scenes import ellipsoid_scene

    scene = ellipsoid_scene(
        width, height, center=(0.0, 0.0, 2.5), semi_axes=(0.45, 0.85, 0.3), background_depth=None
    )
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    ripple = 0.002 * np.sin(xx / 7.0) * np.cos(yy / 11.0)  # 2 mm cloth folds
    points = scene.points * (1.0 + ripple[..., None] / 2.5)
    mask = scene.mask
    points[~mask] = 0.0
    tilt = np.stack([np.cos(xx / 7.0) * 0.05, -np.sin(yy / 11.0) * 0.05, np.zeros_like(xx)], axis=-1)
    normals = scene.normals + tilt
    normals[~mask] = (0.0, 0.0, -1.0)  # the model predicts normals everywhere; here the background faces us
    normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
    angle = np.arctan2(yy - height / 2, xx - width / 2)
    band = np.clip((yy / height * 4).astype(np.int32), 0, 3)
    seg = np.where(mask, 1 + (((angle + np.pi) / (2 * np.pi) * 5).astype(np.int32) % 5) * 4 + band, 0)
    image = srgb_to_linear(demo_frame(height, width).astype(np.float32) / 255.0)
    layers = {"R": image[..., 0], "G": image[..., 1], "B": image[..., 2], "A": np.ones((height, width))}
    layers.update({f"P.{a}": points[..., i] for i, a in enumerate("XYZ")})
    layers.update({f"N.{a}": normals[..., i] for i, a in enumerate("XYZ")})
    layers.update({"seg": seg.astype(np.float32), "mask": mask.astype(np.float32)})
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in layers.items()}


def bundle_layers(path: Path) -> dict[str, np.ndarray]:
    from sapiens2_studio.core.formats.exr import read_exr

    channels, _ = read_exr(path)
    return {k: v.astype(np.float32) for k, v in channels.items()}


def write_variant(path: Path, channels: dict[str, np.ndarray], variant: str) -> None:
    """`write_exr` for a compression name; `zip@openexr` = the `openexr` binding's own ZIP writer (what bundles
    used before core/formats/exr_scanline.py), `zip@zlib` = our writer with its standard-library fallback."""
    from sapiens2_studio.core.formats import exr_scanline
    from sapiens2_studio.core.formats.exr import write_exr

    compression, _, writer = variant.partition("@")
    if writer == "openexr":
        import OpenEXR

        header = {"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage}
        if compression != "zip":
            raise SystemExit(f"{variant}: only zip@openexr is compared")
        with OpenEXR.File(header, {k: np.ascontiguousarray(v) for k, v in channels.items()}) as exr:
            exr.write(str(path))
        return
    if writer == "zlib":
        import zlib

        saved = exr_scanline._DEFLATE
        exr_scanline._DEFLATE = lambda data: zlib.compress(data, exr_scanline._ZLIB_LEVEL)
        try:
            write_exr(path, channels, compression=compression)
        finally:
            exr_scanline._DEFLATE = saved
        return
    write_exr(path, channels, compression=compression)


def measure(channels: dict[str, np.ndarray], compression: str, repeat: int, workdir: Path) -> dict[str, Any]:
    """Write and read the channels `repeat` times (interleaved by the caller); bytes, median core-ms, errors."""
    from sapiens2_studio.core.formats.exr import read_exr

    path = workdir / f"bench_{os.getpid()}_{compression.replace('@', '_')}.exr"
    encode, decode = [], []
    for _ in range(repeat):
        start = time.process_time()
        write_variant(path, channels, compression)
        encode.append(time.process_time() - start)
        start = time.process_time()
        back, _ = read_exr(path)
        decode.append(time.process_time() - start)
    size = path.stat().st_size
    path.unlink()
    errors = {}
    for name, array in channels.items():
        diff = np.abs(back[name].astype(np.float64) - array.astype(np.float64))
        errors[name] = float(diff.max())
    return {
        "bytes": size,
        "encode_cpu_ms": 1000 * statistics.median(encode),
        "decode_cpu_ms": 1000 * statistics.median(decode),
        "max_abs_error_vs_stored_type": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image-size", default="1080x1920")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compressions", default=",".join(COMPRESSIONS))
    parser.add_argument("--bundle", default=None, help="also measure the layers of this bundle EXR")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from sapiens2_studio.core.formats.bundle import LAYER_ENCODING, ExrEncoding

    previous = ExrEncoding(  # what bundles used before the table existed (all ZIP; P and seg FLOAT)
        {"rgba": np.float16, "P": np.float32, "N": np.float16, "seg": np.float32, "mask": np.float16}, "zip"
    )

    height, width = (int(v) for v in args.image_size.lower().split("x"))
    workdir = Path(tempfile.mkdtemp(prefix="s2_bench_exr_"))
    sources = {"scene": scene_layers(height, width)}
    if args.bundle:
        sources["bundle"] = bundle_layers(Path(args.bundle))
    compressions = args.compressions.split(",")
    result: dict[str, Any] = {
        "image_size_hw": [height, width],
        "load_average_start": [round(v, 2) for v in os.getloadavg()],
        "layers": {},
    }
    for source, channels in sources.items():
        for layer, names in LAYER_CHANNELS.items():
            if not all(n in channels for n in names):
                continue
            for pixel in ("half", "float"):
                dtype = np.float16 if pixel == "half" else np.float32
                subset = {n: channels[n].astype(dtype) for n in names}
                exact = {n: float(np.abs(subset[n].astype(np.float64) - channels[n]).max()) for n in names}
                rows = {c: measure(subset, c, args.repeat, workdir) for c in compressions}
                result["layers"][f"{source}/{layer}/{pixel}"] = {
                    "pixel_type_max_abs_error": exact,
                    "compressions": rows,
                }
                best = min(rows, key=lambda c: rows[c]["bytes"])
                print(f"{source:6} {layer:5} {pixel:5} smallest={best}", file=sys.stderr)
        frames = {}
        variants = (
            ("previous", previous, previous.compression),
            ("chosen", LAYER_ENCODING, LAYER_ENCODING.compression),
            ("chosen, zlib fallback", LAYER_ENCODING, "zip@zlib"),
            ("chosen, openexr binding", LAYER_ENCODING, "zip@openexr"),
        )
        for name, table, variant in variants:
            typed = {}
            for layer, names in LAYER_CHANNELS.items():
                if all(n in channels for n in names):
                    typed.update({n: channels[n].astype(table.pixel_types[layer]) for n in names})
            frames[name] = measure(typed, variant, args.repeat, workdir)
            frames[name]["compression"] = variant
        result[f"{source}/frame"] = frames
    result["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
