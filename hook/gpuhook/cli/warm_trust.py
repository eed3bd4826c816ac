"""Whom a warm worker serves (docs/warm-helper.md): the call message as native/warm.h sends it, the caller's
identity from the kernel, and the rules a caller must pass (trusted_caller, own_config) on every call. Reads
/proc and the config file's status; runs nothing."""

from __future__ import annotations

import os
import socket

VERSION = b"gpuhook-warm/1"
MAX_MESSAGE = 64 << 10  # warm.h's WARM_MAX
FDS = 4  # stdin, stdout, stderr, the working directory
Call = tuple[str, int, str, list[str], dict[str, str]]  # kind, umask, exe, argv, env


def peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the caller, from the kernel."""
    import struct

    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def parse(msg: bytes) -> Call | None:
    """(kind, umask, exe, argv, env) of a call message; None for anything else."""
    fields = msg.split(b"\0")
    if len(fields) < 6 or fields[0] != VERSION or fields[-1] != b"" or fields[1] not in (b"runtime", b"hook"):
        return None
    try:
        mask, argc = int(fields[2], 8), int(fields[3])
        text = [f.decode("utf-8", "surrogateescape") for f in fields[4:-1]]
    except ValueError:
        return None
    if argc < 1 or argc >= len(text) or not 0 <= mask <= 0o777:
        return None
    exe, argv, env = text[0], text[1:1 + argc], text[1 + argc:]
    if not exe.startswith("/") or any("=" not in e for e in env):
        return None
    return fields[1].decode(), mask, exe, argv, dict(e.split("=", 1) for e in env)


_NAMESPACES = ("mnt", "pid", "user", "cgroup", "ipc", "uts")
_SO_PEERPIDFD = 77  # Linux 6.5: a pidfd of the process that connected


def trusted_caller(pid: int, conn: socket.socket | None = None) -> bool:
    """Whether the process `pid` is what an engine's call to the runtime or a runtime's hook is: in this daemon's
    own namespaces (mount, pid, user, ...), at this daemon's root directory, with every capability this daemon
    has. A container's process (another mount or pid namespace, a user namespace, Docker's reduced capabilities,
    a socket bind-mounted into it, a chroot into a view of the host) is none of these. Reads /proc; the pidfd of
    `conn`'s peer, where the kernel gives one, proves the pid was not reused meanwhile."""
    try:
        for ns in _NAMESPACES:
            mine, theirs = os.stat(f"/proc/self/ns/{ns}"), os.stat(f"/proc/{pid}/ns/{ns}")
            if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
                return False
        mine, theirs = os.stat("/"), os.stat(f"/proc/{pid}/root")
        if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
            return False
        if _capabilities("self") != _capabilities(str(pid)) or _capabilities("self") is None:
            return False
    except OSError:
        return False
    return conn is None or _same_process(conn, pid)


def _capabilities(pid: str) -> tuple[int, int] | None:
    """(effective, bounding) capability sets of a process, from its status file (bounded read)."""
    fd = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = os.read(fd, 8192).decode(errors="replace")
    finally:
        os.close(fd)
    found = dict(line.split(":", 1) for line in text.splitlines() if line.startswith(("CapEff:", "CapBnd:")))
    if len(found) != 2:
        return None
    return int(found["CapEff"], 16), int(found["CapBnd"], 16)


def _same_process(conn: socket.socket, pid: int) -> bool:
    """Whether the peer that connected is still the live process `pid` (its pidfd's fdinfo); True where the kernel
    has no SO_PEERPIDFD (then the pid is what SO_PEERCRED said, and the caller is blocked waiting on us)."""
    try:
        pidfd = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
    except OSError:
        return True
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as f:
            info = f.read(4096)
    except OSError:
        return False
    finally:
        os.close(pidfd)
    line = next((ln for ln in info.splitlines() if ln.startswith(b"Pid:")), b"Pid: -1")
    return line.split()[1] == str(pid).encode()


def own_config(env: dict[str, str]) -> bool:
    """Whether the config the call names (GPUHOOK_CONFIG, else the default) is root's own: a regular file that
    root owns and only root may write, or the default path absent. Reads its status."""
    import stat as st_mod

    from gpuhook.configfile import DEFAULT_PATH, ENV

    path = env.get(ENV) or DEFAULT_PATH
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path == DEFAULT_PATH
    except OSError:
        return False
    return st_mod.S_ISREG(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022
