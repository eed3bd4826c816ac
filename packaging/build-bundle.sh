#!/usr/bin/env bash
# Build gpuhook's self-contained build for one architecture into dist/gpuhook-<version>-<arch>/: everything gpuhook
# runs on a host, needing from the host only a Linux kernel (>= 4.18) and the container runtime:
#   bin/       the native front ends (gpuhook-runtime, gpuhook-hook, gpuhook-createhook; static, musl) and the
#              Python entry points (gpuhook, gpuhook-runtime-py, nvidia-container-runtime-hook-py, python3): copies
#              of one static launcher (packaging/bundle/pylaunch.c) that runs the build's own Python
#   lib/       the build's own loader and C library and the libraries Python's modules need (Debian 12's, glibc
#              2.36), Python's standard library (lib/python3.11), gpuhook and its pinned dependencies
#              (lib/python3/dist-packages, manylinux wheels), the interpreter (lib/gpuhook/python)
#   share/gpuhook/  the default config, the systemd units, BUILD-MANIFEST (every Debian package and wheel in it)
#   install.sh the checkout's installer: run from here it installs this build (docs/packaging.md)
# Nothing in it uses the host's glibc: the launchers and front ends are static, and the Python part runs through
# the build's own loader. `gpuhook simulate` still compiles its stub libraries (cc, or GPUHOOK_STUB_CC).
#
#   bash packaging/build-bundle.sh [x86_64|aarch64]    (default: this machine's; both work from an x86_64 Debian)
#
# Needs apt-get (Debian's packages for the target architecture are downloaded, never installed), pip and network
# to the package registries; zig (PyPI's ziglang) compiles the C parts for either architecture. Everything fetched
# is cached by key under $GPUHOOK_BUILD_CACHE (default ~/.cache/gpuhook-build): a second build takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
arch=${1:-$(uname -m)}
case "$arch" in
  x86_64|amd64) arch=x86_64 debarch=amd64 loader=ld-linux-x86-64.so.2 triplet=x86_64-linux-gnu ;;
  aarch64|arm64) arch=aarch64 debarch=arm64 loader=ld-linux-aarch64.so.1 triplet=aarch64-linux-gnu ;;
  *) echo "build-bundle.sh: no build for architecture $arch (x86_64 or aarch64)" >&2; exit 2 ;;
esac
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
cache=${GPUHOOK_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhook-build}
host_python=${PYTHON:-python3}
started=$SECONDS
export PIP_ROOT_USER_ACTION=ignore ZIG_GLOBAL_CACHE_DIR=$cache/zig-cache ZIG_LOCAL_CACHE_DIR=$cache/zig-cache
say() { echo "build-bundle.sh [$arch, $((SECONDS - started))s]: $*" >&2; }
# Debian 12's packages the interpreter and its modules need (and nothing for curses, readline, sqlite, dbm, tk)
suite=bookworm
packages="libc6 libgcc-s1 libstdc++6 python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libssl3 libffi8
  zlib1g libexpat1 libbz2-1.0 liblzma5 libuuid1 libcrypt1 libnsl2 libtirpc3 libgssapi-krb5-2 libkrb5-3
  libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1 media-types"
pyver=3.11

# zig (PyPI's ziglang), once per machine: the C compiler for both architectures, static musl and old glibc targets
zig_version=0.17.1
tools=$cache/tools-zig-$zig_version
if [ ! -x "$tools/bin/python" ] || ! "$tools/bin/python" -c 'import ziglang' 2>/dev/null; then
  say "installing ziglang $zig_version into $tools (once per machine)"
  rm -rf "$tools" && "$host_python" -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check "ziglang==$zig_version"
fi
zigcc() { "$tools/bin/python" -m ziglang cc "$@"; }

# 1. The runtime (interpreter, standard library, libraries, dependencies): cached by the packages, the pinned
#    wheels and this script's recipe for it.
recipe=$(sed -n '/^# 1\. The runtime/,/^# 2\. gpuhook/p' "$0")
key=$( { echo "$arch $suite $packages $pyver"; cat packaging/constraints.txt; echo "$recipe"; } | sha256sum | cut -c1-16)
runtime=$cache/runtime-$arch-$key
if [ ! -f "$runtime/.complete" ]; then
  say "assembling the runtime from Debian $suite ($debarch) and the pinned wheels into $runtime (once per key)"
  rm -rf "$runtime" && mkdir -p "$runtime/debs" "$runtime/apt/lists/partial" "$runtime/apt/archives/partial"
  apt=(-o "APT::Architecture=$debarch" -o "APT::Architectures=$debarch" -o "Dir::State::Lists=$runtime/apt/lists"
       -o "Dir::Cache=$runtime/apt" -o "Dir::State::status=/dev/null" -o "Debug::NoLocking=1")
  apt-get "${apt[@]}" update -qq
  (cd "$runtime/debs" && apt-get "${apt[@]}" download $packages >/dev/null)
  root=$runtime/root
  for deb in "$runtime"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
  out=$runtime/tree
  mkdir -p "$out/lib/gpuhook" "$out/lib/python3/dist-packages" "$out/share/gpuhook"
  # the loader and every shared library, flat in lib/ (the launcher's --library-path)
  for d in "$root/lib/$triplet" "$root/usr/lib/$triplet"; do
    [ -d "$d" ] && find "$d" -maxdepth 1 \( -type f -o -type l \) -name '*.so*' -exec cp -a {} "$out/lib/" \;
  done
  cp -L "$root/usr/bin/python$pyver" "$out/lib/gpuhook/python"
  cp -a "$root/usr/lib/python$pyver" "$out/lib/python$pyver"
  # what a host tool never uses: tests, IDLE, tkinter, the 2to3 and venv bootstraps, modules whose libraries
  # the build does not carry
  # Debian's sitecustomize is a link to the host's /etc: the build runs no file of the host's
  (cd "$out/lib/python$pyver" && rm -rf sitecustomize.py test idlelib tkinter turtledemo lib2to3 ensurepip pydoc_data \
     distutils/tests unittest/test config-*-"$triplet" \
     lib-dynload/_tkinter.* lib-dynload/_curses* lib-dynload/readline.* lib-dynload/_dbm.* lib-dynload/_gdbm.* \
     lib-dynload/_sqlite3.*)
  find "$out/lib/python$pyver" -name __pycache__ -prune -exec rm -rf {} +
  # the pinned dependencies: manylinux wheels for this architecture and Python, never built here
  "$host_python" -m pip install -q --disable-pip-version-check --no-deps --no-compile --only-binary=:all: \
    --target "$out/lib/python3/dist-packages" --implementation cp --python-version "$pyver" \
    --abi "cp${pyver/./}" --abi abi3 --abi none --platform "manylinux2014_$arch" --platform "manylinux_2_17_$arch" \
    --platform "manylinux_2_28_$arch" --platform any -r <(grep -v '^#' packaging/constraints.txt)
  rm -rf "$out/lib/python3/dist-packages/bin"
  { echo "# gpuhook's self-contained build ($arch): what it carries"
    for deb in "$runtime"/debs/*.deb; do echo "debian $(dpkg-deb -f "$deb" Package Version | paste -sd' ')"; done
    for d in "$out"/lib/python3/dist-packages/*.dist-info; do
      n=$(basename "$d" .dist-info); echo "wheel ${n%-*} ${n##*-}"; done
  } > "$out/share/gpuhook/BUILD-MANIFEST"
  rm -rf "$root" "$runtime/apt"
  touch "$runtime/.complete"
fi

# 2. gpuhook itself and its native parts: every build (a few seconds)
dest=dist/gpuhook-$version-$arch
work=$src/$dest.tmp
rm -rf "$work" && mkdir -p dist && cp -a "$runtime/tree" "$work"
say "gpuhook $version into $dest"
"$host_python" -m pip install -q --disable-pip-version-check --no-deps --no-compile \
  --target "$work/lib/python3/dist-packages" "$src"
rm -rf "$work/lib/python3/dist-packages/bin"
# bytecode for everything (unchecked: the files never change in place; an upgrade replaces the whole build)
"$host_python" -m compileall -q -j 0 --invalidation-mode unchecked-hash "$work/lib/python$pyver" \
  "$work/lib/python3/dist-packages" >/dev/null
# the static launcher, one copy per Python entry point (a copy, not a link: it finds its name in /proc/self/exe)
gen=$work/.gen && mkdir -p "$gen"
PYTHONPATH=hook "$host_python" - "$loader" > "$gen/entries.h" <<'PY'
import sys
from gpuhook.cli.launcher import ENTRIES
print(f'#define LOADER "{sys.argv[1]}"')
print("static const char *ENTRIES[][2] = {")
for name, module in ENTRIES.items():
    print(f'    {{"{name}", "{module}"}},')
print("    {NULL, NULL}};")
PY
mkdir -p "$work/bin"
zigcc -target "$arch-linux-musl" -static -O2 -s -I "$gen" -o "$gen/pylaunch" packaging/bundle/pylaunch.c
for name in python3 $(PYTHONPATH=hook "$host_python" -c 'from gpuhook.cli.launcher import ENTRIES; print(*ENTRIES)'); do
  install -m 0755 "$gen/pylaunch" "$work/bin/$name"
done
# the native front ends, static, with the digest of their sources (gpuhook doctor checks it)
cache_dir=$(PYTHONPATH=hook "$host_python" -c 'from gpuhook.configfile import CACHE_DIR; print(CACHE_DIR)')
for pair in runtime.c:gpuhook-runtime createhook.c:gpuhook-createhook hook.c:gpuhook-hook; do
  zigcc -target "$arch-linux-musl" -static -O2 -s "-DCACHE_DIR=\"$cache_dir\"" -o "$work/bin/${pair#*:}" \
    "hook/gpuhook/cli/native/${pair%%:*}"
done
ln -sfn gpuhook-hook "$work/bin/nvidia-container-runtime-hook"
PYTHONPATH=hook "$host_python" -c 'from gpuhook.cli.launcher import sources_digest; print(sources_digest())' \
  > "$work/bin/.native-sources"
# the default config, the units (their paths are install.sh's to write), the installer
mkdir -p "$work/share/gpuhook/systemd"
install -m 0644 hook/gpuhook/config.default.toml "$work/share/gpuhook/config.default.toml"
install -m 0644 packaging/systemd/*.service packaging/systemd/*.path "$work/share/gpuhook/systemd/"
install -m 0755 install.sh "$work/install.sh"
echo "$version $arch" > "$work/share/gpuhook/BUILD"
rm -rf "$gen"
# no link may lead out of the build (a host's file would be read, or run, in its place)
outside=$(cd "$work" && find . -type l | while read -r l; do
  case "$(readlink -f "$l")" in "$work"/*) ;; *) echo "$l -> $(readlink "$l")" ;; esac; done)
[ -z "$outside" ] || { echo "build-bundle.sh: links out of the build: $outside" >&2; exit 1; }
# no executable or library may need a newer glibc than the build's own, and every entry point is static
"$host_python" packaging/bundle/elfcheck.py "$work"
rm -rf "$dest" && mv "$work" "$dest"
say "built $dest ($(du -sh "$dest" | cut -f1))"
echo "$dest"
