#!/usr/bin/env bash
# gpuhook on a real NVIDIA GPU: install the self-contained build into a private prefix, then check through real runc
# and the installed runtime what a container gets and what gpuhook does to the GPU, and leave the GPU as found.
#
#   bash tests/gpu/run.sh [PATH]        PATH: the release tarball (default: the newest dist/gpuhook-*-linux-x86_64.tar.gz)
#                                       or the directory it unpacks to
#   bash tests/gpu/run.sh --checkout    install from this checkout (./install.sh: a virtualenv, cc) instead
#   --simulate     the same checks on a simulated host (`gpuhook simulate`, 2 GPUs, MIG devices on GPU 0) instead
#                  of the real GPU: what the simulator cannot show is skipped, saying so
#   --runc PATH    the runc to use (default: runc on PATH, else dist/gpu/runc or tests/gpu/bin/runc)
#   --probe PATH   the CUDA probe (default: dist/gpu/cuda-probe or tests/gpu/bin/cuda-probe, else built with cc)
#   --gpu N        the GPU to test (default 0; 1 with --simulate)
#   --keep         keep the private work directory (its path is printed)
#
# Runs as root, needs no network. Nothing outside its private work directory changes except the GPU's own
# settings while a check holds them (clocks, power limit, MPS daemon, MIG mode), each restored before the end
# (an EXIT trap restores them whatever happens). Every check prints `ok|FAIL|skip <name>: <detail>`; the last line
# is `gpu/run.sh: N passed, N failed, N skipped (...)`. Exit 0 when nothing failed. See tests/gpu/README.md.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
started=$SECONDS
budget=270                   # seconds for the checks; the watchdog stops them then, leaving time to restore
sys_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mode=real source="" checkout=0 runc_opt="" probe_opt="" gpu="" keep=0
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --simulate) mode=sim ;;
    --checkout) checkout=1 ;;
    --runc) runc_opt=${2:?--runc PATH}; shift ;;
    --probe) probe_opt=${2:?--probe PATH}; shift ;;
    --gpu) gpu=${2:?--gpu N}; shift ;;
    --keep) keep=1 ;;
    -h|--help) usage ;;
    -*) echo "gpu/run.sh: unknown option $1" >&2; usage ;;
    *) source=$1 ;;
  esac
  shift
done
[ -n "$gpu" ] || { [ "$mode" = sim ] && gpu=1 || gpu=0; }
mig_gpu=$gpu                 # the GPU whose MIG devices are checked (the simulated host has them on GPU 0)
[ "$mode" = sim ] && mig_gpu=0

# ---------------------------------------------------------------------------------------------------- results
passed=0 failed=0 skipped=0
skips=() fails=()
ok() { passed=$((passed + 1)); echo "ok $1: $2"; }
fail() { failed=$((failed + 1)); fails+=("$1"); echo "FAIL $1: $2"; }
skip() { skipped=$((skipped + 1)); skips+=("$1: $2"); echo "skip $1: $2"; }
note() { echo "# $*"; }
summarized=0
summary() {
  [ "$summarized" = 0 ] || return 0
  summarized=1
  local why=""
  [ ${#skips[@]} -gt 0 ] && why=" ($(printf '%s; ' "${skips[@]}" | sed 's/; $//'))"
  echo "gpu/run.sh: $passed passed, $failed failed, $skipped skipped$why"
}
# a check that cannot be run in the time left is skipped (the watchdog would end it half-way)
time_for() {
  local left=$((budget - (SECONDS - started)))
  [ "$left" -ge "$2" ] && return 0
  skip "$1" "not run: ${left}s left of the ${budget}s budget, it needs about $2s"
  return 1
}
last_line() { grep -v '^\s*$' "$1" 2>/dev/null | tail -1 | cut -c1-300; }

# ----------------------------------------------------------------------------------------------- preconditions
bail() {  # a precondition that stops the run: one FAIL line and the summary
  fail setup "$*"
  summary
  exit 1
}
[ "$(id -u)" = 0 ] || bail "run as root (gpuhook is invoked by the runtime as root)"
[ "$(uname -m)" = x86_64 ] || bail "x86_64 only (this is $(uname -m))"
for tool in timeout tar gzip grep sed awk sort cp mktemp; do
  command -v "$tool" >/dev/null 2>&1 || bail "$tool is missing on this host"
done
if [ "$mode" = real ]; then
  command -v nvidia-smi >/dev/null 2>&1 || bail "no nvidia-smi on PATH: a real run needs the NVIDIA driver (--simulate otherwise)"
  timeout -k 5 30 nvidia-smi -L >/dev/null 2>&1 || bail "nvidia-smi -L fails: $(timeout -k 5 30 nvidia-smi -L 2>&1 | tail -1)"
fi
if [ "$checkout" = 0 ]; then
  if [ -z "$source" ]; then
    source=$(ls -t "$repo"/dist/gpuhook-*-linux-x86_64.tar.gz 2>/dev/null | head -1 || true)
    [ -n "$source" ] || bail "no release tarball under $repo/dist (bash packaging/build-release.sh), and no --checkout"
  fi
  [ -e "$source" ] || bail "$source does not exist"
  source=$(cd "$(dirname "$source")" && pwd)/$(basename "$source")
fi

# the private work directory, on a file system that lets it run programs (/tmp is noexec on some hosts)
work=""
for base in /var/tmp /tmp /root /run; do
  [ -d "$base" ] && [ -w "$base" ] || continue
  d=$(mktemp -d "$base/ghgpu.XXXXXX") || continue
  printf '#!/bin/sh\nexit 0\n' > "$d/x" && chmod +x "$d/x"
  if "$d/x" 2>/dev/null; then rm -f "$d/x"; work=$d; break; fi
  rm -rf "$d"
done
[ -n "$work" ] || bail "no directory to work in where programs may run (/var/tmp, /tmp, /root, /run)"
chmod 0700 "$work"
bindir=$work/bin prefix=$work/opt cfg=$work/config.toml state=$work/state mps_dir=$work/mps
runc_root=$work/runc-state rootfs=$work/rootfs
warm_sock=$work/warm/warm.sock nowarm_sock=$work/warm/none.sock   # the direct path: a socket no one serves
mkdir -p "$state" "$runc_root" "$work/bundles" "$work/warm" && chmod 0700 "$state" "$work/warm"
: > "$work/containers"
warm_pid="" exporter_pid="" watchdog=""
detach=""; command -v setsid >/dev/null 2>&1 && detach=setsid   # helpers in sessions of their own

# -------------------------------------------------------------------------- what the run changes, and undoing it
# Each change the run makes to the GPU is recorded here first, so that cleanup can put it back by nvidia-smi
# if gpuhook did not.
power_found=""         # the power limit found (W), once a check may change it
clocks_locked=0        # a container asked for locked clocks
clocks_restored=no     # ... and they were read back unlocked after it
mig_enabled_by_us=0    # MIG mode was turned on by this run
caps_found=""          # /dev/nvidia-caps entries before MIG devices were made
cleaned=0

runtime() {  # gpuhook-runtime with runc's state in the work directory; SOCKET picks the path (direct or warm)
  local secs=$1 sock=$2
  shift 2
  timeout -k 5 "$secs" env -i PATH="$sys_path" GPUHOOK_CONFIG="$cfg" GPUHOOK_WARM_SOCKET="$sock" \
    "$bindir/gpuhook-runtime" --root "$runc_root" "$@"
}
gh() {  # the installed gpuhook command, with the private config, on the direct path
  local secs=$1
  shift
  timeout -k 5 "$secs" env -i PATH="$sys_path" GPUHOOK_CONFIG="$cfg" GPUHOOK_WARM_SOCKET="$nowarm_sock" \
    "$bindir/gpuhook" "$@"
}
smi() { timeout -k 5 30 nvidia-smi "$@"; }

stop_pid() {  # SIGTERM a process this run started, then SIGKILL after 10 s
  local pid=$1 i
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
}

remove_containers() {  # every container this run started, deleted (its poststop hooks restore its tuning)
  local id
  while read -r id; do
    [ -n "$id" ] || continue
    runtime 20 "$nowarm_sock" kill "$id" KILL >/dev/null 2>&1 || true
    runtime 60 "$nowarm_sock" delete --force "$id" >/dev/null 2>&1 || true
  done < "$work/containers"
  : > "$work/containers"
}

cleanup() {  # idempotent: containers, gpuhook's own restore (gc), then what is still off by nvidia-smi
  [ "$cleaned" = 1 ] && return 0
  cleaned=1
  local said=()
  [ -x "$bindir/gpuhook-runtime" ] && remove_containers
  [ -x "$bindir/gpuhook" ] && [ -f "$cfg" ] && { gh 60 gc >/dev/null 2>&1 || true; }
  local d pid
  for d in "$mps_dir"/*/; do  # an MPS control daemon gpuhook started and did not end
    [ -d "$d" ] || continue
    pid=$(cat "$d/pipe/nvidia-cuda-mps-control.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      echo quit | timeout 10 env CUDA_MPS_PIPE_DIRECTORY="$d/pipe" nvidia-cuda-mps-control >/dev/null 2>&1 || true
      stop_pid "$pid"
      said+=("stopped the MPS control daemon $pid")
    fi
    if awk -v m="${d}shm" '$5 == m {f = 1} END {exit !f}' /proc/self/mountinfo; then  # its shared memory's tmpfs
      umount -l "${d}shm" 2>/dev/null && said+=("unmounted ${d}shm")
    fi
  done
  if [ "$mode" = real ]; then
    if [ -n "$power_found" ]; then
      local now
      now=$(host_power "$gpu" 2>/dev/null || true)
      if [ -n "$now" ] && ! same_watts "$now" "$power_found"; then
        smi -i "$gpu" -pl "$power_found" >/dev/null 2>&1 || true
        said+=("power limit $now W -> $power_found W by nvidia-smi")
      fi
    fi
    if [ "$clocks_locked" = 1 ] && [ "$clocks_restored" != yes ]; then  # unlocked: what gpuhook restores too
      smi -i "$gpu" -rgc >/dev/null 2>&1 || true
      note "cleanup: locked clocks reset by nvidia-smi -rgc (they were not read back unlocked)"
    fi
    if [ "$mig_enabled_by_us" = 1 ] && [ "$(mig_mode "$mig_gpu")" != Disabled ]; then
      smi mig -dci -i "$mig_gpu" >/dev/null 2>&1 || true
      smi mig -dgi -i "$mig_gpu" >/dev/null 2>&1 || true
      smi -i "$mig_gpu" -mig 0 >/dev/null 2>&1 || true
      said+=("MIG turned off by nvidia-smi (now $(mig_mode "$mig_gpu"))")
    fi
    if [ "$mig_enabled_by_us" = 1 ] && [ -d /dev/nvidia-caps ]; then  # caps nodes made for our MIG devices
      local node
      for node in /dev/nvidia-caps/*; do
        [ -e "$node" ] || continue
        printf '%s\n' $caps_found | grep -qxF "$(basename "$node")" || rm -f "$node"
      done
    fi
  fi
  stop_pid "$exporter_pid"
  stop_pid "$warm_pid"
  [ ${#said[@]} -eq 0 ] || note "cleanup had to restore: $(printf '%s; ' "${said[@]}" | sed 's/; $//')"
  restored_by_cleanup=("${said[@]+"${said[@]}"}")
}
restored_by_cleanup=()

on_exit() {
  local rc=$?
  set +e
  cleanup
  [ -n "$watchdog" ] && kill "$watchdog" 2>/dev/null
  if [ "$keep" = 1 ]; then
    echo "# kept $work"
  elif grep -qF " $work/" /proc/self/mountinfo 2>/dev/null; then
    echo "# left $work: something is still mounted under it" >&2
  else
    rm -rf --one-file-system "$work" 2>/dev/null || rm -rf "$work"
  fi
  if [ "$summarized" = 0 ]; then
    [ "$rc" = 0 ] || fail run "stopped early (exit $rc)"
    summary
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'fail run "stopped by a signal after $((SECONDS - started))s (the watchdog sends one at ${budget}s)"; summary; exit 1' TERM INT
( trap 'kill "$nap" 2>/dev/null; exit 0' TERM; sleep "$budget" & nap=$!; wait "$nap" && kill -TERM $$ ) 2>/dev/null &
watchdog=$!

# ------------------------------------------------------------------------------------------------ the host's GPU
# Readings of the host, from outside gpuhook: nvidia-smi on a real host; on a simulated one the stub nvidia-smi
# answers no queries, so the stub NVML is read through the exporter's one-shot output (`gpuhook exporter --once`).
metric() {  # METRIC UUID: a gauge's value for that GPU from one exporter run (simulated host)
  gh 60 exporter --once 2>/dev/null | grep "^$1{" | grep -F "uuid=\"$2\"" | head -1 | awk '{print $NF}'
}
gpu_line() { gh 60 list 2>/dev/null | awk -v i="$1" '$1 == "nvidia" && $2 == i'; }  # `gpuhook list`'s row
host_uuid() {
  if [ "$mode" = real ]; then smi --query-gpu=uuid --format=csv,noheader -i "$1" | head -1 | tr -d ' '
  else gpu_line "$1" | awk '{print $3}'; fi
}
host_clock() {  # the graphics clock now, MHz
  if [ "$mode" = real ]; then smi --query-gpu=clocks.gr --format=csv,noheader,nounits -i "$1" | head -1 | tr -d ' '
  else metric gpuhook_gpu_sm_clock_hertz "$(host_uuid "$1")" | awk '{printf "%d", $1 / 1e6}'; fi
}
host_power() {  # the power limit in force, W
  if [ "$mode" = real ]; then smi --query-gpu=power.limit --format=csv,noheader,nounits -i "$1" | head -1 | tr -d ' '
  else metric gpuhook_gpu_power_limit_watts "$(host_uuid "$1")" | awk '{printf "%.2f", $1}'; fi
}
same_watts() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(d < 0.5 && d > -0.5) }'; }
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; exit !(d <= t && d >= -t) }'; }
mig_mode() {  # Enabled, Disabled, or N/A (no MIG on this GPU)
  if [ "$mode" = real ]; then
    smi --query-gpu=mig.mode.current --format=csv,noheader -i "$1" | head -1 | sed 's/^ *//; s/ *$//; s/^\[N\/A\]$/N\/A/'
  elif gh 60 list 2>/dev/null | awk -v i="$1" '$1 == "nvidia" && index($2, i ":") == 1' | grep -q MIG-; then
    echo Enabled
  else
    echo N/A
  fi
}
compute_apps() {  # other processes using the GPU (real host), as "pid name" lines
  [ "$mode" = real ] || return 0
  smi --query-compute-apps=pid,process_name --format=csv,noheader -i "$1" 2>/dev/null | grep -v '^\s*$' || true
}

# ------------------------------------------------------------------------------------------------------ install
install_gpuhook() {
  local installer log=$work/install.log
  if [ "$checkout" = 1 ]; then
    installer=$repo/install.sh
  elif [ -d "$source" ]; then
    installer=$source/install.sh
  else
    mkdir -p "$work/unpacked"
    tar -xzf "$source" -C "$work/unpacked" || { fail install "cannot unpack $source"; return 1; }
    installer=$(ls "$work"/unpacked/*/install.sh 2>/dev/null | head -1 || true)
  fi
  [ -f "$installer" ] || { fail install "no install.sh at the top of ${source:-the checkout}"; return 1; }
  if ! timeout -k 5 300 env GPUHOOK_PREFIX="$prefix" GPUHOOK_BINDIR="$bindir" GPUHOOK_CONFIG="$cfg" \
       GPUHOOK_UNITDIR="$work/units" bash "$installer" --no-warm > "$log" 2>&1; then
    fail install "$installer --no-warm failed: $(last_line "$log")"
    return 1
  fi
  local version native=""
  version=$(gh 30 version 2>&1) || { fail install "the installed gpuhook does not run: $version"; return 1; }
  [ -x "$bindir/gpuhook-runtime" ] || { fail install "no gpuhook-runtime in $bindir"; return 1; }
  head -c 4 "$bindir/gpuhook-runtime" 2>/dev/null | grep -q ELF && native=", native front ends"
  ok install "$version from ${source:-the checkout ($repo)} into $work$native"
}

find_runc() {
  local c
  for c in "$runc_opt" "$(command -v runc 2>/dev/null || true)" "$repo/dist/gpu/runc" "$repo/tests/gpu/bin/runc"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    if timeout 10 "$c" --version >/dev/null 2>&1; then runc=$(cd "$(dirname "$c")" && pwd)/$(basename "$c"); return 0; fi
    note "runc $c does not run here: $(timeout 10 "$c" --version 2>&1 | tail -1)"
  done
  return 1
}

find_probe() {  # a CUDA probe that runs on this host's C library; built with cc where none is carried
  local c
  for c in "$probe_opt" "$repo/dist/gpu/cuda-probe" "$repo/tests/gpu/bin/cuda-probe"; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    if timeout 10 "$c" --version >/dev/null 2>&1; then probe=$c; return 0; fi
    note "cuda-probe $c does not run here: $(timeout 10 "$c" --version 2>&1 | tail -1)"
  done
  if command -v cc >/dev/null 2>&1 && cc -O2 -o "$work/cuda-probe" "$repo/tests/gpu/cuda-probe.c" -ldl 2>"$work/cc.log"; then
    probe=$work/cuda-probe
    return 0
  fi
  return 1
}

write_config() {
  local ldconfig=/sbin/ldconfig host_root=/ port
  for c in /sbin/ldconfig.real /sbin/ldconfig /usr/sbin/ldconfig; do [ -x "$c" ] && { ldconfig=$c; break; }; done
  [ "$mode" = sim ] && host_root=$work/host
  port=$((20000 + $$ % 20000))
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  exporter_port=$port
  cat > "$cfg" <<EOF
# tests/gpu/run.sh's private config: nothing here is the host's
host_root = "$host_root"
runtime = "$runc"
state_dir = "$state"
ldconfig = "$ldconfig"
hook_timeout = 60
log_file = "$work/gpuhook.log"

[tuning]
mps_dir = "$mps_dir"

[exporter]
listen = "127.0.0.1:$port"
EOF
  chmod 0644 "$cfg"
}

# ----------------------------------------------------------------------------------------------- the container
# A root filesystem made of the host's own files: its /bin/sh, the probe, and the shared libraries they and the
# driver's tools and libraries load (found by the host's loader). The driver's files themselves are not in it:
# gpuhook mounts them.
rootfs_libs() {  # FILE: the shared libraries it loads, copied at their paths
  local lib
  "$loader" --list "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
    while read -r lib; do
      [ -e "$rootfs$lib" ] && continue
      mkdir -p "$rootfs$(dirname "$lib")"
      cp -L "$lib" "$rootfs$lib"
      dirname "$lib" >> "$work/libdirs"
    done
}

make_rootfs() {
  loader=/lib64/ld-linux-x86-64.so.2
  [ -x "$loader" ] || { fail rootfs "no $loader on this host"; return 1; }
  mkdir -p "$rootfs"/{usr/bin,usr/sbin,usr/lib,usr/lib64,usr/local/bin,etc,proc,sys,dev,tmp,root,run}
  local l
  for l in bin sbin lib lib64; do ln -s "usr/$l" "$rootfs/$l"; done
  chmod 1777 "$rootfs/tmp"
  : > "$work/libdirs"
  cp -L /bin/sh "$rootfs/bin/sh" && rootfs_libs /bin/sh
  cp -L "$probe" "$rootfs/usr/local/bin/cuda-probe" && rootfs_libs "$probe"
  # what the driver's tools and libraries load (their own files come from gpuhook's mounts)
  local f
  for f in "$(driver_tool nvidia-smi)" $(driver_lib libcuda.so.1) $(driver_lib libnvidia-ml.so.1) \
           $(driver_lib libnvidia-ptxjitcompiler.so.1); do
    [ -f "$f" ] || continue
    rootfs_libs "$f"
    case "$f" in *.so*) f=${f#"$work/host"}; dirname "$f" >> "$work/libdirs" ;; esac  # where gpuhook mounts it
  done
  { sort -u "$work/libdirs"; printf '%s\n' /usr/local/lib /usr/lib/x86_64-linux-gnu /usr/lib64; } | awk '!seen[$0]++' \
    > "$rootfs/etc/ld.so.conf"
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$rootfs/etc/passwd"
  printf 'root:x:0:\n' > "$rootfs/etc/group"
}

driver_lib() {  # where the host (or the simulated host) keeps a driver library
  local name=$1 d
  if [ "$mode" = sim ]; then
    for d in "$work"/host/usr/lib/x86_64-linux-gnu "$work"/host/usr/lib64; do [ -e "$d/$name" ] && echo "$d/$name"; done
    return 0
  fi
  ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n && /x86-64/ {print $NF; exit}' | grep . && return 0
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/lib; do [ -e "$d/$name" ] && { echo "$d/$name"; return 0; }; done
  return 0
}

json_str() { local s=$1; s=${s//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }

bundle() {  # NAME SCRIPT [KEY=VALUE annotation...]: a bundle whose process is `sh -c SCRIPT`; prints its path
  local name=$1 script=$2 b=$work/bundles/$1 ann="" kv caps
  shift 2
  for kv in "$@"; do ann+="${ann:+, }$(json_str "${kv%%=*}"): $(json_str "${kv#*=}")"; done
  rm -rf "$b" && mkdir -p "$b"
  cp -a "$rootfs" "$b/rootfs"
  caps='["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]'
  cat > "$b/config.json" <<EOF
{
  "ociVersion": "1.0.2-dev",
  "process": {
    "terminal": false, "user": {"uid": 0, "gid": 0}, "cwd": "/",
    "args": ["/bin/sh", "-c", $(json_str "$script")],
    "env": ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/root"],
    "capabilities": {"bounding": $caps, "effective": $caps, "permitted": $caps},
    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
    "noNewPrivileges": true
  },
  "root": {"path": "rootfs", "readonly": false},
  "hostname": "ghgpu",
  "annotations": {$ann},
  "mounts": [
    {"destination": "/proc", "type": "proc", "source": "proc"},
    {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
    {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
    {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
    {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}
  ],
  "linux": {
    "resources": {"devices": [{"allow": false, "access": "rwm"}]},
    "namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
    "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
    "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
  }
}
EOF
  echo "$b"
}

# What every checked container runs: its GPU device nodes, nvidia-smi -L, then the probe holding a context.
SHOW='echo "nodes:" /dev/nvidia[0-9]*; echo "env: mps=$CUDA_MPS_PIPE_DIRECTORY threads=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"; nvidia-smi -L; echo "smi-rc=$?"; exec cuda-probe --hold 120'

state_of() { runtime 20 "$nowarm_sock" state "$1" 2>/dev/null | grep -o '"status": *"[a-z]*"' | grep -o '[a-z]*"$' | tr -d '"'; }

start_held() {  # NAME SOCKET [annotation...]: a detached container, once its probe holds a context; output in $b/out
  local name=$1 sock=$2 id=ghgpu-$$-$1 i st
  shift 2
  b=$(bundle "$name" "$SHOW" "$@")
  cid=$id
  echo "$id" >> "$work/containers"
  if ! runtime 120 "$sock" run --detach --bundle "$b" "$id" > "$b/out" 2>&1 < /dev/null; then
    return 1
  fi
  for i in $(seq 450); do  # 90 s: a GPU without persistence mode takes seconds to initialise
    grep -q '^cuda-probe: ready' "$b/out" && return 0
    if [ $((i % 10)) = 0 ]; then
      st=$(state_of "$id")
      [ "$st" = running ] || [ "$st" = created ] || return 1
    fi
    sleep 0.2
  done
  echo "(no 'cuda-probe: ready' within 90 s)" >> "$b/out"
  return 1
}

stop_held() {  # ID: killed and deleted (runc runs the poststop hooks: gpuhook restores)
  local id=$1 i
  runtime 20 "$nowarm_sock" kill "$id" KILL >/dev/null 2>&1 || true
  for i in $(seq 50); do [ "$(state_of "$id")" = running ] || break; sleep 0.2; done
  runtime 60 "$nowarm_sock" delete --force "$id" > "$work/delete.out" 2>&1 || note "delete $id: $(last_line "$work/delete.out")"
  grep -vxF "$id" "$work/containers" > "$work/containers.new" || true
  mv "$work/containers.new" "$work/containers"
}

field() { grep -o "^cuda-probe: $1=[^ ]*" "$2" | head -1 | cut -d= -f2; }  # KEY OUT: a probe fact

# What the container saw, against what it was given: EXPECT_UUID (GPU- or MIG-), EXPECT_NODE. Prints a reason and
# returns 1 when it is not exactly that; else prints what it saw.
judge_sight() {
  local out=$1 uuid=$2 node=$3 kind=${4:-gpu} seen nodes
  nodes=$(sed -n 's/^nodes: //p' "$out" | head -1)
  [ "$nodes" = "$node" ] || { echo "device nodes $nodes, expected $node only"; return 1; }
  grep -q '^smi-rc=0' "$out" || { echo "nvidia-smi -L failed in the container: $(grep -v '^cuda-probe\|^nodes\|^env' "$out" | head -2 | tr '\n' ' ')"; return 1; }
  if [ "$mode" = real ]; then
    if [ "$kind" = mig ]; then
      seen=$(grep -o '(UUID: MIG-[^)]*)' "$out" | sed 's/(UUID: //; s/)//' | tr '\n' ' ' | sed 's/ $//')
    else
      seen=$(grep -E '^GPU [0-9]+:' "$out" | grep -o '(UUID: GPU-[^)]*)' | sed 's/(UUID: //; s/)//' | tr '\n' ' ' | sed 's/ $//')
    fi
    [ "$seen" = "$uuid" ] || { echo "nvidia-smi -L in the container lists '${seen:-nothing}', expected $uuid"; return 1; }
    echo "nvidia-smi -L lists exactly $uuid, nodes $nodes"
  else  # the stub nvidia-smi prints a count and the MIG devices it can open, no UUIDs
    if [ "$kind" = mig ]; then
      seen=$(grep -c '^MIG device:' "$out" || true)
      [ "$seen" = 1 ] || { echo "the simulated nvidia-smi lists $seen MIG devices, expected 1"; return 1; }
    else
      seen=$(grep -o 'GPUs: [0-9]*' "$out" | head -1 | cut -d' ' -f2)
      [ "$seen" = 1 ] || { echo "the simulated nvidia-smi counts ${seen:-no} GPUs, expected 1"; return 1; }
    fi
    echo "nodes $nodes, the simulated nvidia-smi sees 1 $( [ "$kind" = mig ] && echo "MIG device" || echo GPU) (it shows no UUIDs)"
  fi
}

judge_cuda() {  # OUT [UUID]: cuInit 0 and exactly one device (its UUID where the driver gives one), libcuda mounted ro
  local out=$1 uuid=${2:-} init count dev lib mount
  init=$(field cuInit "$out"); count=$(field count "$out")
  [ "$init" = 0 ] || { echo "cuInit=${init:-not reached}: $(grep '^cuda-probe: \(dlopen\|cuInit\)' "$out" | head -1)"; return 1; }
  [ "$count" = 1 ] || { echo "cuDeviceGetCount=${count:-failed}, expected 1"; return 1; }
  dev=$(sed -n 's/^cuda-probe: device0 uuid=\([^ ]*\) name=\(.*\)$/\1 \2/p' "$out" | head -1)
  if [ -n "$uuid" ] && [ "${dev%% *}" != unavailable ] && [ "GPU-${dev%% *}" != "$uuid" ]; then
    echo "CUDA's device 0 is GPU-${dev%% *}, expected $uuid"; return 1
  fi
  lib=$(sed -n 's/^cuda-probe: libcuda=\([^ ]*\) mount=.*/\1/p' "$out" | head -1)
  mount=$(sed -n 's/^cuda-probe: libcuda=[^ ]* mount=//p' "$out" | head -1)
  [ "$mount" = ro ] || { echo "libcuda $lib is not a read-only mount (mount=$mount)"; return 1; }
  local named=""
  case "${dev#* }" in unavailable|failed|"") ;; *) named=" (${dev#* })" ;; esac
  echo "cuInit 0, 1 device$named, driver API $(field driver "$out"), $lib mounted ro, context $(field context "$out")"
}

# ------------------------------------------------------------------------------------------------------ checks
# 1. The container sees exactly its GPU, and CUDA works there: the direct path (Python behind the native front
#    end) and the warm helper's.
check_sight() {
  local path=$1 sock=$nowarm_sock before="" after="" why=""
  time_for "gpu-$path" 40 || return 0
  if [ "$path" = warm ]; then
    [ -n "$warm_pid" ] || { skip gpu-warm "the warm helper did not start: $(last_line "$work/warm.out")"; return 0; }
    sock=$warm_sock
    before=$(children "$warm_pid")
  fi
  if ! start_held "see-$path" "$sock" "gpuhook.dev/gpus=$gpu"; then
    fail "gpu-$path" "the container did not start: $(last_line "$b/out")"
    stop_held "$cid"
    skip "cuda-$path" "its container did not start"
    return 0
  fi
  [ "$path" = warm ] && after=$(children "$warm_pid")
  stop_held "$cid"
  if why=$(judge_sight "$b/out" "$target_uuid" "$target_node"); then
    if [ "$path" = warm ] && [ "$before" = "$after" ]; then
      fail gpu-warm "the warm helper's workers did not change: no worker served the call ($why)"
    else
      ok "gpu-$path" "$why$( [ "$path" = warm ] && echo ", served by a warm worker")"
    fi
  else
    fail "gpu-$path" "$why"
  fi
  if why=$(judge_cuda "$b/out" "$( [ "$mode" = real ] && echo "$target_uuid")"); then ok "cuda-$path" "$why"
  else fail "cuda-$path" "$why"; fi
}

children() {  # PID: its child processes (pids, sorted), read from /proc
  awk -v want="$1" '{ sub(/^.*\) /, ""); if ($2 == want) { split(FILENAME, f, "/"); print f[3] } }' \
    /proc/[0-9]*/stat 2>/dev/null | sort -n | tr '\n' ' '
}

start_warm() {
  $detach env -i PATH="$sys_path" GPUHOOK_CONFIG="$cfg" "$bindir/gpuhook" warm --socket "$warm_sock" \
    > "$work/warm.out" 2>&1 < /dev/null &
  warm_pid=$!
  local i
  for i in $(seq 150); do
    [ -S "$warm_sock" ] && return 0
    kill -0 "$warm_pid" 2>/dev/null || break
    sleep 0.2
  done
  stop_pid "$warm_pid"
  warm_pid=""
}

# 2. Clocks and power limit: applied for the container's life (read back on the host while its probe holds a
#    context on the GPU), restored after (read back again: the power limit as found, the clock as an untuned
#    container's).
supported_clocks() {  # the graphics clocks at the highest memory clock, MHz, one a line
  if [ "$mode" = sim ]; then seq 1980 -15 345; return 0; fi  # the stub NVML's H100 table (docs/testing.md)
  smi -q -d SUPPORTED_CLOCKS -i "$gpu" | awk '
    /Memory *:/ { n++; next }
    /Graphics *:/ && n == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) print $i }'
}
power_range() {  # "MIN MAX" in W
  if [ "$mode" = sim ]; then echo "100 700"; return 0; fi  # the stub NVML's board
  smi -q -d POWER -i "$gpu" | awk -F: '
    /Min Power Limit/ && !lo { v = $2; gsub(/[^0-9.]/, "", v); lo = v }
    /Max Power Limit/ && !hi { v = $2; gsub(/[^0-9.]/, "", v); hi = v }
    END { if (lo != "" && hi != "") print lo, hi }'
}

held_clock() {  # NAME SOCKET [annotation...]: $held_value, the host's graphics clock while an untuned container's
  held_value=""  # probe holds a context
  start_held "$@" || { stop_held "$cid"; return 1; }
  held_value=$(host_clock "$gpu")
  stop_held "$cid"
}

check_tuning() {
  time_for clocks 60 || { skip power-limit "not run: no time left"; return 0; }
  local apps="" clocks_list="" lo="" hi="" mid="" x="" baseline="" range="" pmin="" pmax="" p="" why=""
  local during_clk="" during_pw="" after_clk="" after_pw="" want=()
  apps=$(compute_apps "$gpu")
  if [ -n "$apps" ]; then
    skip clocks "other processes use GPU $gpu: $(echo "$apps" | tr '\n' ' ')"
    skip power-limit "other processes use GPU $gpu"
    return 0
  fi
  clocks_list=$(supported_clocks | sort -n)
  range=$(power_range)
  held_clock tune-before "$nowarm_sock" "gpuhook.dev/gpus=$gpu"
  baseline=$held_value
  if [ -z "$clocks_list" ]; then
    skip clocks "nvidia-smi -q -d SUPPORTED_CLOCKS lists no graphics clocks for GPU $gpu"
  elif [ -z "$baseline" ]; then
    fail clocks "an untuned container on GPU $gpu did not start: $(last_line "$b/out")"
  else
    lo=$(echo "$clocks_list" | head -1); hi=$(echo "$clocks_list" | tail -1)
    mid=$(((lo + hi) / 2))
    x=$(echo "$clocks_list" | awk -v m="$mid" '{ d = $1 - m; if (d < 0) d = -d; if (best == "" || d < bd) { best = $1; bd = d } } END { print best }')
    if near "$x" "$baseline" 100; then  # a lock that reads like the idle clock would prove nothing
      x=$(echo "$clocks_list" | awk -v m="$(((lo + mid) / 2))" '{ d = $1 - m; if (d < 0) d = -d; if (best == "" || d < bd) { best = $1; bd = d } } END { print best }')
    fi
    want+=("gpuhook.dev/clocks=$x")
  fi
  if [ -z "$range" ]; then
    skip power-limit "nvidia-smi -q -d POWER shows no power limit range for GPU $gpu (not settable here)"
  else
    read -r pmin pmax <<< "$range"
    power_found=$(host_power "$gpu")
    p=$(awk -v a="$pmin" -v b="$pmax" -v c="$power_found" 'BEGIN {
      lo = int(a) + (a > int(a)); hi = int(b); p = int((lo + hi) / 2)
      if (p - c < 10 && c - p < 10) p = int(lo + (hi - lo) / 4)
      print p }')
    want+=("gpuhook.dev/power-limit=$p")
  fi
  [ ${#want[@]} -gt 0 ] || return 0
  local sock=$nowarm_sock path=direct
  [ -n "$warm_pid" ] && sock=$warm_sock path=warm
  [ -n "$x" ] && clocks_locked=1
  if ! start_held tune "$sock" "gpuhook.dev/gpus=$gpu" "${want[@]}"; then
    why="the tuned container did not start ($path path): $(last_line "$b/out")"
    stop_held "$cid"
    [ -n "$x" ] && fail clocks "$why"
    [ -n "$p" ] && fail power-limit "$why"
    return 0
  fi
  local i
  for i in 1 2 3 4 5; do  # a clock may take a moment to settle under the new context
    [ -n "$x" ] || break
    during_clk=$(host_clock "$gpu")
    near "$during_clk" "$x" 30 && break
    sleep 0.5
  done
  [ -n "$p" ] && during_pw=$(host_power "$gpu")
  gh 30 status > "$work/status.during" 2>&1 || true
  stop_held "$cid"
  [ -n "$p" ] && after_pw=$(host_power "$gpu")
  if [ -n "$x" ]; then
    held_clock tune-after "$nowarm_sock" "gpuhook.dev/gpus=$gpu"
    after_clk=$held_value
    if ! near "$during_clk" "$x" 30; then
      fail clocks "asked $x MHz (supported $lo-$hi, untuned $baseline): the host read $during_clk MHz while the container ran ($path path)"
    elif [ -z "$after_clk" ]; then
      fail clocks "locked at $x MHz while it ran, but an untuned container after it did not start: $(last_line "$b/out")"
    elif near "$after_clk" "$x" 30 && ! near "$baseline" "$x" 30; then  # still at the lock
      fail clocks "locked at $x MHz while it ran, not restored: $after_clk MHz after (untuned before: $baseline MHz)"
    else
      clocks_restored=yes
      ok clocks "locked at $x MHz while the container ran (host read $during_clk MHz; supported $lo-$hi, untuned $baseline MHz), $after_clk MHz after ($path path)"
    fi
  fi
  if [ -n "$p" ]; then
    if ! same_watts "$during_pw" "$p"; then
      fail power-limit "asked $p W (range $pmin-$pmax, was $power_found W): the host read $during_pw W while the container ran ($path path)"
    elif ! same_watts "$after_pw" "$power_found"; then
      fail power-limit "$p W while the container ran, not restored: $after_pw W after, $power_found W before"
    else
      ok power-limit "$p W while the container ran (range $pmin-$pmax W), back to $after_pw W after ($path path)"
    fi
  fi
}

# 3. MPS: gpuhook starts the GPU's control daemon for the container, its CUDA runs as an MPS client; the daemon
#    is gone after.
check_mps() {
  time_for mps 40 || return 0
  local apps="" home="" pid="" pidfile="" server="" why=""
  if [ "$mode" = real ]; then
    [ -n "$(driver_tool nvidia-cuda-mps-control)" ] || { skip mps "the host has no nvidia-cuda-mps-control"; return 0; }
    apps=$(compute_apps "$gpu")
    [ -z "$apps" ] || { skip mps "other processes use GPU $gpu: $(echo "$apps" | tr '\n' ' ')"; return 0; }
  fi
  home=$mps_dir/$target_uuid
  pidfile=$home/pipe/nvidia-cuda-mps-control.pid
  if ! start_held mps "$nowarm_sock" "gpuhook.dev/gpus=$gpu" gpuhook.dev/mps=true gpuhook.dev/mps-threads=50; then
    fail mps "the MPS container did not start: $(last_line "$b/out")"
    stop_held "$cid"
    return 0
  fi
  pid=$(cat "$pidfile" 2>/dev/null || true)
  [ "$mode" = real ] && server=$(compute_apps "$gpu" | grep -i mps-server | head -1)
  stop_held "$cid"
  local i
  for i in $(seq 50); do [ -d "$home" ] || break; sleep 0.2; done
  if [ -z "$pid" ] || ! grep -q "^env: mps=/" "$b/out"; then
    fail mps "no control daemon for $target_uuid in $home while the container ran, or no CUDA_MPS_PIPE_DIRECTORY in it: $(grep '^env:' "$b/out")"
  elif [ "$mode" = real ] && [ -z "$server" ]; then
    fail mps "control daemon $pid ran, but nvidia-smi shows no nvidia-cuda-mps-server on GPU $gpu while the container held a context: $(grep '^cuda-probe: context' "$b/out")"
  elif ! why=$(judge_cuda "$b/out"); then
    fail mps "as an MPS client: $why"
  elif kill -0 "$pid" 2>/dev/null || [ -d "$home" ]; then
    fail mps "the control daemon $pid or $home is still there after the container"
  else
    ok mps "control daemon $pid for the container's life$( [ -n "$server" ] && echo ", server ($server)"), $(grep -o 'threads=[0-9]*' "$b/out"); $why; gone after"
  fi
}
# 3b. MPS clients as NVIDIA's drivers lay them out (issue 45, 6): two containers through one daemon, each with its
#     pipe directory at /tmp/nvidia-mps, its log directory read-only at /var/log/nvidia-mps (both in env) and its
#     shared memory at /dev/shm: the same tmpfs, device and inode, as the daemon's /dev/shm and the host's
#     mps_dir/<UUID>/shm/shared, not the runtime's private one; both hold a context as MPS clients; after them the
#     daemon, its directory and its tmpfs are gone.
init_pid() { runtime 20 "$nowarm_sock" state "$1" 2>/dev/null | grep -o '"pid": *[0-9]*' | grep -o '[0-9]*$'; }
shm_of() { stat -Lc '%d:%i' "$1" 2>/dev/null || echo "none"; }  # PATH: device:inode
check_mps_clients() {
  time_for mps-clients 60 || return 0
  local apps="" home="" pid="" one="" two="" out1="" out2="" p1="" p2="" want="" s1="" s2="" sd="" server="" why="" why2=""
  local env1="" log1="" left=""
  if [ "$mode" = real ]; then
    [ -n "$(driver_tool nvidia-cuda-mps-control)" ] || { skip mps-clients "the host has no nvidia-cuda-mps-control"; return 0; }
    apps=$(compute_apps "$gpu")
    [ -z "$apps" ] || { skip mps-clients "other processes use GPU $gpu: $(echo "$apps" | tr '\n' ' ')"; return 0; }
  fi
  home=$mps_dir/$target_uuid
  if ! start_held mps-a "$nowarm_sock" "gpuhook.dev/gpus=$gpu" gpuhook.dev/mps=true gpuhook.dev/mps-threads=50; then
    fail mps-clients "the first MPS client did not start: $(last_line "$b/out")"
    stop_held "$cid"
    return 0
  fi
  one=$cid out1=$b/out
  if ! start_held mps-b "$nowarm_sock" "gpuhook.dev/gpus=$gpu" gpuhook.dev/mps=true gpuhook.dev/mps-threads=50; then
    fail mps-clients "the second MPS client did not start beside the first: $(last_line "$b/out")"
    stop_held "$cid"
    stop_held "$one"
    return 0
  fi
  two=$cid out2=$b/out
  pid=$(cat "$home/pipe/nvidia-cuda-mps-control.pid" 2>/dev/null || true)
  p1=$(init_pid "$one") p2=$(init_pid "$two")
  want=$(shm_of "$home/shm/shared") s1=$(shm_of "/proc/$p1/root/dev/shm") s2=$(shm_of "/proc/$p2/root/dev/shm")
  sd=$(shm_of "/proc/$pid/root/dev/shm")
  env1=$(tr '\0' '\n' < "/proc/$p1/environ" 2>/dev/null | grep '^CUDA_MPS_[A-Z]*_DIRECTORY=' | sort | tr '\n' ' ')
  log1=$(awk '$5 == "/var/log/nvidia-mps" {print $6}' "/proc/$p1/mountinfo" 2>/dev/null | tail -1)
  [ "$mode" = real ] && server=$(compute_apps "$gpu" | grep -i mps-server | head -1)
  why=$(judge_cuda "$out1") || why="first client: $why"
  why2=$(judge_cuda "$out2") || why="second client: $why2"
  stop_held "$two"
  stop_held "$one"
  local i
  for i in $(seq 50); do [ -d "$home" ] || break; sleep 0.2; done
  left=$(awk -v h="$home/" 'index($5, h) == 1 {print $5}' /proc/self/mountinfo)
  if [ -z "$pid" ] || [ "$want" = none ]; then
    fail mps-clients "no control daemon ($pid) or no shared memory ($home/shm/shared) while two clients ran"
  elif [ "$s1" != "$want" ] || [ "$s2" != "$want" ] || [ "$sd" != "$want" ]; then
    fail mps-clients "/dev/shm is not the daemon's: clients $s1 and $s2, daemon $sd, $home/shm/shared $want"
  elif [ "$env1" != "CUDA_MPS_LOG_DIRECTORY=/var/log/nvidia-mps CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps " ]; then
    fail mps-clients "a client's env names $env1, not NVIDIA's pipe and log directories"
  elif [ -z "$log1" ] || [ "${log1#ro}" = "$log1" ]; then
    fail mps-clients "a client's /var/log/nvidia-mps is not the daemon's log directory, read-only ($log1)"
  elif [ "$mode" = real ] && [ -z "$server" ]; then
    fail mps-clients "control daemon $pid ran, but nvidia-smi shows no nvidia-cuda-mps-server while two clients held contexts"
  elif ! judge_cuda "$out1" >/dev/null || ! judge_cuda "$out2" >/dev/null; then
    fail mps-clients "as two MPS clients: $why"
  elif kill -0 "$pid" 2>/dev/null || [ -d "$home" ] || [ -n "$left" ]; then
    fail mps-clients "the control daemon $pid, $home or its tmpfs ($left) is still there after the clients"
  else
    ok mps-clients "two clients of daemon $pid share its /dev/shm ($want), pipe and log directories; $why; gone after"
  fi
}
driver_tool() {  # where the host (or the simulated host) keeps a driver tool
  if [ "$mode" = sim ]; then ls "$work/host/usr/bin/$1" 2>/dev/null || true; else command -v "$1" || true; fi
}

# 4. The exporter, scraped over HTTP with bash's own /dev/tcp: the GPU's telemetry, and the container holding it.
scrape() {
  timeout -k 2 15 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
    printf "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
    while IFS= read -r line <&3; do printf "%s\n" "${line%$(printf "\r")}"; done' "$exporter_port"
}
value() { grep "^$1{" "$2" | grep -F "uuid=\"$target_uuid\"" | head -1 | awk '{print $NF}'; }

check_exporter() {
  time_for exporter 40 || return 0
  $detach env -i PATH="$sys_path" GPUHOOK_CONFIG="$cfg" "$bindir/gpuhook" exporter \
    > "$work/exporter.out" 2>&1 < /dev/null &
  exporter_pid=$!
  local i got=0 m=$work/metrics m2=$work/metrics.held bad=() mem="" temp="" watts="" limit="" clock="" util=""
  for i in $(seq 100); do
    if scrape > "$m" 2>/dev/null && head -1 "$m" | grep -q ' 200'; then got=1; break; fi
    kill -0 "$exporter_pid" 2>/dev/null || break
    sleep 0.2
  done
  [ "$got" = 1 ] || { fail exporter "no /metrics on 127.0.0.1:$exporter_port: $(last_line "$work/exporter.out")"; return 0; }
  grep -q "^gpuhook_gpu_info{.*uuid=\"$target_uuid\"" "$m" || bad+=("no gpuhook_gpu_info for $target_uuid")
  [ "$(value gpuhook_gpu_healthy "$m")" = 1.0 ] || bad+=("gpuhook_gpu_healthy=$(value gpuhook_gpu_healthy "$m")")
  mem=$(value gpuhook_gpu_memory_total_bytes "$m"); temp=$(value gpuhook_gpu_temperature_celsius "$m")
  watts=$(value gpuhook_gpu_power_watts "$m"); limit=$(value gpuhook_gpu_power_limit_watts "$m")
  clock=$(value gpuhook_gpu_sm_clock_hertz "$m"); util=$(value gpuhook_gpu_utilization_ratio "$m")
  awk -v v="$mem" 'BEGIN { exit !(v > 1e9) }' || bad+=("memory total $mem")
  awk -v v="$temp" 'BEGIN { exit !(v > 0 && v < 120) }' || bad+=("temperature $temp")
  awk -v v="$watts" 'BEGIN { exit !(v > 0) }' || bad+=("power draw $watts")
  awk -v v="$clock" 'BEGIN { exit !(v > 0) }' || bad+=("SM clock $clock")
  awk -v v="$util" 'BEGIN { exit !(v >= 0 && v <= 1) }' || bad+=("utilization $util")
  same_watts "$limit" "$(host_power "$gpu")" || bad+=("power limit $limit W, the host says $(host_power "$gpu") W")
  if [ "$mode" = real ]; then
    local smi_mem smi_temp
    smi_mem=$(smi --query-gpu=memory.total --format=csv,noheader,nounits -i "$gpu" | tr -d ' ')
    smi_temp=$(smi --query-gpu=temperature.gpu --format=csv,noheader,nounits -i "$gpu" | tr -d ' ')
    awk -v a="$mem" -v b="$smi_mem" 'BEGIN { d = a / 1048576 - b; exit !(d < b * 0.02 && d > -b * 0.02) }' \
      || bad+=("memory total $mem B, nvidia-smi says $smi_mem MiB")
    near "$temp" "$smi_temp" 5 || bad+=("temperature $temp C, nvidia-smi says $smi_temp C")
  fi
  # who holds the GPU: a running container's series
  if start_held exported "$nowarm_sock" "gpuhook.dev/gpus=$gpu"; then
    scrape > "$m2" 2>/dev/null || true
    grep "^gpuhook_gpu_allocated{" "$m2" | grep -F "uuid=\"$target_uuid\"" | grep -qF "container_id=\"$cid\"" \
      || bad+=("no gpuhook_gpu_allocated series for container $cid")
  else
    bad+=("a container to watch did not start: $(last_line "$b/out")")
  fi
  stop_held "$cid"
  stop_pid "$exporter_pid"
  exporter_pid=""
  if [ ${#bad[@]} -gt 0 ]; then
    fail exporter "$(printf '%s; ' "${bad[@]}" | sed 's/; $//')"
  else
    ok exporter "$(grep -c '^gpuhook_' "$m") gpuhook_* series; $target_uuid: memory $(awk -v v="$mem" 'BEGIN { printf "%.1f GiB", v / 1073741824 }'), $temp C, $watts W of $limit W, SM $(awk -v v="$clock" 'BEGIN { printf "%d MHz", v / 1e6 }'), utilization $util; gpuhook_gpu_allocated names the running container"
  fi
}

# 5. MIG: a container given one MIG device sees exactly it. On a real GPU in MIG mode already, one of its
#    MIG devices is used and nothing is changed; on a GPU with MIG off, MIG is turned on (only if that takes no
#    reset and nothing uses the GPU), two of the smallest instances are made with `gpuhook partition apply`, and
#    MIG is turned off again with it (nvidia-smi on the way out if that failed).
mig_devices() {  # GPU: its MIG devices' UUIDs as the host lists them
  if [ "$mode" = real ]; then
    smi -L | awk -v g="$1" '/^GPU [0-9]+:/ { cur = ($2 == g ":") } cur && /MIG-/' | grep -o 'MIG-[^)]*'
  else
    gh 60 list 2>/dev/null | awk -v g="$1" '$1 == "nvidia" && index($2, g ":") == 1 {print $3}'
  fi
}

check_mig() {
  time_for mig 90 || return 0
  local found="" apps="" uuid="" why="" profile="" layout=$work/mig.toml node="" made=0
  found=$(mig_mode "$mig_gpu")
  case "$found" in
    Enabled) ;;
    Disabled) ;;
    *) skip mig "GPU $mig_gpu has no MIG mode ($found)"; return 0 ;;
  esac
  if [ "$found" = Disabled ]; then
    [ "$mode" = real ] || { skip mig "the simulated GPU $mig_gpu is not in MIG mode"; return 0; }
    apps=$(compute_apps "$mig_gpu")
    [ -z "$apps" ] || { skip mig "other processes use GPU $mig_gpu: $(echo "$apps" | tr '\n' ' ')"; return 0; }
    if ls /etc/cdi/gpuhook-* /var/run/cdi/gpuhook-* >/dev/null 2>&1; then
      skip mig "the host has gpuhook CDI specs that gpuhook partition apply would rewrite"; return 0
    fi
    [ "$(smi --query-gpu=mig.mode.pending --format=csv,noheader -i "$mig_gpu" | tr -d ' ')" = Disabled ] \
      || { skip mig "GPU $mig_gpu has a MIG mode change pending (a reset or reboot); not touched"; return 0; }
    caps_found=$(ls /dev/nvidia-caps 2>/dev/null | tr '\n' ' ')
    mig_enabled_by_us=1
    smi -i "$mig_gpu" -mig 1 > "$work/mig-on.out" 2>&1 || true
    if [ "$(mig_mode "$mig_gpu")" != Enabled ]; then
      smi -i "$mig_gpu" -mig 0 >/dev/null 2>&1 || true
      mig_enabled_by_us=0
      skip mig "MIG mode does not turn on without a GPU reset or reboot here: $(last_line "$work/mig-on.out")"
      return 0
    fi
    profile=$(smi mig -lgip -i "$mig_gpu" 2>/dev/null | grep -o 'MIG [0-9]*g\.[0-9]*gb' | head -1 | cut -d' ' -f2)
    if [ -z "$profile" ]; then
      fail mig "MIG is on, but nvidia-smi mig -lgip lists no GPU instance profile"
      mig_off; return 0
    fi
    printf '[[nvidia]]\ngpus = [%s]\nmig = ["%s", "%s"]\n' "$mig_gpu" "$profile" "$profile" > "$layout"
    if ! gh 120 partition apply "$layout" --labels "$work/labels" > "$work/mig-apply.out" 2>&1; then
      fail mig "gpuhook partition apply ($profile x2) failed: $(last_line "$work/mig-apply.out")"
      mig_off; return 0
    fi
    made=1
  fi
  uuid=$(mig_devices "$mig_gpu" | head -1)
  if [ -z "$uuid" ]; then
    [ "$made" = 1 ] && { fail mig "gpuhook partition apply said $(last_line "$work/mig-apply.out"), but GPU $mig_gpu lists no MIG device"; mig_off; return 0; }
    skip mig "GPU $mig_gpu is in MIG mode with no MIG devices: this run does not lay out a GPU it did not turn MIG on for"
    return 0
  fi
  node=$(gpu_line "$mig_gpu" | awk '{print $NF}')
  if ! start_held mig "$nowarm_sock" "gpuhook.dev/gpus=$uuid"; then
    fail mig "the container given $uuid did not start: $(last_line "$b/out")"
    stop_held "$cid"
  else
    stop_held "$cid"
    if ! why=$(judge_sight "$b/out" "$uuid" "$node" mig); then fail mig "$why"
    elif ! why=$(judge_cuda "$b/out"); then fail mig "CUDA: $why"
    else ok mig "given $uuid$( [ "$made" = 1 ] && echo " (made: 2 x $profile)"): $(judge_sight "$b/out" "$uuid" "$node" mig); ${why%%, driver API*}"
    fi
  fi
  [ "$made" = 1 ] && mig_off
  return 0
}

mig_off() {  # MIG back off, as found: gpuhook's own layout first, nvidia-smi if that leaves it on
  printf '[[nvidia]]\ngpus = [%s]\nmig = []\n' "$mig_gpu" > "$work/mig-off.toml"
  gh 120 partition apply "$work/mig-off.toml" --labels "$work/labels" > "$work/mig-off.out" 2>&1 \
    || note "gpuhook partition apply (MIG off) failed: $(last_line "$work/mig-off.out")"
  if [ "$(mig_mode "$mig_gpu")" != Disabled ]; then
    fail mig-restore "MIG is still $(mig_mode "$mig_gpu") on GPU $mig_gpu after gpuhook partition apply mig = []: turned off by nvidia-smi"
    smi mig -dci -i "$mig_gpu" >/dev/null 2>&1 || true
    smi mig -dgi -i "$mig_gpu" >/dev/null 2>&1 || true
    smi -i "$mig_gpu" -mig 0 >/dev/null 2>&1 || true
  fi
}

# 6. gpuhook doctor on this installation: exit 0. Exit 1 passes only when every warning is about the host around
#    this private installation rather than about it or the GPU: container engines it leaves unregistered on
#    purpose (it must not touch their config), and the host's own runc being one with a known CVE (named).
check_doctor() {
  time_for doctor 30 || return 0
  local rc=0 out=$work/doctor.out sock=$nowarm_sock warns="" theirs="" others="" paths=""
  [ -n "$warm_pid" ] && sock=$warm_sock
  timeout -k 5 60 env -i PATH="$sys_path" GPUHOOK_CONFIG="$cfg" GPUHOOK_WARM_SOCKET="$sock" "$bindir/gpuhook" doctor \
    > "$out" 2>&1 || rc=$?
  warns=$(grep '^\(warn\|fail\)' "$out" || true)
  theirs=$(echo "$warns" | grep '^warn  \(docker\|containerd\|crio\|cri-o\|podman\|docker --gpus\):\|^warn  [^ ]*runc: runc version .* is affected by CVE-' || true)
  others=$(echo "$warns" | grep -vxF "$theirs" | grep . || true)
  paths=$(grep 'paths:' "$out" | head -1 | sed 's/^ok *//' | cut -c1-160)
  if [ "$rc" = 0 ]; then
    ok doctor "exit 0; $paths"
  elif [ "$rc" = 1 ] && [ -z "$others" ]; then
    ok doctor "exit 1, warnings about the host only: $(echo "$theirs" | cut -d: -f1 | sed 's/^warn  //' | tr '\n' ',' | sed 's/,$//') ($(echo "$theirs" | grep -o 'runc version [^ ]* is affected by CVE-[0-9-]*' || echo 'engines this private install does not register')); $paths"
  else
    fail doctor "exit $rc: $(echo "${others:-$warns}" | head -3 | sed 's/  */ /g' | tr '\n' ';')"
  fi
}

# 7. What the run leaves: no container, nothing in gpuhook's ledger, no MPS daemon, the GPU's settings as found.
check_restored() {
  remove_containers
  gh 60 gc > "$work/gc.out" 2>&1 || true
  local bad=() held=""
  held=$(gh 30 status 2>/dev/null | grep -ci 'GPU-\|MIG-\|nvidia' || true)
  [ "$held" = 0 ] || bad+=("gpuhook status still shows $held settings: $(gh 30 status 2>&1 | tail -2 | tr '\n' ' ')")
  [ -z "$(ls -A "$mps_dir" 2>/dev/null)" ] || bad+=("MPS directories left in $mps_dir: $(ls "$mps_dir")")
  if [ "$mode" = real ]; then
    [ -z "$power_found" ] || same_watts "$(host_power "$gpu")" "$power_found" \
      || bad+=("power limit $(host_power "$gpu") W, found $power_found W")
    [ "$mig_enabled_by_us" = 0 ] || [ "$(mig_mode "$mig_gpu")" = Disabled ] || bad+=("MIG is $(mig_mode "$mig_gpu"), found Disabled")
    [ "$(mig_mode "$gpu")" = "$mig_found" ] || bad+=("MIG mode $(mig_mode "$gpu"), found $mig_found")
  fi
  if [ ${#bad[@]} -gt 0 ]; then fail restored "$(printf '%s; ' "${bad[@]}" | sed 's/; $//')"
  else ok restored "no container, no ledger entry, no MPS daemon left$( [ "$mode" = real ] && echo "; power limit ${power_found:-untouched} W and MIG ${mig_found} as found")"; fi
}

# ---------------------------------------------------------------------------------------------------------- run
note "gpu/run.sh: $mode GPU, work directory $work"
install_gpuhook || { summary; exit 1; }
find_runc || bail "no runc: none on PATH, none runs at --runc, $repo/dist/gpu/runc or tests/gpu/bin/runc (bash tests/gpu/build.sh)"
find_probe || bail "no cuda-probe runs here (dist/gpu/cuda-probe: bash tests/gpu/build.sh) and no cc to build one"
if [ "$mode" = sim ]; then
  gh 120 simulate --root "$work/host" --nvidia 2 --mig 1g.10gb 1g.10gb --mig-gpus 1 > "$work/simulate.out" 2>&1 \
    || bail "gpuhook simulate failed: $(last_line "$work/simulate.out")"
fi
write_config
target_uuid=$(host_uuid "$gpu")
[ -n "$target_uuid" ] || bail "GPU $gpu: no UUID (nvidia-smi -i $gpu)"
target_node=$(gpu_line "$gpu" | awk '{print $NF}')
[ -n "$target_node" ] || bail "gpuhook list shows no GPU $gpu: $(gh 60 list 2>&1 | tail -1)"
mig_found=$(mig_mode "$gpu")
if [ "$mode" = real ]; then
  note "host: $(smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader -i "$gpu"), $target_uuid at $target_node; MIG $mig_found"
  [ "$mig_found" != Enabled ] || note "GPU $gpu is in MIG mode: a container given the whole GPU sees no CUDA device (--gpu picks another)"
else
  note "simulated host $work/host: GPU $gpu $target_uuid at $target_node; MIG devices on GPU $mig_gpu"
fi
note "runc: $runc ($("$runc" --version | head -1)); probe: $probe; $(grep '^\(host_root\|state_dir\)' "$cfg" | tr '\n' ' ')"
make_rootfs || { summary; exit 1; }
start_warm

# A check never stops the run: errexit is off inside it (it is called in a || list), and it judges what it read.
check_sight direct || true
check_sight warm || true
check_tuning || true
check_mps || true
check_mps_clients || true
check_exporter || true
stop_pid "$warm_pid"; warm_pid=""   # no process of ours may hold the GPU while its MIG mode changes
check_mig || true
check_doctor || true
check_restored || true
cleanup
[ ${#restored_by_cleanup[@]} -eq 0 ] || fail cleanup "had to restore: $(printf '%s; ' "${restored_by_cleanup[@]}" | sed 's/; $//')"
summary
[ "$failed" = 0 ]
