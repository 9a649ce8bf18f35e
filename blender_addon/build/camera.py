"""Camera object with the bundle's intrinsics, at the origin of the capture, with the image as background."""

from __future__ import annotations

import re
from pathlib import Path

import bpy
import numpy as np
from mathutils import Matrix

from ..parse.axes import camera_rotation
from ..parse.bundle import Capture, Sequence, load_layers
from ..parse.camera_model import camera_settings
from ..parse.options import ImportOptions
from .animation import action_fcurves, add_curve
from .tracking import CreatedData


def apply_intrinsics(cam: bpy.types.Camera, scene: bpy.types.Scene, capture: Capture) -> None:
    """Lens, sensor fit and shift on ``cam``; resolution and pixel aspect on ``scene`` (a pixel maps to itself)."""
    c = capture.camera
    s = camera_settings(c.fx, c.fy, c.cx, c.cy, capture.width, capture.height)
    cam.type = "PERSP"
    cam.sensor_fit = s.sensor_fit
    cam.sensor_width = s.sensor_width
    cam.sensor_height = s.sensor_height
    cam.lens = s.lens
    cam.shift_x = s.shift_x
    cam.shift_y = s.shift_y
    render = scene.render
    render.resolution_x, render.resolution_y = s.resolution_x, s.resolution_y
    render.resolution_percentage = 100
    render.pixel_aspect_x, render.pixel_aspect_y = s.pixel_aspect_x, s.pixel_aspect_y


def linear_to_srgb(linear: np.ndarray) -> np.ndarray:
    """Scene-linear -> sRGB-encoded 0..1 (the bundle stores the image linear; byte images hold sRGB)."""
    v = np.clip(linear, 0.0, 1.0)
    return np.where(v <= 0.0031308, v * 12.92, 1.055 * np.power(v, 1.0 / 2.4) - 0.055)


def background_image(capture: Capture, created: CreatedData) -> bpy.types.Image | None:
    """The source photo next to the bundle if it is there, else the EXR's colour layer packed into the .blend."""
    source = (capture.metadata.get("image") or {}).get("source")
    if isinstance(source, str) and source and Path(source).name == source:
        path = capture.json_path.parent / source
        if path.is_file():
            return created.add("images", bpy.data.images.load(str(path), check_existing=False))
    if "rgb" not in capture.layers:
        return None
    h, w = capture.height, capture.width
    # An 8-bit sRGB plate: it is only a backdrop, and packed as PNG it keeps the .blend small (a 4K float plate
    # would add ~200 MB).
    image = created.add("images", bpy.data.images.new(f"{capture.name} plate", w, h, alpha=True))
    rgba = np.empty((h, w, 4), dtype=np.float32)
    for i, channel in enumerate(capture.layers.channels("rgb")):
        rgba[..., i] = channel[::-1]  # Blender stores rows bottom-to-top
    rgba[..., :3] = linear_to_srgb(rgba[..., :3])
    rgba[..., 3] = 1.0
    image.pixels.foreach_set(rgba.ravel())
    image.pack()
    return image


MATTE_EPS = 1.0 / 255.0  # alpha at or below it has no straight colour (as in the writer)


def matte_image(capture: Capture, created: CreatedData) -> bpy.types.Image | None:
    """The person cut out for a front plate: straight colour (the matte's, else the photo's) with the matte's
    alpha, 8-bit straight alpha; None when the bundle has no matte."""
    if "alpha" not in capture.layers:
        return None
    h, w = capture.height, capture.width
    alpha = capture.layers["alpha"]
    if "matte" in capture.layers:  # linear pre-multiplied -> straight
        visible = alpha > MATTE_EPS
        colour = capture.layers["matte"] / np.where(visible, alpha, 1.0)[..., None]
        colour[~visible] = 0.0
    elif "rgb" in capture.layers:
        colour = capture.layers["rgb"]
    else:
        colour = np.zeros((h, w, 3), dtype=np.float32)
    image = created.add("images", bpy.data.images.new(f"{capture.name} matte", w, h, alpha=True))
    image.alpha_mode = "STRAIGHT"
    rgba = np.empty((h, w, 4), dtype=np.float32)
    rgba[..., :3] = linear_to_srgb(colour)[::-1]  # Blender stores rows bottom-to-top
    rgba[..., 3] = np.clip(alpha, 0.0, 1.0)[::-1]
    image.pixels.foreach_set(rgba.ravel())
    image.pack()
    return image


def add_matte_plate(cam: bpy.types.Camera, image: bpy.types.Image):
    """Show the cut-out person in front of the scene in the camera view: CG placed behind them is hidden where
    the matte is opaque and shows through its soft edges (hair, motion blur)."""
    plate = add_plate(cam, image)
    plate.display_depth = "FRONT"
    return plate


def add_plate(cam: bpy.types.Camera, image: bpy.types.Image):
    """Show ``image`` behind the camera view, filling the frame exactly."""
    plate = cam.background_images.new()
    plate.image = image
    plate.alpha = 1.0
    # STRETCH, not FIT: with non-square pixels (fx != fy) the camera frame is W*aspect_x : H*aspect_y while the
    # image is W : H, and FIT would letterbox the plate off the pixels it belongs to.
    plate.frame_method = "STRETCH"
    cam.show_background_images = True
    return plate


def create_camera(
    name: str,
    capture: Capture,
    options: ImportOptions,
    collection,
    scene,
    created: CreatedData,
    with_plate: bool = True,
) -> bpy.types.Object:
    cam = created.add("cameras", bpy.data.cameras.new(name))
    apply_intrinsics(cam, scene, capture)
    cam.clip_start = 0.01 * options.global_scale
    cam.clip_end = max(100.0, 1000.0 * options.global_scale)
    obj = created.add("objects", bpy.data.objects.new(name, cam))
    collection.objects.link(obj)
    rotation = camera_rotation(options.up_axis)
    obj.matrix_world = Matrix([*([*row, 0.0] for row in rotation.tolist()), [0.0, 0.0, 0.0, 1.0]])
    if with_plate and options.import_background:
        image = background_image(capture, created)
        if image is not None:
            add_plate(cam, image)
        matte = matte_image(capture, created)
        if matte is not None:
            add_matte_plate(cam, matte)
    scene.camera = obj  # the imported view becomes the render view
    return obj


def _file_number(name: str) -> int | None:
    """The frame number Blender reads from an image-sequence file name: the last run of digits in the stem."""
    digits = re.findall(r"\d+", Path(name).stem)
    return int(digits[-1]) if digits else None


def numbered_sources(sequence: Sequence) -> tuple[Path, int] | None:
    """(first source image, its file number) when every frame's source image sits next to the bundle and is
    numbered like the frames (file number - frame is the same for all), else None."""
    first_number = None
    for capture in sequence.frames:
        source = (capture.metadata.get("image") or {}).get("source")
        if not isinstance(source, str) or not source or Path(source).name != source:
            return None
        if not (sequence.path.parent / source).is_file():
            return None
        number = _file_number(source)
        if number is None:
            return None
        if first_number is None:
            first, first_number = sequence.path.parent / source, number
        elif number - capture.frame != first_number - sequence.frames[0].frame:
            return None
    return first, first_number


def shared_source(sequence: Sequence) -> Path | None:
    """The one source file every frame names (a video the CLI read frame by frame), if it is next to the bundle."""
    sources = {(c.metadata.get("image") or {}).get("source") for c in sequence.frames}
    if len(sources) != 1:
        return None
    source = sources.pop()
    if not isinstance(source, str) or not source or Path(source).name != source:
        return None
    path = sequence.path.parent / source
    return path if path.is_file() else None


def add_sequence_plate(cam: bpy.types.Camera, sequence: Sequence, created: CreatedData) -> list[str]:
    """The source frames as an image-sequence plate that follows the scene frame, or the source video (frame n
    of the bundle = frame n of the video, as the CLI numbers them); else frame 1 (with a warning)."""
    found = numbered_sources(sequence)
    first = sequence.frames[0]
    video = shared_source(sequence) if found is None else None
    if video is not None:
        try:
            image = created.add("images", bpy.data.images.load(str(video), check_existing=False))
        except RuntimeError:  # not an image or a video Blender can read: fall back to the EXR's frame 1
            image = None
        if image is not None:
            plate = add_plate(cam, image)
            if image.source == "MOVIE":
                plate.image_user.frame_start = 1
                plate.image_user.frame_offset = 0
                plate.image_user.frame_duration = max(image.frame_duration, sequence.frames[-1].frame)
            return []
    if found is not None:
        path, number = found
        image = created.add("images", bpy.data.images.load(str(path), check_existing=False))
        image.source = "SEQUENCE"
        plate = add_plate(cam, image)
        user = plate.image_user
        user.frame_start = first.frame
        user.frame_duration = sequence.frames[-1].frame - first.frame + 1
        user.frame_offset = number - 1  # scene frame `frame_start` shows file number `number`
        return []
    load_layers(first)
    image = background_image(first, created)
    if image is None:
        return []
    add_plate(cam, image)
    if len(sequence.frames) < 2:
        return []
    return [
        f"{sequence.path.name}: the camera plate shows frame {first.frame} only. Put the source frames or "
        "video (named in each frame's image.source, e.g. "
        f"{(first.metadata.get('image') or {}).get('source') or 'frame_0001.png'}) next to the bundle to get "
        "a moving plate."
    ]


def keyframe_intrinsics(cam: bpy.types.Camera, sequence: Sequence, created: CreatedData) -> list[str]:
    """Lens and shift keys per frame when the frames' intrinsics differ (each frame's pointmap implies its own
    focal length), so every frame's mesh and joints reproject onto that frame's pixels. Returns warnings."""
    frames = sequence.frames
    settings = [
        camera_settings(c.camera.fx, c.camera.fy, c.camera.cx, c.camera.cy, c.width, c.height) for c in frames
    ]
    warnings = []
    layouts = {(c.width, c.height, s.sensor_fit, s.pixel_aspect_y) for c, s in zip(frames, settings)}
    if len(layouts) > 1:
        warnings.append(
            f"{sequence.path.name}: frames differ in image size or pixel aspect; the camera's resolution, "
            f"sensor fit and pixel aspect follow the first frame ({frames[0].width}x{frames[0].height})."
        )
    values = np.array([[s.lens, s.shift_x, s.shift_y] for s in settings])
    if np.ptp(values, axis=0).max() > 1e-6:
        fcurves = action_fcurves(cam, f"{cam.name} intrinsics", created)
        keys = np.array([c.frame for c in frames], dtype=np.float32)
        for column, path in enumerate(("lens", "shift_x", "shift_y")):
            add_curve(fcurves, path, 0, keys, values[:, column])
    return warnings
