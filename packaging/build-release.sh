#!/usr/bin/env bash
# A release tarball that installs offline: this checkout (git archive of HEAD; an export without .git as it is) plus the pinned dependencies'
# wheels in packaging/wheels, for this machine's Python and platform. `tar xf` it, then `./install.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if git rev-parse --git-dir >/dev/null 2>&1; then
  git archive --prefix="gpuhook-$version/" HEAD | tar -x -C "$work"
else  # an export of the tree (no .git): the files as they are, less what builds make
  mkdir "$work/gpuhook-$version"
  tar -c --exclude=./dist --exclude=./build --exclude=./.venv . | tar -x -C "$work/gpuhook-$version"
fi
PYTHON=$python bash packaging/download-wheels.sh "$work/gpuhook-$version/packaging/wheels"
mkdir -p dist
tar -C "$work" -czf "dist/gpuhook-$version.tar.gz" "gpuhook-$version"
echo "built dist/gpuhook-$version.tar.gz"
