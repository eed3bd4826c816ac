"""Linux system calls Python 3.11's os module lacks (openat2, mount, setns, unshare), through ctypes. The only such
module."""

from __future__ import annotations

import ctypes
import os

AT_FDCWD = -100
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_IN_ROOT = 0x10
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 0x1, 0x2, 0x4, 0x8, 0x20, 0x1000
MS_REC, MS_PRIVATE = 0x4000, 0x40000
CLONE_NEWNS = 0x00020000
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "ppc64le": 437, "riscv64": 437}.get(os.uname().machine, -1)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
_libc.setns.argtypes = (ctypes.c_int, ctypes.c_int)
_libc.unshare.argtypes = (ctypes.c_int,)


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


def _raise(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = 0) -> int:
    """openat2(2); OSError(ENOSYS) where the kernel lacks it."""
    if _SYS_OPENAT2 < 0:
        raise OSError(38, "openat2 is unknown on this architecture")
    how = _OpenHow(flags, mode, resolve)
    fd = _libc.syscall(_SYS_OPENAT2, ctypes.c_int(dirfd), os.fsencode(path), ctypes.byref(how),
                       ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        _raise(f"openat2 {path}")
    return int(fd)


def mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    """mount(2). Mounts something."""
    rc = _libc.mount(os.fsencode(source) if source else None, os.fsencode(target),
                     os.fsencode(fstype) if fstype else None, flags, None)
    if rc != 0:
        _raise(f"mount {source} on {target}")


def setns(fd: int, nstype: int) -> None:
    """setns(2): move this (single-threaded) process into another namespace."""
    if _libc.setns(fd, nstype) != 0:
        _raise("setns")


def unshare(flags: int) -> None:
    """unshare(2): give this (single-threaded) process namespaces of its own."""
    if _libc.unshare(flags) != 0:
        _raise("unshare")
