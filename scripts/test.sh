#!/usr/bin/env bash
# The project's test command: on a fresh machine it makes .venv, installs everything the tests need from the
# package registries (CPU torch first, so nothing pulls a multi-GB CUDA build), then runs ruff and pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k parity`).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip
"$PY" -m pip install -q "$TORCH_SPEC"
"$PY" -m pip install -q -e ".[test]"
# Blender as a Python module: the bpy 4.5 wheel exists for Python 3.11 only (the Blender tests skip elsewhere).
if "$PY" -c 'import sys; raise SystemExit(sys.version_info[:2] != (3, 11))'; then
    "$PY" -m pip install -q -e ".[blender-test]"
fi

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
exec "$PY" -m pytest "$@"
