"""A node in a box, for gpuhook's DaemonSet to install itself onto as it does onto a real node.

The DaemonSet's pods use the host: `hostPID` and `nsenter -t 1 -m` put its installer in the node's mount namespace
(for `gpuhook configure` and `systemctl`), and its hostPath mounts (the node's / at /host, the kubelet's
directories, /run/gpuhook) are the node's paths: it copies the build to /opt/gpuhook, writes /etc/gpuhook,
containerd's config and a unit in /etc/systemd/system, and restarts containerd with `systemctl`. Here the node is a
PID and mount namespace of its own:
- its pid 1 (a reaper) holds a mount namespace where each host path the node's software writes is private: a
  tmpfs or a directory of the test's (HOST_PATHS). A path the host lacks is made for the bind and removed after;
- containerd and the kubelet run in the box's namespaces (nsenter -m -p), so a hostPID pod's pid 1 is the box's
  and its hostPath mounts are the box's paths;
- `systemctl` in the box (/usr/local/sbin, first on the images' PATH) asks the box's service manager (Box._serve,
  in the test): `restart containerd` restarts the test's containerd service; `restart gpuhook-warm` starts what
  the unit the installer wrote in the box's /etc/systemd/system says (Environment=, ExecStart=), kept running as
  its Restart=always says; `stop` stops it. /run/systemd/system exists in the box, so the installer sees a systemd
  host. That is the one stand-in: this machine has no systemd as pid 1.
A bare box (`box(d, bare=True)`) is a node that brings nothing of gpuhook's needs: in its mount namespace Python
(Debian's, pyenv's, the checkout's .venv), the C compilers and apt/dpkg are hidden (an empty file or directory of
no permissions bound over each), and /usr is read-only (as on Talos, Flatcar, Bottlerocket), /usr/local/bin too.
Its / is shared within the box (none of it with the host), as a systemd host's is, for HostToContainer mounts.
Ending the box's pid 1 ends every process in it; nothing of the box stays on the host."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .control_plane import stop as stop_process

# (host path, "tmpfs" | "dir"): what the node's software writes, private to the box
HOST_PATHS = (("/var/lib/kubelet", "tmpfs"), ("/opt", "tmpfs"), ("/usr/local/bin", "dir"),
              ("/usr/local/sbin", "dir"), ("/etc/gpuhook", "dir"), ("/var/lib/gpuhook", "dir"),
              ("/etc/containerd", "dir"), ("/etc/kubernetes", "dir"), ("/etc/systemd/system", "dir"),
              ("/run/systemd", "tmpfs"), ("/run/gpuhook", "dir"))

REAPER = """
import os, time
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.5)
"""

# what a bare box hides: what a node without Python, a compiler or a package manager lacks ($1: an empty file,
# $2: an empty directory, both of no permissions; then more directories to hide); then /usr and what is mounted
# under it read-only
BARE = """set -e
empty_file=$1 empty_dir=$2
shift 2
for f in /usr/bin/python* /usr/bin/pip* /usr/bin/cc /usr/bin/c++ /usr/bin/gcc* /usr/bin/g++* /usr/bin/cpp* \
         /usr/bin/x86_64-linux-gnu-* /usr/bin/aarch64-linux-gnu-* /usr/bin/clang* /usr/bin/tcc /usr/bin/make \
         /usr/bin/apt* /usr/bin/dpkg* /usr/sbin/dpkg* /usr/bin/aptitude; do
  if [ -f "$f" ] && [ ! -L "$f" ]; then mount --bind "$empty_file" "$f"; fi
done
for d in /usr/lib/gcc /usr/libexec/gcc /usr/lib/python3 /usr/lib/python3.* /usr/local/lib/python3* "$@"; do
  if [ -d "$d" ] && [ ! -L "$d" ]; then mount --bind "$empty_dir" "$d"; fi
done
mount --rbind /usr /usr
mount -o remount,bind,ro /usr
under=$(awk '$5 ~ "^/usr/" {print $5}' /proc/self/mountinfo)
[ -n "$under" ]
for m in $under; do mount -o remount,bind,ro "$m"; done
"""

SYSTEMCTL = """#!/bin/sh
# The test node's service manager, for what gpuhook's installer asks of systemd (tests/cluster/box.py).
cmd=$1; unit=${2%.service}
case "$cmd" in
  restart|start|stop|try-restart)
    n=$$.$(date +%s%N)
    echo "$cmd $unit" > {control}/$n.tmp && mv {control}/$n.tmp {control}/$n.req
    i=0
    while [ ! -e {control}/$n.done ]; do
      sleep 0.1; i=$((i + 1))
      [ $i -lt 600 ] || { echo "systemctl: $cmd $unit: no answer in 60 s" >&2; exit 1; }
    done
    rc=$(cat {control}/$n.done); rm -f {control}/$n.done; exit "$rc" ;;
  daemon-reload|enable|disable) exit 0 ;;
  *) echo "systemctl (test node): $cmd is not handled" >&2; exit 1 ;;
esac
"""


class Service:
    """A process of the box's, run as its service manager runs one: started in the box's namespaces, restarted on
    request. Has what cri_env.start needs of containerd's process (poll, send_signal, wait, kill, pid)."""

    def __init__(self, box: Box, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.box, self.name, self.argv, self.env, self.log = box, name, argv, env, log
        self.proc = self._start()
        self.restarts = 0
        self.stopped = False  # stopped on purpose: not brought back

    def _start(self) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as out:
            return subprocess.Popen(["nsenter", "-t", str(self.box.pid), "-m", "-p", "--", *self.argv], env=self.env,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)  # nsenter and the service it forked share the group

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM, SIGKILL after `timeout`; not brought back until restarted."""
        self.stopped = True
        stop_process(self.proc, timeout)

    def restart(self) -> None:
        self.stop()
        self.proc = self._start()
        self.stopped = False
        self.restarts += 1


@dataclass
class Box:
    d: Path
    pid: int  # the box's pid 1, as the host sees it
    holder: subprocess.Popen[bytes]
    control: Path
    services: dict[str, Service] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)  # what systemctl was asked, in order

    def path(self, inside: str) -> Path:
        """A path of the box's mount namespace, from the host."""
        return Path(f"/proc/{self.pid}/root{inside}")

    def spawner(self, name: str) -> Callable[[list[str], dict[str, str], Path], Service]:
        def spawn(argv: list[str], env: dict[str, str], log: Path) -> Service:
            self.services[name] = Service(self, name, argv, env, log)
            return self.services[name]
        return spawn

    def _serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            for req in sorted(self.control.glob("*.req")):
                cmd, _, unit = req.read_text().strip().partition(" ")
                req.unlink()
                self.asked.append(f"{cmd} {unit}")
                done = req.with_suffix(".tmp")
                done.write_text(str(self._do(cmd, unit)))
                done.rename(req.with_suffix(".done"))
            for service in list(self.services.values()):  # Restart=always
                if not service.stopped and service.poll() is not None:
                    service.restart()
            stop.wait(0.1)

    def _do(self, cmd: str, unit: str) -> int:
        service = self.services.get(unit)
        if service is None and cmd in ("restart", "try-restart", "start"):
            unit_file = self.path(f"/etc/systemd/system/{unit}.service")
            if not unit_file.is_file():
                return 5  # systemd's "unit not found"
            env, argv = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, []
            for line in unit_file.read_text().splitlines():
                key, _, value = line.partition("=")
                if key == "Environment":
                    name, _, val = value.partition("=")
                    env[name] = val
                elif key == "ExecStart":
                    argv = shlex.split(value)
            self.services[unit] = Service(self, unit, argv, env, self.d / f"{unit}.log")
        elif service is None:
            return 5
        elif cmd in ("restart", "try-restart", "start"):
            service.restart()
        elif cmd == "stop":
            service.stop()
        return 0


@contextlib.contextmanager
def box(d: Path, bare: bool = False) -> Iterator[Box]:
    d.mkdir(parents=True, exist_ok=True)
    control = d / "systemctl"
    control.mkdir()
    made: list[Path] = []
    binds = []
    for host, kind in HOST_PATHS:
        p = Path(host)
        missing = []
        while not p.exists():
            missing.append(p)
            p = p.parent
        for m in reversed(missing):
            m.mkdir()
        made.extend(missing)  # deepest first
        if kind == "tmpfs":
            binds.append(f"mount -t tmpfs -o mode=0755 tmpfs {host}")
        else:
            private = d / "paths" / host.strip("/").replace("/", "-")
            private.mkdir(parents=True)
            binds.append(f"mount --bind {private} {host}")
    sbin = d / "paths" / "usr-local-sbin"
    (sbin / "systemctl").write_text(SYSTEMCTL.replace("{control}", str(control)))
    (sbin / "systemctl").chmod(0o755)
    script = " && ".join([*binds, "mkdir -p /var/lib/kubelet/device-plugins /run/systemd/system",
                          "mount --make-rshared /", f'exec {sys.executable} -I -c "$0"'])
    with open(d / "box.log", "wb") as log:
        holder = subprocess.Popen(["unshare", "-m", "-p", "-f", "--propagation", "private", "--mount-proc", "sh",
                                   "-c", script, REAPER], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        pid = _child_of(holder.pid, 10)
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(sys.executable.encode()):
            if holder.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the box did not start: {(d / 'box.log').read_text()}")
            time.sleep(0.05)
        if bare:
            _strip(d, pid)
        b = Box(d, pid, holder, control)
        stop = threading.Event()
        manager = threading.Thread(target=b._serve, args=(stop,), daemon=True)
        manager.start()
        try:
            yield b
        finally:
            stop.set()
            manager.join(5)
            for service in reversed(list(b.services.values())):
                if service.poll() is None:
                    service.stop()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # the box's pid 1: every process in the box goes with it
        holder.wait()
        for m in made:
            with contextlib.suppress(OSError):
                m.rmdir()


def _strip(d: Path, pid: int) -> None:
    """Hide Python, the compilers and the package manager in the box's mount namespace and make /usr read-only
    (BARE), once its pid 1 runs (the test's Python, which it is, started before)."""
    empty_file, empty_dir = d / "hidden-file", d / "hidden-dir"
    empty_file.touch(mode=0)
    empty_dir.mkdir(mode=0)
    pythons = {str(Path.home() / ".pyenv"), sys.prefix, sys.base_prefix} - {"/", "/usr", "/usr/local"}
    done = subprocess.run(["nsenter", "-t", str(pid), "-m", "-p", "--", "sh", "-c", BARE, "bare", str(empty_file),
                           str(empty_dir), *sorted(pythons)], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the box could not be made bare: {done.stderr}")


def _child_of(pid: int, timeout: float) -> int:
    """unshare -f's child: the box's pid 1."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if children:
                return int(children[0])
        time.sleep(0.02)
    raise RuntimeError("unshare did not fork the box's pid 1")
