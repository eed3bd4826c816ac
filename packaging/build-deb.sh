#!/usr/bin/env bash
# Build dist/gpuhook_<version>_<arch>.deb from dist/gpuhook (run packaging/build-binary.sh first): the
# one-dir binary in /opt/gpuhook, gpuhook and gpuhook-runtime in /usr/bin, the default config as a conffile, the
# CDI refresh units (not enabled), and /usr/bin/nvidia-container-runtime-hook (Docker's --gpus hook) linked by the
# postinst only where no such file exists (NVIDIA's toolkit owns that path when installed; dpkg then replaces the
# link, which no package owns, and the postrm removes only gpuhook's own link).
# After installing: `gpuhook configure docker` (or containerd, crio, podman), `gpuhook doctor`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x dist/gpuhook/gpuhook ] || { echo "build-deb.sh: run packaging/build-binary.sh first" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
arch=$(dpkg --print-architecture)
root=build/deb
rm -rf "$root"
mkdir -p "$root/DEBIAN" "$root/opt" "$root/usr/bin" "$root/etc/gpuhook" "$root/usr/share/doc/gpuhook" \
  "$root/lib/systemd/system"
cp -a dist/gpuhook "$root/opt/gpuhook"
ln -s /opt/gpuhook/gpuhook "$root/usr/bin/gpuhook"
ln -s /opt/gpuhook/gpuhook-runtime "$root/usr/bin/gpuhook-runtime"
install -m 0644 hook/gpuhook/config.default.toml "$root/etc/gpuhook/config.toml"
install -m 0644 README.md "$root/usr/share/doc/gpuhook/README.md"
cp -r docs "$root/usr/share/doc/gpuhook/docs" && chmod -R u=rwX,go=rX "$root/usr/share/doc/gpuhook/docs"
for u in gpuhook-cdi-refresh.path gpuhook-cdi-refresh.service gpuhook-warm.service; do  # the postinst enables warm
  sed 's|/usr/local/bin/gpuhook|/usr/bin/gpuhook|g' "packaging/systemd/$u" > "$root/lib/systemd/system/$u"
done
hook=/usr/bin/nvidia-container-runtime-hook
cat > "$root/DEBIAN/postinst" <<POSTINST
#!/bin/sh
set -e
# Docker's --gpus hook: gpuhook's, unless a file is there already (NVIDIA's container toolkit)
if [ "\$1" = configure ] && [ ! -e "\${DPKG_ROOT:-}$hook" ] && [ ! -L "\${DPKG_ROOT:-}$hook" ]; then
  ln -s /opt/gpuhook/nvidia-container-runtime-hook "\${DPKG_ROOT:-}$hook"
fi
# the warm helper, on by default where systemd runs (systemctl disable --now gpuhook-warm turns it off for good)
if [ "\$1" = configure ] && [ -z "\${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  if [ -z "\$2" ]; then systemctl enable gpuhook-warm.service || true; fi  # first install: on; an upgrade keeps the admin's choice
  systemctl try-restart gpuhook-warm.service || true
  if [ -z "\$2" ]; then systemctl start gpuhook-warm.service || true; fi
fi
POSTINST
cat > "$root/DEBIAN/prerm" <<PRERM
#!/bin/sh
set -e
if [ "\$1" = remove ] && [ -z "\${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
  systemctl disable --now gpuhook-warm.service || true
fi
PRERM
cat > "$root/DEBIAN/postrm" <<POSTRM
#!/bin/sh
set -e
if [ "\$1" = remove ] || [ "\$1" = purge ]; then
  if [ "\$(readlink "\${DPKG_ROOT:-}$hook" 2>/dev/null)" = /opt/gpuhook/nvidia-container-runtime-hook ]; then
    rm -f "\${DPKG_ROOT:-}$hook"
  fi
fi
POSTRM
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm" "$root/DEBIAN/prerm"
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
