#!/usr/bin/env bash
# A release tarball that installs offline: this checkout (git archive of HEAD) plus the pinned dependencies'
# wheels in packaging/wheels, for this machine's Python and platform. `tar xf` it, then `./install.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git archive --prefix="gpuhook-$version/" HEAD | tar -x -C "$work"
"$python" -m pip download -q --disable-pip-version-check -d "$work/gpuhook-$version/packaging/wheels" \
  -r <(grep -v '^#' packaging/constraints.txt) setuptools wheel
mkdir -p dist
tar -C "$work" -czf "dist/gpuhook-$version.tar.gz" "gpuhook-$version"
echo "built dist/gpuhook-$version.tar.gz"
