"""Output file names: a user-given name made safe as a file base name, and a sequence frame's name.

Kept apart from the bundle writer because every writer of outputs (bundles, previews, meshes, sequences, exports)
names its files with them.
"""

from __future__ import annotations

import re
import unicodedata

from .errors import BundleError

# Characters no output name holds: path separators, what Windows forbids in a name, control characters, and `#`
# and `%`, which image-sequence tools read as frame-number patterns (Nuke's `plate.####.exr`, printf's `%04d`).
_UNSAFE_NAME = re.compile(r'[/\\:*?"<>|#%\x00-\x1f\x7f]')


NAME_MAX_BYTES = (
    120  # UTF-8 bytes of a base name: `<name>_0001.foreground.png` and temporaries stay under 255
)


def sanitize_name(name: str) -> str:
    """Make a user-given name safe as a file base name while keeping it recognisable: Unicode NFC (so a name
    typed on macOS and on Linux is one name), only path-unsafe characters replaced by `_`, no directories, no
    traversal, no leading dot (a hidden file) and no trailing dot or space (Windows drops them). The same name
    always gives the same result, and `sanitize_name(sanitize_name(x)) == sanitize_name(x)`."""
    text = unicodedata.normalize("NFC", str(name)).replace("\\", "/").split("/")[-1]
    base = _UNSAFE_NAME.sub("_", text).lstrip(". ").rstrip(". ")
    if len(base.encode("utf-8")) > NAME_MAX_BYTES:
        base = base.encode("utf-8")[:NAME_MAX_BYTES].decode("utf-8", "ignore").rstrip(". ")
    if not base or set(base) <= {"_", ".", " "}:
        raise BundleError(
            f"bundle name {name!r} has no usable characters; use letters, digits, '_', '-' or '.'"
        )
    return base


def frame_name(name: str, number: int) -> str:
    """Base name of frame `number` (1-based) of sequence `name`: `<name>_0001`."""
    return f"{sanitize_name(name)}_{int(number):04d}"
