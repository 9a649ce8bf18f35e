#!/usr/bin/env bash
# Set up one host of the test matrix in .hosts/ (ignored by git), from ../shared/hosts and the package registries
# only (no other network). Each step is idempotent and stamps its inputs, so a warm run skips what is current.
#
#   ci_hosts.sh venv                     the project's .venv: CPU torch first (so nothing pulls a multi-GB CUDA
#                                        build), the package with its test extra, playwright (never `playwright
#                                        install`: the browser tests drive Debian's chromium)
#   ci_hosts.sh comfy VERSION            ComfyUI VERSION from ../shared/hosts/comfyui-VERSION.tar.gz + its venv
#                                        (../shared/tools/setup_comfyui.sh), openexr, usd-core, comfyui_controlnet_aux's needs
#   ci_hosts.sh aux VERSION              comfyui_controlnet_aux VERSION unpacked from ../shared/hosts
#   ci_hosts.sh frontend VERSION         comfyui-frontend-package VERSION into .hosts/frontend-VERSION (served
#                                        with --front-end-root)
#   ci_hosts.sh bpy VERSION PYTHON       Blender as a Python module: venv .hosts/bpy-VERSION made with PYTHON
#   ci_hosts.sh chromium                 Debian's chromium (apt) where it is missing; root only
#
# Prints what it did on stdout; the matrix (scripts/ci_matrix.py) runs these in parallel and writes hosts.json.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
HOSTS=$REPO/.hosts
SHARED=${SAPIENS2_SHARED:-$REPO/../shared}
mkdir -p "$HOSTS"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# comfyui_controlnet_aux's requirements.txt minus what a CPU test host must not or need not install: torch and
# torchvision (ComfyUI's own pins), opencv-python (the headless build instead: one cv2, no GUI libraries),
# onnxruntime-gpu (CUDA; DWPose's ONNX models are downloads anyway), mediapipe (pulls opencv-contrib, a second
# cv2; only the MediaPipe face node needs it) and trimesh[easy] (MeshGraphormer, whose data the snapshot leaves
# out). The nodes that need them fail to import on their own; the POSE_KEYPOINT nodes do not need them.
AUX_SKIP='^(torch|torchvision|opencv-python|onnxruntime-gpu|mediapipe.*|trimesh.*)\s*$'
AUX_OPENCV=opencv-python-headless==4.14.0.94

stamp_ok() {  # $1 stamp file, $2 expected content: true when the step is already done with these inputs
    [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]
}

venv() {
    local python=${PYTHON:-python3} venv=$REPO/${VENV:-.venv} torch=${TORCH_SPEC:-torch==2.13.0}
    local key stamp="$REPO/${VENV:-.venv}/.sapiens2-stamp"
    key="$torch $(sha256sum pyproject.toml | cut -c1-16) $("$python" -V 2>&1)"
    if stamp_ok "$stamp" "$key"; then echo "main venv: up to date"; return; fi
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q "$torch"
    "$venv/bin/python" -m pip install -q -e ".[test]" playwright
    echo "$key" >"$stamp"
    echo "main venv: $venv ($torch)"
}

comfy() {
    local version=$1
    local dest="$HOSTS/comfyui-$version" archive="$SHARED/hosts/comfyui-$version.tar.gz"
    local aux_req="$HOSTS/comfyui_controlnet_aux-$version-req.txt" key stamp="$HOSTS/comfyui-$version.stamp"
    [ -f "$archive" ] || { echo "ci_hosts.sh: no $archive" >&2; exit 3; }
    aux_requirements >"$aux_req"
    key="$(sha256sum "$archive" "$SHARED/tools/setup_comfyui.sh" "$aux_req" "$0" | sha256sum)"
    if stamp_ok "$stamp" "$key"; then echo "comfyui $version: up to date"; return; fi
    shared_torch "$dest-venv"
    bash "$SHARED/tools/setup_comfyui.sh" "$archive" "$dest"
    "$dest-venv/bin/python" -m pip install -q openexr "usd-core==26.11" -r "$aux_req"  # usd-core: Save USD node
    echo "$key" >"$stamp"
    echo "comfyui $version: set up in $dest"
}

shared_torch() {  # $1 a ComfyUI venv (made here if missing) that takes torch from one shared folder
    # Why: torch/torchvision/torchaudio as setup_comfyui.sh pins them are a CUDA build with its nvidia wheels,
    # about 5.5 GB per venv; two ComfyUI hosts holding their own copies filled a CI machine's disk. One copy in
    # .hosts/comfy-torch is put on each ComfyUI venv's path by a .pth file (after the venv's own site-packages, so
    # a package the venv installs itself still wins). pip then finds the pins already satisfied and never
    # changes the shared folder ("outside environment"). Both ComfyUI set-ups run at once: a lock makes one
    # install it while the other waits.
    local venv=$1 shared="$HOSTS/comfy-torch" pins key site
    pins=$(grep -o 'install -q torch==[^ ]* torchvision==[^ ]* torchaudio==[^ ]*' "$SHARED/tools/setup_comfyui.sh" \
        | sed 's/^install -q //') || { echo "ci_hosts.sh: no torch pins in setup_comfyui.sh" >&2; exit 3; }
    key="$pins $(python3 -V 2>&1)"
    (
        flock 9
        if ! stamp_ok "$shared.stamp" "$key"; then
            rm -rf "$shared"
            python3 -m venv "$shared"
            # shellcheck disable=SC2086  # the pins are separate words
            "$shared/bin/python" -m pip install -q $pins
            echo "$key" >"$shared.stamp"
        fi
    ) 9>"$HOSTS/comfy-torch.lock"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$shared/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/sapiens2-shared-torch.pth"
}

aux_archive() {
    ls "$SHARED"/hosts/comfyui_controlnet_aux-*.tar.gz 2>/dev/null | sort -V | tail -1
}

aux_requirements() {  # the pack's requirements for a CPU test host (see AUX_SKIP), read from the snapshot
    local archive
    archive=$(aux_archive)
    [ -n "$archive" ] || { echo "ci_hosts.sh: no comfyui_controlnet_aux snapshot in $SHARED/hosts" >&2; exit 3; }
    tar xzf "$archive" --wildcards -O '*/requirements.txt' | grep -v -E "$AUX_SKIP" | grep -v '^\s*$'
    echo "$AUX_OPENCV"
}

aux() {
    local version=$1
    # .../controlnet_aux-VERSION/comfyui_controlnet_aux: linked into custom_nodes under its usual folder name
    local archive="$SHARED/hosts/comfyui_controlnet_aux-$version.tar.gz"
    local dest="$HOSTS/controlnet_aux-$version/comfyui_controlnet_aux"
    [ -f "$archive" ] || { echo "ci_hosts.sh: no $archive" >&2; exit 3; }
    if [ ! -f "$dest/__init__.py" ]; then
        mkdir -p "$dest"
        tar xzf "$archive" -C "$dest" --strip-components=1
    fi
    echo "comfyui_controlnet_aux $version: $dest"
}

frontend() {
    local version=$1
    local dest="$HOSTS/frontend-$version"
    if [ ! -d "$dest/comfyui_frontend_package/static" ]; then
        rm -rf "$dest"
        "${PIP_PYTHON:-python3}" -m pip install -q --no-deps --target "$dest" "comfyui-frontend-package==$version"
    fi
    echo "frontend $version: $dest/comfyui_frontend_package/static"
}

bpy() {
    local version=$1 python=$2
    local dest="$HOSTS/bpy-$version" stamp="$HOSTS/bpy-$version.stamp"
    local key
    key="bpy==$version openexr pytest pytest-timeout $("$python" -V 2>&1)"
    if stamp_ok "$stamp" "$key"; then echo "bpy $version: up to date"; return; fi
    [ -x "$dest/bin/python" ] || "$python" -m venv "$dest"
    "$dest/bin/python" -m pip install -q "bpy==$version" openexr pytest pytest-timeout
    echo "$key" >"$stamp"
    echo "bpy $version: set up in $dest"
}

chromium() {
    # `type -P`, not `command -v`: the latter finds this very function and would report chromium as present.
    if type -P chromium >/dev/null || type -P chromium-browser >/dev/null; then
        echo "chromium: $(type -P chromium || type -P chromium-browser)"
        return
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "ci_hosts.sh: chromium is missing and this is not root: apt-get install chromium" >&2
        exit 4
    fi
    # The package lists may be stale on a fresh machine: refresh once if the first try finds nothing.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || {
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null
    }
    type -P chromium >/dev/null || { echo "ci_hosts.sh: apt-get installed no chromium binary" >&2; exit 4; }
    echo "chromium: $(type -P chromium)"
}

step=${1:?usage: ci_hosts.sh venv|comfy|aux|frontend|bpy|chromium ...}
shift
case "$step" in
    venv | comfy | aux | frontend | bpy | chromium) "$step" "$@" ;;
    *) echo "ci_hosts.sh: unknown step $step" >&2; exit 2 ;;
esac
