#!/usr/bin/env bash
# Build dist/gpuhook_<version>_<debarch>.deb from the self-contained build dist/gpuhook-<version>-<arch> (made by
# packaging/build-bundle.sh, run here when missing): the build in /opt/gpuhook, gpuhook and gpuhook-runtime in
# /usr/bin, the default config as a conffile, the CDI refresh units (not enabled), the warm helper's unit (enabled on
# a first install where systemd runs), and /usr/bin/nvidia-container-runtime-hook (Docker's --gpus hook) linked by
# the postinst only where no such file exists (NVIDIA's toolkit owns that path when installed; the postrm removes
# only gpuhook's own link). It depends on no package: the build carries its own Python, loader and libraries.
# Nothing is registered with an engine: `gpuhook configure docker` (or containerd, crio, podman) does that.
#   bash packaging/build-deb.sh [x86_64|aarch64]
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-$(uname -m)}
case "$arch" in x86_64|amd64) arch=x86_64 debarch=amd64 ;; aarch64|arm64) arch=aarch64 debarch=arm64 ;;
  *) echo "build-deb.sh: no build for architecture $arch" >&2; exit 2 ;; esac
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
build=dist/gpuhook-$version-$arch
[ -x "$build/bin/gpuhook" ] || bash packaging/build-bundle.sh "$arch" >/dev/null
root=build/deb-$arch
rm -rf "$root"
mkdir -p "$root/DEBIAN" "$root/opt" "$root/usr/bin" "$root/etc/gpuhook" "$root/usr/share/doc/gpuhook" \
  "$root/lib/systemd/system"
cp -a "$build" "$root/opt/gpuhook"
rm -f "$root/opt/gpuhook/install.sh"  # dpkg installs and removes it
for b in gpuhook gpuhook-runtime; do ln -s "/opt/gpuhook/bin/$b" "$root/usr/bin/$b"; done
install -m 0644 hook/gpuhook/config.default.toml "$root/etc/gpuhook/config.toml"
install -m 0644 README.md "$root/usr/share/doc/gpuhook/README.md"
cp -r docs "$root/usr/share/doc/gpuhook/docs" && chmod -R u=rwX,go=rX "$root/usr/share/doc/gpuhook/docs"
for u in gpuhook-cdi-refresh.path gpuhook-cdi-refresh.service gpuhook-warm.service; do  # the postinst enables warm
  sed 's|/usr/local/bin/gpuhook|/usr/bin/gpuhook|g' "packaging/systemd/$u" > "$root/lib/systemd/system/$u"
done
bash packaging/scripts.sh deb "$root/DEBIAN"
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm" "$root/DEBIAN/prerm"
cat > "$root/DEBIAN/control" <<CONTROL
Package: gpuhook
Version: $version
Architecture: $debarch
Maintainer: gpuhook developers <gpuhook@localhost>
Section: admin
Priority: optional
Recommends: runc | crun
Installed-Size: $(du -sk "$root" | cut -f1)
Description: GPUs for containers, without privileges
 An OCI runtime shim and hook that gives containers exactly the NVIDIA or AMD GPUs
 they ask for, checks image/driver compatibility and applies host tuning.
 Self-contained: it carries its own Python and libraries and needs no package.
CONTROL
echo /etc/gpuhook/config.toml > "$root/DEBIAN/conffiles"
out="dist/gpuhook_${version}_${debarch}.deb"
dpkg-deb -Zxz -z1 --build --root-owner-group "$root" "$out" >/dev/null
rm -rf "$root"
echo "built $out"
