"""Read every channel of a single-part EXR into float32 numpy arrays.

Blender's own image loader cannot give us the pixels of a multi-channel EXR (it loads as MULTILAYER with empty
``pixels``), so the data is read with a library: the ``OpenEXR`` module when it is importable (bundled wheel or
the user's Python) or else the OpenImageIO bindings that ship with Blender (not every build has them: the bpy
4.2 wheel does not). Nothing is installed at run time; a missing reader is reported as such, never as a bad file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .errors import BundleError

ChannelReader = Callable[[Path], dict[str, np.ndarray]]
GET_A_READER = (
    "Install the build of the add-on for your platform, which bundles the openexr wheel "
    "(sapiens2_capture-<version>-<platform>.zip, made by scripts/build_blender_extension.py --with-openexr)."
)


def _read_with_openexr(path: Path) -> dict[str, np.ndarray]:
    import OpenEXR

    with OpenEXR.File(str(path), separate_channels=True) as exr_file:
        channels = exr_file.channels()
        # Native dtype (half stays half): converting 15 full-size channels up front costs seconds at 4K.
        return {name: np.ascontiguousarray(ch.pixels) for name, ch in channels.items()}


def _import_openimageio():
    """Import OpenImageIO; the ``bpy`` module keeps its bundled copy off ``sys.path``, so look there too."""
    try:
        import OpenImageIO

        return OpenImageIO
    except ImportError:
        pass
    try:
        import bpy
    except ImportError as exc:  # outside Blender: nothing else to try
        raise ImportError("OpenImageIO is not importable") from exc
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = os.path.join(bpy.utils.resource_path("LOCAL"), "python", "lib", version, "site-packages")
    if os.path.isdir(site) and site not in sys.path:
        sys.path.append(site)
    import OpenImageIO

    return OpenImageIO


def _read_with_openimageio(path: Path) -> dict[str, np.ndarray]:
    oiio = _import_openimageio()
    image = oiio.ImageInput.open(str(path))
    if image is None:
        raise BundleError(f"Cannot open EXR file {path}: {oiio.geterror()}")
    try:
        spec = image.spec()
        pixels = image.read_image(0, 0, 0, spec.nchannels, "float")
        if pixels is None:
            raise BundleError(f"Cannot read pixels of EXR file {path}: {image.geterror()}")
        pixels = np.asarray(pixels, dtype=np.float32).reshape(spec.height, spec.width, spec.nchannels)
        # Strided views, not copies: splitting an interleaved 4K image channel by channel takes seconds, and
        # the importer only gathers the pixels it uses.
        return {name: pixels[..., i] for i, name in enumerate(spec.channelnames)}
    finally:
        image.close()


BACKENDS: dict[str, ChannelReader] = {"openexr": _read_with_openexr, "openimageio": _read_with_openimageio}


def available_backend() -> str:
    """Name of the first EXR backend that imports, or raise a BundleError that says how to get one."""
    try:
        import OpenEXR  # noqa: F401

        return "openexr"
    except ImportError:
        pass
    try:
        _import_openimageio()
        return "openimageio"
    except ImportError:
        pass
    raise BundleError(
        "No EXR reader available: this Blender has neither OpenImageIO nor the OpenEXR module. "
        + GET_A_READER
    )


def read_exr_channels(path: Path, backend: str | None = None) -> dict[str, np.ndarray]:
    """All channels of ``path`` as (H, W) arrays (float16/float32), row 0 = top row of the image."""
    path = Path(path)
    if not path.is_file():
        raise BundleError(f"EXR file not found: {path}. Keep the .exr next to its .json (same base name).")
    name = backend or available_backend()
    if name not in BACKENDS:
        raise ValueError(f"unknown EXR backend {name!r}; choose one of {sorted(BACKENDS)}")
    try:
        return BACKENDS[name](path)
    except BundleError:
        raise
    except ImportError as exc:  # the reader is missing, not the file broken: say so (4.2's bpy has no OIIO)
        raise BundleError(
            f"Cannot read EXR file {path.name}: the {name} reader is missing from this Blender ({exc}); the "
            "file itself may be fine. " + GET_A_READER
        ) from exc
    except Exception as exc:  # the libraries raise assorted types for truncated or foreign files
        raise BundleError(
            f"Cannot read EXR file {path} ({type(exc).__name__}: {exc}). Re-export the bundle."
        ) from exc
