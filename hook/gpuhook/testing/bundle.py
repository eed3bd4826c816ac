"""Minimal OCI bundles (busybox-static + the host's glibc) for the demo, the tests and the benchmark."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

from gpuhook.errors import SimulatorError
from gpuhook.simulator import stub_libs as stubs

BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "ls", "cat", "grep", "stat", "id", "echo", "readlink", "head", "wc", "sleep", "true", "test")
_GLIBC = ("/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6")
LIB = "/usr/lib/x86_64-linux-gnu"


def make_rootfs(rootfs: str) -> None:
    """A small glibc image: busybox applets, ld.so, libc, /etc/ld.so.conf(.d) and /bin/dlopen-probe."""
    busybox = shutil.which("busybox") or BUSYBOX
    if not os.path.exists(busybox):
        raise SimulatorError("bundles need a static busybox: apt-get install busybox-static")
    for d in ("bin", "lib64", LIB[1:], "etc/ld.so.conf.d", "proc", "sys", "dev", "tmp", "root"):
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)
    if not os.path.lexists(os.path.join(rootfs, "lib")):
        os.symlink("usr/lib", os.path.join(rootfs, "lib"))
    shutil.copy2(busybox, os.path.join(rootfs, "bin/busybox"))
    for applet in APPLETS:
        link = os.path.join(rootfs, "bin", applet)
        if not os.path.lexists(link):
            os.symlink("busybox", link)
    shutil.copy2(os.path.realpath(_GLIBC[0]), os.path.join(rootfs, "lib64/ld-linux-x86-64.so.2"))
    shutil.copy2(os.path.realpath(_GLIBC[1]), os.path.join(rootfs, LIB[1:], "libc.so.6"))
    shutil.copy2(stubs.build("probe.c", "dlopen-probe"), os.path.join(rootfs, "bin/dlopen-probe"))
    with open(os.path.join(rootfs, "etc/ld.so.conf"), "w") as f:
        f.write("include /etc/ld.so.conf.d/*.conf\n")
    with open(os.path.join(rootfs, "etc/ld.so.conf.d/x86_64-linux-gnu.conf"), "w") as f:
        f.write(f"/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n{LIB}\n")
    with open(os.path.join(rootfs, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/tmp:/bin/sh\n")
    with open(os.path.join(rootfs, "etc/group"), "w") as f:
        f.write("root:x:0:\nuser:x:1000:\n")


def oci_config(args: Sequence[str], env: Mapping[str, str] | None = None,
               annotations: Mapping[str, str] | None = None, uid: int = 0, gid: int = 0) -> dict[str, Any]:
    """An OCI runtime config like `runc spec`'s default, running `args` as uid:gid."""
    caps = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
    env_list = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"]
    env_list += [f"{k}={v}" for k, v in (env or {}).items()]
    return {
        "ociVersion": "1.0.2-dev",
        "process": {"terminal": False, "user": {"uid": uid, "gid": gid}, "args": list(args), "env": env_list,
                    "cwd": "/", "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
                    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}], "noNewPrivileges": True},
        "root": {"path": "rootfs", "readonly": False},
        "hostname": "gpuhook",
        "annotations": dict(annotations or {}),
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
             "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
        ],
        "linux": {
            "resources": {"devices": [{"allow": False, "access": "rwm"}]},
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
        },
    }


def make_bundle(bundle: str, config: dict[str, Any], rootfs_from: str | None = None) -> str:
    """Write a bundle: config.json plus a rootfs (copied from `rootfs_from`, else built). Returns config path."""
    os.makedirs(bundle, exist_ok=True)
    rootfs = os.path.join(bundle, "rootfs")
    if rootfs_from:
        shutil.copytree(rootfs_from, rootfs, symlinks=True)
    else:
        make_rootfs(rootfs)
    path = os.path.join(bundle, "config.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    return path
