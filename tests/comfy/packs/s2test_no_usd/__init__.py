"""Test-only node pack: the ComfyUI process it is loaded into behaves as if Pixar's usd-core were not installed.

``tests/comfy/test_comfy_usd.py`` starts a server of its own with it, to see what Save USD tells a user who has not
installed usd-core (an import of ``pxr`` fails as it does when the package is missing). No nodes.
"""

import sys

sys.modules["pxr"] = None  # `import pxr` now raises ImportError in this process

NODE_CLASS_MAPPINGS: dict = {}
