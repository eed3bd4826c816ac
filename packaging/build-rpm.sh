#!/usr/bin/env bash
# Build dist/gpuhook-<version>-1.<arch>.rpm from the self-contained build dist/gpuhook-<version>-<arch> (made by
# packaging/build-bundle.sh, run here when missing), with rpmbuild (Debian's `rpm` package builds it on any
# Debian): the same files and scripts as the .deb (packaging/build-deb.sh, packaging/scripts.sh), for RHEL, Rocky,
# Alma, Amazon Linux, SLES, openEuler and Kylin. It requires no package (no automatic dependencies: the build
# carries its own Python, loader and libraries, which must not be offered to other packages either).
#   bash packaging/build-rpm.sh [x86_64|aarch64]
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-$(uname -m)}
case "$arch" in x86_64|amd64) arch=x86_64 ;; aarch64|arm64) arch=aarch64 ;;
  *) echo "build-rpm.sh: no build for architecture $arch" >&2; exit 2 ;; esac
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
build=dist/gpuhook-$version-$arch
[ -x "$build/bin/gpuhook" ] || bash packaging/build-bundle.sh "$arch" >/dev/null
top=$(pwd)/build/rpm-$arch
rm -rf "$top" && mkdir -p "$top/root/opt" "$top/root/usr/bin" "$top/root/etc/gpuhook" "$top/root/usr/lib/systemd/system" \
  "$top/root/usr/share/doc/gpuhook" "$top/scripts"
cp -a "$build" "$top/root/opt/gpuhook"
rm -f "$top/root/opt/gpuhook/install.sh"
for b in gpuhook gpuhook-runtime; do ln -s "/opt/gpuhook/bin/$b" "$top/root/usr/bin/$b"; done
install -m 0644 hook/gpuhook/config.default.toml "$top/root/etc/gpuhook/config.toml"
install -m 0644 README.md "$top/root/usr/share/doc/gpuhook/README.md"
for u in gpuhook-cdi-refresh.path gpuhook-cdi-refresh.service gpuhook-warm.service; do
  sed 's|/usr/local/bin/gpuhook|/usr/bin/gpuhook|g' "packaging/systemd/$u" > "$top/root/usr/lib/systemd/system/$u"
done
bash packaging/scripts.sh rpm "$top/scripts"
cat > "$top/gpuhook.spec" <<SPEC
Name: gpuhook
Version: $version
Release: 1
Summary: GPUs for containers, without privileges
License: Apache-2.0
AutoReqProv: no
Recommends: (runc or crun)
%description
An OCI runtime shim and hook that gives containers exactly the NVIDIA or AMD GPUs they ask for, checks
image/driver compatibility and applies host tuning. Self-contained: it carries its own Python and libraries.
%global __os_install_post %{nil}
%global debug_package %{nil}
%global _build_id_links none
%install
cp -a $top/root/. %{buildroot}/
%files
/opt/gpuhook
/usr/bin/gpuhook
/usr/bin/gpuhook-runtime
%config(noreplace) /etc/gpuhook/config.toml
/usr/lib/systemd/system/gpuhook-cdi-refresh.path
/usr/lib/systemd/system/gpuhook-cdi-refresh.service
/usr/lib/systemd/system/gpuhook-warm.service
%doc /usr/share/doc/gpuhook/README.md
%post -p /bin/sh
$(tail -n +2 "$top/scripts/post")
%preun -p /bin/sh
$(tail -n +2 "$top/scripts/preun")
%postun -p /bin/sh
$(tail -n +2 "$top/scripts/postun")
SPEC
rpmbuild -bb --quiet --target "$arch-linux" --define "_topdir $top/rpmbuild" --define "_rpmdir $(pwd)/dist" \
  --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" --define "_binary_payload w1.xzdio" \
  "$top/gpuhook.spec" >/dev/null
rm -rf "$top"
echo "built dist/gpuhook-$version-1.$arch.rpm"
