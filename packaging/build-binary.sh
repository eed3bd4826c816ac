#!/usr/bin/env bash
# Build the single-executable gpuhook with PyInstaller into dist/gpuhook/ (one-dir layout: see docs/packaging.md
# for why), plus the gpuhook-runtime name and the native pass-through front end beside it.
#   bash packaging/build-binary.sh            (uses .venv; PYTHON=... to choose another interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
"$python" -m pip install -q --disable-pip-version-check pyinstaller
"$python" -m PyInstaller --noconfirm --clean --log-level WARN --onedir --name gpuhook \
  --distpath dist --workpath build/pyinstaller --specpath build \
  --paths hook --collect-submodules gpuhook --collect-data gpuhook \
  --collect-data jsonschema_specifications \
  --hidden-import pynvml --hidden-import amdsmi --hidden-import amdsmi.amdsmi_interface \
  --hidden-import amdsmi.amdsmi_wrapper --hidden-import amdsmi.amdsmi_exception --collect-submodules tomlkit \
  packaging/gpuhook_main.py
cd dist/gpuhook
case "$python" in /*) ;; */*) python="$(cd ../.. && pwd)/$python" ;; esac
ln -sfn gpuhook gpuhook-runtime-py
ln -sfn gpuhook nvidia-container-runtime-hook-py   # Docker's --gpus hook (gpuhook.cli.nvidia_hook), the direct path
# the native front ends (gpuhook-runtime, gpuhook-createhook, gpuhook-hook), built by the code install.sh uses, with
# the digest of their sources beside them for `gpuhook doctor`; a binary without them is not built
echo "build-binary.sh: building the native front ends"
PYTHONPATH=../../hook "$python" -m gpuhook.cli.launcher --build-only . \
  || { echo "build-binary.sh: stopped: install gcc and libc6-dev" >&2; exit 1; }
ln -sfn gpuhook-hook nvidia-container-runtime-hook  # Docker's --gpus hook: the native front end (native/hook.c)
echo "built $(pwd)/gpuhook ($(du -sh . | cut -f1))"
