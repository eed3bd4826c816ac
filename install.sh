#!/usr/bin/env bash
# Install gpuhook (run as root), from a checkout or from its self-contained build:
#   ./install.sh            from a checkout: a virtualenv in /opt/gpuhook on the host's python3 (3.11 or newer), the
#                           native front ends built with the host's cc; gpuhook + gpuhook-runtime linked into
#                           /usr/local/bin, /etc/gpuhook/config.toml written if there is none. Where the host's
#                           Python does not fit, the self-contained build (dist/gpuhook-<version>-<arch>, from
#                           packaging/build-bundle.sh) is installed instead, and install.sh says so
#   ./install.sh            from the self-contained build (the release tarball unpacked: this script sits at its top):
#                           that build, copied whole to /opt/gpuhook; it needs no Python, compiler or package manager
#   ./install.sh --bundle DIR|TARBALL  install this self-contained build (--binary DIR: the same)
#   ./install.sh --demo     the same, then `gpuhook demo` (a container through the shim; simulated GPUs if none)
#   ./install.sh --configure ENGINE,...   also register gpuhook with these engines (gpuhook configure ENGINE, whose
#                              choices are the engines gpuhook knows: gpuhook configure --help)
#   ./install.sh --uninstall   revert those registrations, remove the links and the installation (the config stays)
#   ./install.sh --cdi         also write CDI specs (gpuhook cdi generate) and enable the systemd units that
#                              regenerate them after a driver change (gpuhook-cdi-refresh.path)
#   ./install.sh --no-warm     do not enable the warm helper (gpuhook-warm.service), which is enabled by default
#                              where systemd runs and the native front ends are installed: GPU containers and
#                              gpuhook's hooks start without a Python start of their own
#   ./install.sh --no-native   (checkout) install without the native front ends (gpuhook-runtime, gpuhook-hook,
#                              gpuhook-createhook): every container then starts Python (about twice runc's cost);
#                              without it a front end that does not build stops the install (exit 1)
#   ./install.sh --no-nvidia-hook  do not link nvidia-container-runtime-hook (Docker's --gpus hook) into the bin dir;
#                              it is never linked where NVIDIA's container toolkit provides one
# Dependencies are pinned (packaging/constraints.txt); a source tarball carries their wheels in packaging/wheels and
# then installs offline. Idempotent: running it again upgrades in place.
set -euo pipefail
started=$(date +%s)
step() { echo "gpuhook install [$(( $(date +%s) - started ))s]: $*"; }
# gpuhook's own executable, whatever link or prefix leads to it: a gpuhook launcher names gpuhook's module in its
# first lines; the self-contained build's launcher is called gpuhook, its --gpus hook leads to gpuhook-hook. NVIDIA's
# hook is neither.
is_gpuhooks() {
  local real
  real=$(readlink -f "$1" 2>/dev/null) || return 1
  case "$(basename "$real")" in gpuhook|gpuhook-hook) return 0 ;; esac  # a launcher (Python's or the build's); the native hook
  head -c 512 "$real" 2>/dev/null | grep -q 'gpuhook\.cli\.'
}
src=$(cd "$(dirname "$0")" && pwd)
prefix=${GPUHOOK_PREFIX:-/opt/gpuhook}
bindir=${GPUHOOK_BINDIR:-/usr/local/bin}
config=${GPUHOOK_CONFIG:-/etc/gpuhook/config.toml}  # where the config is written if missing (the runtime reads GPUHOOK_CONFIG too)
demo=0
configure=""
uninstall=0
bundle=""
cdi=0
warm=1  # where systemd runs and the native front ends are there (they are its only callers); --no-warm: off
nvidia_hook=1
native=--require-native
hook=nvidia-container-runtime-hook
units="gpuhook-cdi-refresh.path gpuhook-cdi-refresh.service"
unitdir=${GPUHOOK_UNITDIR:-/etc/systemd/system}
while [ $# -gt 0 ]; do
  case "$1" in
    --demo) demo=1 ;;
    --configure) configure="${2:-}"; shift ;;
    --configure=*) configure="${1#*=}" ;;
    --uninstall) uninstall=1 ;;
    --cdi) cdi=1 ;;
    --warm) warm=1 ;;  # the default; kept for earlier command lines
    --no-warm) warm=0 ;;
    --no-nvidia-hook) nvidia_hook=0 ;;
    --no-native) native=--no-native ;;
    --bundle|--binary) bundle="${2:-}"; shift ;;
    --bundle=*|--binary=*) bundle="${1#*=}" ;;
    *) echo "usage: $0 [--demo] [--configure ENGINE,...] [--bundle DIR|TARBALL] [--cdi] [--warm]" \
            "[--no-warm] [--no-nvidia-hook] [--no-native] | --uninstall" >&2
       exit 2 ;;
  esac
  shift
done
if [ "$uninstall" = 1 ]; then
  if [ -f "$prefix/configured-engines" ]; then  # put the engines' files back as they were
    for engine in $(sort -u "$prefix/configured-engines"); do "$prefix/bin/gpuhook" configure "$engine" --revert; done
  fi
  for b in gpuhook gpuhook-runtime gpuhook-createhook gpuhook-hook "$hook"; do
    [ "$(readlink "$bindir/$b" 2>/dev/null)" = "$prefix/bin/$b" ] && rm -f "$bindir/$b"
  done
  if [ -f "$prefix/installed-units" ]; then  # the units --cdi and --warm enabled
    installed=$(tr " " "\n" < "$prefix/installed-units" | sort -u)
    command -v systemctl >/dev/null 2>&1 && systemctl disable --now $installed >/dev/null 2>&1 || true
    for u in $installed; do rm -f "$unitdir/$u"; done
  fi
  rm -rf "$prefix"
  echo "gpuhook removed ($config kept)"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install.sh: run as root (gpuhook is invoked by the container runtime as root)" >&2; exit 1; }

arch=$(uname -m)
version=$( [ ! -f "$src/pyproject.toml" ] || sed -n 's/^version = "\(.*\)"/\1/p' "$src/pyproject.toml" | head -1)
# run from a self-contained build (the release tarball, unpacked): install that build
if [ -z "$bundle" ] && [ -f "$src/share/gpuhook/BUILD" ] && [ -x "$src/bin/gpuhook" ]; then bundle=$src; fi
# the distribution's interpreter where there is one (it is what hosts have; Debian's also starts faster)
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if [ -z "$bundle" ]; then  # from a checkout: the host's Python must be 3.11 or newer, else the self-contained build
  have=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
  if [ -z "$have" ] || ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    what="this host's python3 is ${have:-missing}, and gpuhook's virtualenv needs Python 3.11 or newer"
    if [ -x "$src/dist/gpuhook-$version-$arch/bin/gpuhook" ]; then
      bundle=$src/dist/gpuhook-$version-$arch
      echo "install.sh: $what: installing the self-contained build $bundle instead (it needs no Python)"
    else
      echo "install.sh: $what: install the self-contained build instead (the .deb or .rpm, or" \
           "gpuhook-$version-linux-$arch.tar.gz: bash packaging/build-release.sh on a Debian or Ubuntu machine" \
           "with network makes them), or ./install.sh --bundle DIR" >&2
      exit 1
    fi
  fi
fi
if command -v apt-get >/dev/null 2>&1; then
  need=""
  pkgs="runc"
  [ "$demo" = 1 ] && pkgs="$pkgs busybox-static"
  if [ -z "$bundle" ]; then
    # the native front ends' compiler, where there is none (a minimal host); the self-contained build has them built
    if [ "$native" != --no-native ] && ! command -v cc >/dev/null 2>&1; then pkgs="$pkgs gcc libc6-dev"; fi
    [ "$demo" = 1 ] && pkgs="$pkgs gcc libc6-dev"
    "$py" -c 'import ensurepip' >/dev/null 2>&1 || need="$need python3-venv"
  fi
  for pkg in $pkgs; do dpkg -s "$pkg" >/dev/null 2>&1 || need="$need $pkg"; done
  if [ -n "$need" ]; then
    step "installing Debian packages:$need (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
  fi
elif ! command -v runc >/dev/null 2>&1 && ! command -v crun >/dev/null 2>&1; then
  echo "install.sh: no runc or crun on this host: install one (dnf install runc), or name the runtime in the" \
       "config (gpuhook config set runtime=PATH); gpuhook passes every container to it" >&2
fi

share=$src
if [ -n "$bundle" ]; then  # the self-contained build, copied whole; nothing of the host's userland is used
  if [ -f "$bundle" ]; then  # a release tarball: unpack it beside the installation
    mkdir -p "$(dirname "$prefix")"
    unpacked=$(mktemp -d "$(dirname "$prefix")/.gpuhook-unpack.XXXXXX")
    trap 'rm -rf "$unpacked"' EXIT
    tar -xzf "$bundle" -C "$unpacked"
    bundle=$(echo "$unpacked"/gpuhook-*)
  fi
  [ -f "$bundle/share/gpuhook/BUILD" ] && [ -x "$bundle/bin/gpuhook" ] || {
    echo "install.sh: $bundle is no self-contained gpuhook build (packaging/build-bundle.sh makes one)" >&2; exit 1; }
  read -r built_version built_arch < "$bundle/share/gpuhook/BUILD"
  [ "$built_arch" = "$arch" ] || {
    echo "install.sh: $bundle is gpuhook's build for $built_arch, and this host is $arch: install" \
         "gpuhook-$built_version-linux-$arch.tar.gz (or the .deb/.rpm) of this architecture" >&2; exit 1; }
  bundle=$(cd "$bundle" && pwd)
  if [ "$bundle" != "$(cd "$prefix" 2>/dev/null && pwd)" ]; then
    step "installing the self-contained build $built_version ($arch) into $prefix"
    rm -rf "$prefix.new" && mkdir -p "$(dirname "$prefix")" && cp -a "$bundle" "$prefix.new"
    [ -f "$prefix/configured-engines" ] && cp "$prefix/configured-engines" "$prefix.new/"
    [ -f "$prefix/installed-units" ] && cp "$prefix/installed-units" "$prefix.new/"
    rm -rf "$prefix.old" && { [ ! -e "$prefix" ] || mv "$prefix" "$prefix.old"; } && mv "$prefix.new" "$prefix" \
      && rm -rf "$prefix.old"
  fi
  share=$prefix/share/gpuhook
  native=--native-built
else
  [ ! -f "$prefix/share/gpuhook/BUILD" ] || rm -rf "$prefix"  # a self-contained build was there: replaced whole
  [ -x "$prefix/bin/python" ] || { step "creating the virtualenv $prefix"; "$py" -m venv "$prefix"; }
  step "installing gpuhook and its pinned dependencies into $prefix (pip)"
  pip_args=(-q --disable-pip-version-check -c "$src/packaging/constraints.txt")
  if [ -d "$src/packaging/wheels" ]; then pip_args+=(--no-index --find-links "$src/packaging/wheels"); fi
  "$prefix/bin/pip" install "${pip_args[@]}" "$src"
  # replace pip's wrappers with isolated (-I -S) launchers (no PYTHON* variable from the caller reaches a root
  # process) and, where a C compiler exists, the native pass-through front end as gpuhook-runtime (containers
  # without a GPU request never start Python); without one gpuhook-runtime is the Python shim itself
  purelib=$("$prefix/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  platlib=$("$prefix/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  [ "$native" = --no-native ] || step "building the native front ends (gpuhook-runtime, gpuhook-hook, gpuhook-createhook)"
  # a front end that does not build: its one line (what failed, and --no-native), and exit 1
  "$prefix/bin/python3" -m gpuhook.cli.launcher "$native" "$prefix/bin" "$purelib" "$platlib" >/dev/null || exit 1
fi
units_from() { if [ -n "$bundle" ]; then echo "$share/systemd"; else echo "$src/packaging/systemd"; fi; }
mkdir -p "$bindir"
for b in gpuhook gpuhook-runtime gpuhook-createhook gpuhook-hook; do
  if [ -e "$prefix/bin/$b" ]; then
    ln -sfn "$prefix/bin/$b" "$bindir/$b"
  elif [ "$(readlink "$bindir/$b" 2>/dev/null)" = "$prefix/bin/$b" ]; then
    rm -f "$bindir/$b"  # an earlier install's native front end, not built this time
  fi
done
# Docker's --gpus runs an executable named nvidia-container-runtime-hook found on dockerd's PATH: gpuhook's, unless
# NVIDIA's container toolkit has one (never replaced, never shadowed: a link here would come first on PATH)
if [ -e "$prefix/bin/$hook" ]; then
  theirs=""
  for d in "$bindir" /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
    if [ -x "$d/$hook" ] && ! is_gpuhooks "$d/$hook"; then theirs="$d/$hook"; break; fi
  done
  if [ -n "$theirs" ] || [ "$nvidia_hook" = 0 ]; then
    [ "$(readlink "$bindir/$hook" 2>/dev/null)" = "$prefix/bin/$hook" ] && rm -f "$bindir/$hook"
    [ -n "$theirs" ] && echo "kept $theirs (NVIDIA's container toolkit): docker run --gpus uses it, not gpuhook's"
  elif [ ! -e "$bindir/$hook" ] || is_gpuhooks "$bindir/$hook"; then
    ln -sfn "$prefix/bin/$hook" "$bindir/$hook"
    echo "linked $bindir/$hook: restart dockerd once (it looks for the hook at start) for docker run --gpus"
  fi
fi
if [ ! -e "$config" ]; then
  if [ -n "$bundle" ]; then default=$share/config.default.toml; else default=$src/hook/gpuhook/config.default.toml; fi
  install -D -m 0644 "$default" "$config"
  echo "wrote $config"
fi
echo "installed gpuhook $("$prefix/bin/gpuhook" version | cut -d' ' -f2) in $prefix; shim: $bindir/gpuhook-runtime"
for engine in $(echo "$configure" | tr ',' ' '); do
  "$bindir/gpuhook" configure "$engine"
  echo "$engine" >> "$prefix/configured-engines"
done
if [ "$cdi" = 1 ]; then
  "$bindir/gpuhook" cdi generate || echo "install.sh: no CDI specs yet (see above); the refresh unit writes them" \
    "once the driver is there" >&2
  if [ -d /run/systemd/system ] || [ -n "${GPUHOOK_UNITDIR:-}" ]; then  # regenerate after driver changes
    mkdir -p "$unitdir"
    for u in $units; do
      sed "s|/usr/local/bin/gpuhook|$bindir/gpuhook|g" "$(units_from)/$u" > "$unitdir/$u"
    done
    echo "$units" >> "$prefix/installed-units"
    if [ -d /run/systemd/system ]; then systemctl daemon-reload && systemctl enable --now gpuhook-cdi-refresh.path; fi
  fi
fi
[ "$native" = --no-native ] && warm=0  # without the native front ends nothing would call it
if [ "$warm" = 1 ] && { [ -d /run/systemd/system ] || [ -n "${GPUHOOK_UNITDIR:-}" ]; }; then
  step "enabling the warm helper (gpuhook-warm.service; --no-warm to leave it off)"
  mkdir -p "$unitdir"
  sed "s|/usr/local/bin/gpuhook|$bindir/gpuhook|g" "$(units_from)/gpuhook-warm.service" \
    > "$unitdir/gpuhook-warm.service"
  echo gpuhook-warm.service >> "$prefix/installed-units"
  if [ -d /run/systemd/system ]; then  # restart: an upgrade's helper runs the new code at once
    systemctl daemon-reload && systemctl enable gpuhook-warm.service && systemctl restart gpuhook-warm.service
  fi
elif [ "$warm" = 0 ] && [ -f "$unitdir/gpuhook-warm.service" ] && [ -f "$prefix/installed-units" ] \
     && grep -q gpuhook-warm.service "$prefix/installed-units"; then  # --no-warm over an install that enabled it
  [ -d /run/systemd/system ] && systemctl disable --now gpuhook-warm.service >/dev/null 2>&1
  rm -f "$unitdir/gpuhook-warm.service"
  echo "disabled the warm helper (gpuhook-warm.service)"
elif [ "$warm" = 1 ]; then
  echo "no systemd here: the warm helper is not started (run \`$bindir/gpuhook warm\` under your service manager" \
       "for GPU containers without a Python start each)"
fi
if [ "$demo" = 1 ]; then
  exec "$bindir/gpuhook" demo
fi
