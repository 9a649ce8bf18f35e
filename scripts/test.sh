#!/usr/bin/env bash
# The project's test command (what CI runs through .ci/run).
#
#   bash scripts/test.sh            the whole matrix (scripts/ci_matrix.py): makes .venv (CPU torch, the package,
#                                   test tools), sets up every host in .hosts/ from ../shared/hosts and the
#                                   package registries (ComfyUI 0.3.64 and 0.33.0 with their pinned frontends and
#                                   the newest registry frontend, comfyui_controlnet_aux, Debian chromium, bpy 4.2
#                                   LTS / 4.5 LTS / 5.0 / 5.3), runs ruff and every test leg in parallel and prints
#                                   each host version with the tests passed on it. Warm (hosts cached in
#                                   .hosts/) ~22 min on 2 idle cores, cold ~27-31 min (docs/testing.md).
#   bash scripts/test.sh ARGS...    just pytest ARGS in .venv (e.g. `-k parity`, `tests/comfy -x`), on the hosts
#                                   a previous full run left in .hosts/hosts.json.
set -euo pipefail
cd "$(dirname "$0")/.."

# The reference fixtures (official-implementation outputs) and host snapshots live in shared/ beside the checkout.
if [ -z "${SAPIENS2_SHARED:-}" ] && [ -d ../shared ]; then
    SAPIENS2_SHARED="$(cd ../shared && pwd)"
    export SAPIENS2_SHARED
fi

if [ $# -eq 0 ]; then
    exec "${PYTHON:-python3}" scripts/ci_matrix.py
fi
bash scripts/ci_hosts.sh venv
exec .venv/bin/python -m pytest "$@"
