#!/usr/bin/env bash
# Build what tests/gpu/run.sh carries to a GPU host that may have no compiler, no runc and an older C library, into
# dist/gpu/ (dist/ is git-ignored; run.sh looks there):
#   cuda-probe   tests/gpu/cuda-probe.c linked against glibc 2.17's symbols (zig cc, PyPI's ziglang, as
#                packaging/build-bundle.sh uses it, sharing its cache): runs on any glibc host. Without zig: this
#                machine's cc, and the probe then runs only where the host's glibc is at least this machine's.
#   runc         runc $RUNC_VERSION built static from its Go module with this machine's Go (no seccomp support: run.sh's
#                containers ask none): needs nothing from the host. Without Go, or with --debian-runc: Debian's runc
#                (apt-get download runc, dpkg -x), which needs glibc >= 2.34 and libseccomp.so.2 on the host.
#   BUILD-INFO   what was built, how, and what each file needs from the host
#
#   bash tests/gpu/build.sh [--debian-runc]
#
# Needs network to PyPI (once per machine, for ziglang) and to the Go module proxy or Debian's archive.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=dist/gpu
runc_version=${RUNC_VERSION:-v1.1.15}
zig_version=0.17.1
cache=${GPUHOOK_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuhook-build}
debian_runc=0
case "${1:-}" in
  --debian-runc) debian_runc=1 ;;
  "") ;;
  *) echo "usage: bash tests/gpu/build.sh [--debian-runc]" >&2; exit 2 ;;
esac
say() { echo "tests/gpu/build.sh: $*" >&2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
info=()

# glibc symbol versions a binary asks for (the newest one decides the oldest host it runs on)
newest_glibc() { objdump -T "$1" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 || true; }

# 1. the probe
tools=$cache/tools-zig-$zig_version
if [ ! -x "$tools/bin/python" ] || ! "$tools/bin/python" -c 'import ziglang' 2>/dev/null; then
  say "installing ziglang $zig_version into $tools (once per machine)"
  { rm -rf "$tools" && python3 -m venv "$tools" \
      && "$tools/bin/pip" install -q --disable-pip-version-check "ziglang==$zig_version"; } || rm -rf "$tools"
fi
if [ -x "$tools/bin/python" ] && "$tools/bin/python" -c 'import ziglang' 2>/dev/null; then
  export ZIG_GLOBAL_CACHE_DIR=$cache/zig-cache ZIG_LOCAL_CACHE_DIR=$cache/zig-cache
  "$tools/bin/python" -m ziglang cc -target x86_64-linux-gnu.2.17 -O2 -s -o "$out/cuda-probe.new" \
    tests/gpu/cuda-probe.c -ldl
  how="zig cc $zig_version -target x86_64-linux-gnu.2.17"
else
  say "no zig: building the probe with this machine's cc (it will need the host's glibc to be as new as this one's)"
  cc -O2 -s -o "$out/cuda-probe.new" tests/gpu/cuda-probe.c -ldl
  how="cc ($(cc --version | head -1))"
fi
mv "$out/cuda-probe.new" "$out/cuda-probe"
"$out/cuda-probe" --version >/dev/null
info+=("cuda-probe: $how; needs $(newest_glibc "$out/cuda-probe") or later")

# 2. runc
go=$(command -v go || true)
[ -z "$go" ] && [ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
if [ "$debian_runc" = 0 ] && [ -n "$go" ]; then
  say "building runc $runc_version static from its Go module (about a minute the first time)"
  GOBIN="$work/bin" CGO_ENABLED=1 GOFLAGS=-buildvcs=false "$go" install -tags "netgo osusergo" \
    -ldflags "-s -w -X main.version=${runc_version#v} -X main.gitCommit=$runc_version -extldflags -static" \
    "github.com/opencontainers/runc@$runc_version"
  mv "$work/bin/runc" "$out/runc"
  if file "$out/runc" 2>/dev/null | grep -q 'dynamically linked'; then
    info+=("runc: $runc_version from its Go module ($("$go" version | cut -d' ' -f3)); dynamically linked, needs $(newest_glibc "$out/runc")")
  else
    info+=("runc: $runc_version from its Go module ($("$go" version | cut -d' ' -f3)), static, without seccomp")
  fi
else
  say "copying Debian's runc (apt-get download runc)"
  (cd "$work" && apt-get download runc >/dev/null && dpkg -x runc_*.deb x)
  cp "$work/x/usr/sbin/runc" "$out/runc"
  info+=("runc: Debian's $(basename "$work"/runc_*.deb .deb); needs $(newest_glibc "$out/runc") and libseccomp.so.2")
fi
"$out/runc" --version >/dev/null
printf '%s\n' "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME")" \
  "${info[@]}" > "$out/BUILD-INFO"
cat "$out/BUILD-INFO"
echo "built $out/cuda-probe and $out/runc: carry $out/ with the release tarball, then: bash tests/gpu/run.sh"
