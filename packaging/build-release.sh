#!/usr/bin/env bash
# Every release artifact, for x86_64 and arm64, into dist/:
#   gpuhook-<version>-<arch>/                 the self-contained build (packaging/build-bundle.sh)
#   gpuhook-<version>-linux-<arch>.tar.gz     that build as a tarball: `tar xf` it, then `./gpuhook-*/install.sh`
#   gpuhook_<version>_<debarch>.deb           (packaging/build-deb.sh)
#   gpuhook-<version>-1.<arch>.rpm            (packaging/build-rpm.sh)
#   gpuhook-<version>-src.tar.gz              this checkout with its pinned dependencies' wheels, for hosts whose own
#                                             Python (3.11 or newer) install.sh should use: it installs offline
# The builds' downloads are cached (packaging/build-bundle.sh): a second run takes about a minute.
#   bash packaging/build-release.sh [ARCH...]   (default: x86_64 aarch64)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
arches=${*:-x86_64 aarch64}
mkdir -p dist
for arch in $arches; do
  build=$(bash packaging/build-bundle.sh "$arch")
  arch=${build##*-}
  tar -C dist --owner=0 --group=0 -czf "dist/gpuhook-$version-linux-$arch.tar.gz" "gpuhook-$version-$arch"
  echo "built dist/gpuhook-$version-linux-$arch.tar.gz"
  bash packaging/build-deb.sh "$arch"
  bash packaging/build-rpm.sh "$arch" 2>/dev/null
done
# the source tarball: this checkout (git archive of HEAD; an export without .git as it is) and the wheels
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if git rev-parse --git-dir >/dev/null 2>&1; then
  git archive --prefix="gpuhook-$version/" HEAD | tar -x -C "$work"
else  # an export of the tree (no .git): the files as they are, less what builds make
  mkdir "$work/gpuhook-$version"
  tar -c --exclude=./dist --exclude=./build --exclude=./.venv . | tar -x -C "$work/gpuhook-$version"
fi
PYTHON=$python bash packaging/download-wheels.sh "$work/gpuhook-$version/packaging/wheels"
tar -C "$work" -czf "dist/gpuhook-$version-src.tar.gz" "gpuhook-$version"
echo "built dist/gpuhook-$version-src.tar.gz"
