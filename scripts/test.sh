#!/usr/bin/env bash
# The project's test command. On a fresh machine it makes two virtual environments from the package registries
# and runs ruff and pytest; extra arguments go to pytest (e.g. `bash scripts/test.sh -k parity`).
#   .venv          CPU torch (installed first, so nothing pulls a multi-GB CUDA build), the project, test tools;
#                  numpy 2.x, as ComfyUI and new installs have it.
#   .venv-blender  Blender as a Python module (bpy 4.5 LTS, Python 3.11 only, with its own numpy 1.26), used by
#                  tests/blender to run the add-on checks in a real Blender; skipped elsewhere with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
BLENDER_VENV=${BLENDER_VENV:-.venv-blender}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
BPY_SPEC=${BPY_SPEC:-bpy==4.5.15}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q "$TORCH_SPEC"
"$PY" -m pip install -q -e ".[test]"

if "$PYTHON" -c 'import sys; raise SystemExit(sys.version_info[:2] != (3, 11))'; then
    [ -x "$BLENDER_VENV/bin/python" ] || "$PYTHON" -m venv "$BLENDER_VENV"
    "$BLENDER_VENV/bin/python" -m pip install -q --upgrade pip
    "$BLENDER_VENV/bin/python" -m pip install -q "$BPY_SPEC" openexr pytest pytest-timeout
    export SAPIENS2_BLENDER_PYTHON="$PWD/$BLENDER_VENV/bin/python"
fi

# The reference fixtures (official-implementation outputs) live in shared/ beside the checkout when present.
if [ -z "${SAPIENS2_SHARED:-}" ] && [ -d ../shared/fixtures ]; then
    SAPIENS2_SHARED="$(cd ../shared && pwd)"
    export SAPIENS2_SHARED
fi

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
exec "$PY" -m pytest "$@"
