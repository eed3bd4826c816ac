#!/usr/bin/env bash
# Build dist/gpuhook_<version>_<arch>.deb from dist/gpuhook (run packaging/build-binary.sh first): the
# one-dir binary in /opt/gpuhook, gpuhook and gpuhook-runtime in /usr/bin, the default config as a conffile.
# After installing: `gpuhook configure docker` (or containerd, crio, podman), `gpuhook doctor`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x dist/gpuhook/gpuhook ] || { echo "build-deb.sh: run packaging/build-binary.sh first" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
arch=$(dpkg --print-architecture)
root=build/deb
rm -rf "$root"
mkdir -p "$root/DEBIAN" "$root/opt" "$root/usr/bin" "$root/etc/gpuhook" "$root/usr/share/doc/gpuhook"
cp -a dist/gpuhook "$root/opt/gpuhook"
ln -s /opt/gpuhook/gpuhook "$root/usr/bin/gpuhook"
ln -s /opt/gpuhook/gpuhook-runtime "$root/usr/bin/gpuhook-runtime"
install -m 0644 runtime-config/config.toml "$root/etc/gpuhook/config.toml"
install -m 0644 README.md "$root/usr/share/doc/gpuhook/README.md"
cat > "$root/DEBIAN/control" <<CONTROL
Package: gpuhook
Version: $version
Architecture: $arch
Maintainer: gpuhook developers <gpuhook@localhost>
Section: admin
Priority: optional
Depends: libc6
Recommends: runc
Installed-Size: $(du -sk "$root" | cut -f1)
Description: GPUs for containers, without privileges
 An OCI runtime shim and hook that gives containers exactly the NVIDIA or AMD GPUs
 they ask for, checks image/driver compatibility and applies host tuning.
CONTROL
echo /etc/gpuhook/config.toml > "$root/DEBIAN/conffiles"
out="dist/gpuhook_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group "$root" "$out" >/dev/null
echo "built $out"
