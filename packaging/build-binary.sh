#!/usr/bin/env bash
# Build the single-executable gpuhook with PyInstaller into dist/gpuhook/ (one-dir layout: see README,
# Packaging, for why), plus the gpuhook-runtime name and the native pass-through front end beside it.
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
ln -sfn gpuhook gpuhook-runtime-py
ln -sfn gpuhook nvidia-container-runtime-hook   # Docker's --gpus hook (gpuhook.cli.nvidia_hook)
if command -v cc >/dev/null 2>&1; then
  cc -O2 -o gpuhook-runtime ../../hook/gpuhook/cli/native/runtime.c   # the front end; Python behind it
  cc -O2 -o gpuhook-createhook ../../hook/gpuhook/cli/native/createhook.c   # the createContainer hook
  cc -O2 -o gpuhook-hook ../../hook/gpuhook/cli/native/hook.c   # the hook's front end (the warm helper, else gpuhook)
else
  ln -sfn gpuhook gpuhook-runtime
fi
echo "built $(pwd)/gpuhook ($(du -sh . | cut -f1))"
