#!/usr/bin/env bash
# The pinned dependencies' wheels (packaging/constraints.txt, plus setuptools and wheel to build gpuhook itself) into
# DIR, for PYTHON's version and platform (default python3): what install.sh installs offline when the source it
# runs from has packaging/wheels (the release tarball, the installer image).
#   bash packaging/download-wheels.sh DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
"$python" -m pip download -q --disable-pip-version-check -d "$1" \
  -r <(grep -v '^#' "$here/constraints.txt") setuptools wheel
