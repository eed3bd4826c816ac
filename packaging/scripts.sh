#!/usr/bin/env bash
# The maintainer scripts of the .deb and the .rpm, written once: Docker's --gpus hook linked where no other package's
# is (NVIDIA's container toolkit owns /usr/bin/nvidia-container-runtime-hook when installed) and removed only when it
# is gpuhook's own link; the warm helper enabled on a first install where systemd runs (an upgrade keeps the admin's
# choice and restarts it), stopped and disabled on removal. Nothing is registered with an engine.
#   bash packaging/scripts.sh deb DIR   (postinst, prerm, postrm)   |   bash packaging/scripts.sh rpm DIR (post, preun, postun)
set -euo pipefail
kind=$1 dir=$2
hook=/usr/bin/nvidia-container-runtime-hook
target=/opt/gpuhook/bin/nvidia-container-runtime-hook
mkdir -p "$dir"
if [ "$kind" = deb ]; then
  # dpkg: postinst configure [OLD]; prerm remove|upgrade; postrm remove|purge|upgrade. DPKG_ROOT: a chrootless install
  install=' [ "$1" = configure ]' first='[ -z "${2:-}" ]' removing='[ "$1" = remove ]' removed='{ [ "$1" = remove ] || [ "$1" = purge ]; }'
  root='${DPKG_ROOT:-}' names="postinst prerm postrm"
else
  # rpm: %post / %preun / %postun get the count of installed versions after the step: 1 first install, 0 removal
  install=' true' first='[ "$1" = 1 ]' removing='[ "$1" = 0 ]' removed='[ "$1" = 0 ]' root=''
  names="post preun postun"
fi
set -- $names
cat > "$dir/$1" <<SCRIPT
#!/bin/sh
set -e
# Docker's --gpus hook: gpuhook's, unless a file is there already (NVIDIA's container toolkit)
if$install && [ ! -e "$root$hook" ] && [ ! -L "$root$hook" ]; then
  ln -s $target "$root$hook"
fi
# the warm helper, on by default where systemd runs (systemctl disable --now gpuhook-warm turns it off for good)
if$install && [ -z "$root" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  if $first; then systemctl enable gpuhook-warm.service || true; fi
  systemctl try-restart gpuhook-warm.service || true
  if $first; then systemctl start gpuhook-warm.service || true; fi
fi
SCRIPT
cat > "$dir/$2" <<SCRIPT
#!/bin/sh
set -e
if $removing && [ -z "$root" ] && [ -d /run/systemd/system ]; then
  systemctl disable --now gpuhook-warm.service || true
fi
SCRIPT
cat > "$dir/$3" <<SCRIPT
#!/bin/sh
set -e
if $removed; then
  if [ "\$(readlink "$root$hook" 2>/dev/null)" = $target ]; then
    rm -f "$root$hook"
  fi
fi
SCRIPT
