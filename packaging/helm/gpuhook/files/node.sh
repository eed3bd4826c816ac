#!/bin/sh
# gpuhook on a node, from the installer image: `node.sh install` (the chart's init container) copies the image's
# self-contained build to the node, writes the node's config, registers the runtime with the engine, starts the warm
# helper and writes the node's labels; `node.sh hold` (the pod's `node` container) waits, and undoes all of it when
# the pod ends (helm uninstall, an upgrade's rollout: the next pod installs anew). Nothing of the node's own is
# needed: no Python, compiler or package manager. The build runs from where it is copied; the node is asked only for
# its engine and systemd, in its mount namespace (nsenter -t 1 -m, the pod has hostPID).
# The node's / is at /host (a hostPath); the values come from the pod's env:
#   GPUHOOK_HOST_DIR  where the build goes (hostDir)      GPUHOOK_ENGINE          containerd, crio or docker
#   GPUHOOK_WARM      1: the warm helper service         GPUHOOK_RESTART_ENGINE  1: restart it after (un)registering
#   GPUHOOK_LABELS    1: the node's feature file
set -eu
build=/opt/gpuhook
host=/host
dir=$GPUHOOK_HOST_DIR
engine=$GPUHOOK_ENGINE
config=/etc/gpuhook/config.toml
unit=/etc/systemd/system/gpuhook-warm.service
labels=/etc/kubernetes/node-feature-discovery/features.d/gpuhook
links="gpuhook gpuhook-runtime gpuhook-hook gpuhook-createhook"
header="# Written by the gpuhook chart"
started=$(date +%s)

say() { echo "gpuhook node [$(($(date +%s) - started))s]: $*"; }
# a program of the node's (or of the build copied there), in the node's mount namespace
on_node() { PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin nsenter -t 1 -m -- "$@"; }
# a directory on the node that holds a gpuhook build (nothing else is ever replaced or removed)
is_build() { [ -f "$host$1/share/gpuhook/BUILD" ]; }
# whether the node's directory $1 takes new files (test -w is always true for root, even on a read-only mount)
writable() { touch "$host$1/.gpuhook-probe.$$" 2>/dev/null && rm -f "$host$1/.gpuhook-probe.$$"; }
# whether a configure run changed the engine's file (its last line says so)
changed() { case "$(printf '%s\n' "$1" | tail -n 1)" in "changed "*) return 0 ;; *) return 1 ;; esac; }

install() {
  # the config first, with the image's own build: a value gpuhook does not take stops here, the node untouched
  GPUHOOK_CONFIG=/config/config.toml "$build/bin/gpuhook" config show >/dev/null
  case "$dir" in /*) ;; *) say "hostDir $dir is not an absolute path"; exit 1 ;; esac
  [ ! -d "$host$dir" ] || is_build "$dir" || rmdir "$host$dir" 2>/dev/null || true  # an empty one is taken
  if [ -e "$host$dir" ] && ! is_build "$dir"; then
    say "hostDir $dir exists on this node and is not a gpuhook build: set hostDir to a new directory"
    exit 1
  fi
  parent=$(dirname "$dir")
  if ! mkdir -p "$host$parent" 2>/dev/null || ! writable "$parent"; then
    say "hostDir $dir: $parent is read-only on this node (a read-only /usr: Talos, Flatcar, Bottlerocket):" \
        "set hostDir=/var/lib/gpuhook or /opt/gpuhook"
    exit 1
  fi
  say "copying gpuhook $(cat "$build/share/gpuhook/BUILD") to $dir"
  touched=1  # from here on, a failure undoes what was done (before, nothing was: nothing of the node's is undone)
  rm -rf "$host$dir.new" "$host$dir.old"
  cp -a "$build" "$host$dir.new"
  # replaced whole: an upgrade leaves no file of the last build; the old one goes once the warm helper left it
  [ ! -e "$host$dir" ] || mv "$host$dir" "$host$dir.old"
  mv "$host$dir.new" "$host$dir"

  mkdir -p "$host/etc/gpuhook"
  if [ -f "$host$config" ] && ! head -n 1 "$host$config" | grep -q "^$header" && [ ! -e "$host$config.gpuhook-orig" ]; then
    mv "$host$config" "$host$config.gpuhook-orig"  # the node's own config, put back at uninstall
    say "kept the node's own $config as $config.gpuhook-orig"
  fi
  cp /config/config.toml "$host$config.new" && mv "$host$config.new" "$host$config"
  say "wrote $config"

  out=$(on_node "$dir/bin/gpuhook" configure "$engine" --runtime-path "$dir/bin/gpuhook-runtime")
  echo "$out"
  if changed "$out" && [ -n "${GPUHOOK_RESTART_ENGINE:-}" ]; then
    on_node systemctl restart "$engine"
    say "restarted $engine"
  fi

  if [ -n "${GPUHOOK_WARM:-}" ] && [ -d "$host/run/systemd/system" ]; then
    sed "s|/usr/local/bin/gpuhook|$dir/bin/gpuhook|g" "$build/share/gpuhook/systemd/gpuhook-warm.service" \
      > "$host$unit.new"
    mv "$host$unit.new" "$host$unit"
    on_node systemctl daemon-reload
    on_node systemctl enable gpuhook-warm.service
    on_node systemctl restart gpuhook-warm.service  # on this build, whatever it ran before
    say "started the warm helper (gpuhook-warm.service)"
  elif [ -f "$host$unit" ]; then
    stop_warm
  elif [ -n "${GPUHOOK_WARM:-}" ]; then
    say "no systemd on this node: the warm helper is not started; containers take the direct path"
  fi
  rm -rf "$host$dir.old"

  if writable /usr/local/bin; then  # an admin's command; never in place of another install's
    for b in $links; do
      if [ ! -e "$host/usr/local/bin/$b" ] && [ ! -L "$host/usr/local/bin/$b" ] \
         || [ "$(readlink "$host/usr/local/bin/$b")" = "$dir/bin/$b" ]; then
        ln -sfn "$dir/bin/$b" "$host/usr/local/bin/$b"
      else
        say "kept /usr/local/bin/$b (not this chart's): run $dir/bin/$b"
      fi
    done
  fi
  on_node "$dir/bin/gpuhook" gc >/dev/null  # tuning left by containers that ended while no gpuhook was here
  [ -z "${GPUHOOK_LABELS:-}" ] || on_node "$dir/bin/gpuhook" labels
  say "installed gpuhook $(cat "$build/share/gpuhook/BUILD") in $dir; runtime: $dir/bin/gpuhook-runtime"
  # its "paths:" line says whether the node's containers take the warm, native or Python path
  on_node "$dir/bin/gpuhook" doctor || true
}

stop_warm() {
  on_node systemctl stop gpuhook-warm.service || true
  on_node systemctl disable gpuhook-warm.service || true
  rm -f "$host$unit"
  on_node systemctl daemon-reload || true
  say "stopped and removed the warm helper (gpuhook-warm.service)"
}

# Undo what install did, whatever part of it was done; every step goes on when one fails.
uninstall() {
  if is_build "$dir"; then
    out=$(on_node "$dir/bin/gpuhook" configure "$engine" --revert 2>&1) || true
  else  # the node's copy went: the image's build puts the file back (its backup is beside it)
    case "$engine" in
      containerd) path=/etc/containerd/config.toml ;;
      crio) path=/etc/crio/crio.conf.d/99-gpuhook.toml ;;
      *) path=/etc/docker/daemon.json ;;
    esac
    out=$("$build/bin/gpuhook" configure "$engine" --revert --config-path "$host$path" 2>&1) || true
  fi
  echo "$out"
  if changed "$out" && [ -n "${GPUHOOK_RESTART_ENGINE:-}" ]; then
    on_node systemctl restart "$engine" && say "restarted $engine" || say "could not restart $engine"
  fi
  [ ! -f "$host$unit" ] || stop_warm
  rm -f "$host$labels"
  for b in $links; do
    [ "$(readlink "$host/usr/local/bin/$b" 2>/dev/null)" != "$dir/bin/$b" ] || rm -f "$host/usr/local/bin/$b"
  done
  if [ -f "$host$config" ] && head -n 1 "$host$config" | grep -q "^$header"; then
    rm -f "$host$config"
    [ ! -e "$host$config.gpuhook-orig" ] || mv "$host$config.gpuhook-orig" "$host$config"
  fi
  rmdir "$host/etc/gpuhook" 2>/dev/null || true
  ! is_build "$dir" || rm -rf "$host$dir"
  rm -rf "$host$dir.new" "$host$dir.old"  # an install's scratch copies
  say "nothing of gpuhook's left on this node ($dir)"
}

case "${1:-}" in
  install)
    touched=""
    trap 'rc=$?; set +e; [ "$rc" = 0 ] || [ -z "$touched" ] || { say "install failed (exit $rc): undoing it"; uninstall; }' EXIT
    install
    trap - EXIT ;;
  hold)
    trap 'set +e; trap "" TERM INT; uninstall; exit 0' TERM INT  # once: a second TERM must not undo twice
    say "holding gpuhook's install on this node ($dir): undone when this pod ends"
    while :; do sleep 86400 & wait $! || true; done ;;
  uninstall) uninstall ;;
  *) echo "usage: node.sh install | hold | uninstall" >&2; exit 2 ;;
esac
