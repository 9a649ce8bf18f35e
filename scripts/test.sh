#!/usr/bin/env bash
# The project's test command. On a fresh machine it makes two virtual environments from the package registries
# and runs ruff and pytest; extra arguments go to pytest (e.g. `bash scripts/test.sh -k parity`).
#   .venv          CPU torch (installed first, so nothing pulls a multi-GB CUDA build), the project, test tools;
#                  numpy 2.x, as ComfyUI and new installs have it.
#   .venv-blender  Blender as a Python module (bpy 4.5 LTS, Python 3.11 only, with its own numpy 1.26), used by
#                  tests/blender to run the add-on checks in a real Blender; skipped elsewhere with a reason.
#   .venv-blender5 the same with bpy 5.0: the add-on checks run a second time against Blender 5.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
BLENDER_VENV=${BLENDER_VENV:-.venv-blender}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
BPY_SPEC=${BPY_SPEC:-bpy==4.5.15}
BPY5_SPEC=${BPY5_SPEC:-bpy==5.0.1}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q "$TORCH_SPEC"
"$PY" -m pip install -q -e ".[test]"

make_blender_venv() {  # $1 folder, $2 bpy requirement
    [ -x "$1/bin/python" ] || "$PYTHON" -m venv "$1"
    "$1/bin/python" -m pip install -q --upgrade pip
    "$1/bin/python" -m pip install -q "$2" openexr pytest pytest-timeout
}
BLENDER5_PYTHON=""
if "$PYTHON" -c 'import sys; raise SystemExit(sys.version_info[:2] != (3, 11))'; then
    make_blender_venv "$BLENDER_VENV" "$BPY_SPEC"
    export SAPIENS2_BLENDER_PYTHON="$PWD/$BLENDER_VENV/bin/python"
    if [ "${SKIP_BLENDER5:-0}" != 1 ]; then
        make_blender_venv "$BLENDER_VENV"5 "$BPY5_SPEC"
        BLENDER5_PYTHON="$PWD/${BLENDER_VENV}5/bin/python"
    fi
fi

# The reference fixtures (official-implementation outputs) live in shared/ beside the checkout when present.
if [ -z "${SAPIENS2_SHARED:-}" ] && [ -d ../shared/fixtures ]; then
    SAPIENS2_SHARED="$(cd ../shared && pwd)"
    export SAPIENS2_SHARED
fi

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
if [ -n "$BLENDER5_PYTHON" ] && [ $# -eq 0 ]; then
    echo "== Blender add-on checks on $BPY5_SPEC"
    SAPIENS2_BLENDER_PYTHON="$BLENDER5_PYTHON" "$PY" -m pytest -q -p no:cacheprovider tests/blender
fi
echo "== full suite (Blender checks on $BPY_SPEC)"
exec "$PY" -m pytest "$@"
