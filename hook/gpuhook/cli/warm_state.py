"""A long-lived warm worker's own state between calls: taken once while it waits for its first call, put back after
each call (its stdin, stdout, stderr, working directory, umask, environment, argv and sys.path, sys.std*), and
compared after that. What a call left that cannot be put back (a descriptor, another namespace or root, a thread,
a signal disposition, other credentials, a grown memory) or that the call's code changed on its own (the
environment, the working directory or the umask the caller gave) is named: the worker then exits after its answer
instead of serving another caller with it (cli/warm.py).

Reads /proc/self (one bounded read of its status, its descriptors and namespaces); nothing here runs a call."""

from __future__ import annotations

import contextlib
import os
import stat
import sys

_STATUS = (b"Umask", b"Uid", b"Gid", b"Groups", b"CapInh", b"CapPrm", b"CapEff", b"CapBnd", b"CapAmb", b"NoNewPrivs",
           b"Seccomp", b"SigBlk", b"SigIgn", b"SigCgt", b"Threads")
_NAMESPACES = ("mnt", "pid", "pid_for_children", "user", "cgroup", "ipc", "uts", "net", "time", "time_for_children")
MAX_GROWTH = 64 << 20  # bytes of resident memory a worker may gain over what it had waiting for its first call
_STATUS_MAX = 16384
Descriptors = dict[int, tuple[int, int, int]]  # fd -> (device, inode, file type)


def status() -> tuple[dict[bytes, bytes], int]:
    """The lines of /proc/self/status that must not change between calls, and the resident set size in bytes."""
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = os.read(fd, _STATUS_MAX)
    finally:
        os.close(fd)
    found: dict[bytes, bytes] = {}
    rss = 0
    for line in text.splitlines():
        key, _, value = line.partition(b":")
        if key in _STATUS:
            found[key] = value.strip()
        elif key == b"VmRSS":
            rss = int(value.split()[0]) * 1024
    return found, rss


def descriptors() -> Descriptors:
    """Every descriptor this process holds, with what it is."""
    out: Descriptors = {}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            st = os.fstat(fd)
        except OSError:  # the directory listdir itself had open
            continue
        out[fd] = (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode))
    return out


def namespaces() -> dict[str, str]:
    """This process's namespaces (the kernel's names, as /proc/self/ns/* link them) and its root directory."""
    out = {}
    for ns in _NAMESPACES:
        with contextlib.suppress(FileNotFoundError):  # an older kernel without time namespaces
            out[ns] = os.readlink(f"/proc/self/ns/{ns}")
    st = os.stat("/proc/self/root")
    out["root"] = f"{st.st_dev}:{st.st_ino}"
    return out


class Idle:
    """The worker as it waits for a call: what every call must leave it as. Holds copies of its stdin, stdout,
    stderr and working directory (descriptors of its own, not a caller's)."""

    def __init__(self, kept_devices: tuple[str, ...] = ()) -> None:
        for fd in range(3):  # a daemon started with one closed: /dev/null there, as a call's is put back over it
            try:
                os.fstat(fd)
            except OSError:
                null = os.open(os.devnull, os.O_RDWR)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
        self.stdio = [os.dup(fd) for fd in range(3)]  # non-inheritable copies
        self.umask = _umask()
        self.cwd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self.environ = dict(os.environ)
        self.argv = list(sys.argv)
        self.path = list(sys.path)
        self.streams = (sys.stdin, sys.stdout, sys.stderr)
        self.status, self.rss = status()
        self.namespaces = namespaces()
        self.kept_devices = kept_devices  # device node prefixes whose descriptors a GPU library may keep open
        self.fds = descriptors()

    def forget(self, fd: int) -> None:
        """`fd`, closed by the worker itself (not by a call), is no longer expected. Closes it."""
        os.close(fd)
        self.fds.pop(fd, None)

    def changed_by(self, env: dict[str, str], cwd: tuple[int, int], mask: int) -> list[str]:
        """What the call's own code changed of what the caller gave it (its environment, working directory (the
        root aside) and umask) or of sys.path: a worker whose code does that is doubtful."""
        doubts = []
        if os.environ != env:
            doubts.append("the call changed its environment")
        try:
            st, top = os.stat("."), os.stat("/")
            if (st.st_dev, st.st_ino) not in (cwd, (top.st_dev, top.st_ino)):  # setns(2) to a mount namespace, and
                doubts.append("the call changed its working directory")  # back (hook mode), leaves it at the root
        except OSError:
            doubts.append("the call's working directory is gone")
        if _umask() != mask:
            doubts.append("the call changed its umask")
        if sys.path != self.path:
            doubts.append("the call changed sys.path")
        return doubts

    def restore(self) -> None:
        """Put back what a call is given (stdin, stdout, stderr, working directory, umask, environment, argv,
        sys.path, sys.std*): the caller's descriptors closed in this process. Changes this process."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        sys.stdin, sys.stdout, sys.stderr = self.streams
        for target, fd in enumerate(self.stdio):
            os.dup2(fd, target)
        os.fchdir(self.cwd)
        os.umask(self.umask)
        if os.environ != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        sys.argv = list(self.argv)
        sys.path[:] = self.path

    def doubts(self, passed: list[tuple[int, int]]) -> list[str]:
        """What the last call left behind that `restore` cannot take back (`passed`: the identities of the
        caller's descriptors); [] when this worker is as it was. A descriptor to a GPU's device node that a
        library opened for itself is kept (and expected from then on). Reads /proc/self."""
        found = []
        fds = descriptors()
        if fds != self.fds:
            import gc

            gc.collect()  # a descriptor only a collected object closes
            fds = descriptors()
        for fd, what in fds.items():
            if self.fds.get(fd) == what:
                continue
            if fd not in self.fds and self._kept(fd, what, passed):
                self.fds[fd] = what
                continue
            found.append(f"descriptor {fd} ({_target(fd)}) left open")
        found += [f"descriptor {fd} closed or replaced" for fd in self.fds if fd not in fds]
        now, rss = status()
        found += [f"its {key.decode()} changed" for key in _STATUS if now.get(key) != self.status.get(key)]
        if rss > self.rss + MAX_GROWTH:
            found.append(f"it grew to {rss >> 20} MiB")
        try:
            spaces = namespaces()
        except OSError:
            spaces = {}
        found += [f"its {ns} namespace changed" for ns in self.namespaces if spaces.get(ns) != self.namespaces[ns]]
        if _children():
            found.append("a process it started is still there")
        return found

    def _kept(self, fd: int, what: tuple[int, int, int], passed: list[tuple[int, int]]) -> bool:
        """Whether `fd` is a GPU library's own session with its driver: a character device among the vendors'
        nodes, and none of the caller's descriptors."""
        if what[2] != stat.S_IFCHR or what[:2] in passed or not self.kept_devices:
            return False
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False
        return target.startswith(self.kept_devices)


def _target(fd: int) -> str:
    """What `fd` names, as /proc/self/fd links it."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


def _children() -> list[int]:
    """This process's children (a zombie too), from /proc (empty where the kernel does not list them)."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(p) for p in f.read(65536).split()]
    except OSError:
        return []


def _umask() -> int:
    """This process's umask (set and set back)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask
