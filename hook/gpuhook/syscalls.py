"""Linux system calls Python 3.11's os module lacks (openat2, mount, setns, unshare, statfs, bpf), through ctypes. The
only such module."""

from __future__ import annotations

import ctypes
import os

AT_FDCWD = -100
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_IN_ROOT = 0x10
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 0x1, 0x2, 0x4, 0x8, 0x20, 0x1000
MS_REC, MS_PRIVATE, MS_SLAVE = 0x4000, 0x40000, 0x80000
MNT_DETACH, UMOUNT_NOFOLLOW = 0x2, 0x8
TMPFS_MAGIC = 0x01021994
CLONE_NEWNS = 0x00020000
CGROUP2_SUPER_MAGIC = 0x63677270
BPF_PROG_TYPE_CGROUP_DEVICE, BPF_CGROUP_DEVICE = 15, 6  # the program type; its attach type
BPF_F_ALLOW_OVERRIDE, BPF_F_ALLOW_MULTI, BPF_F_REPLACE = 1, 2, 4
_MACHINE = os.uname().machine
_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437, "ppc64le": 437, "riscv64": 437}.get(_MACHINE, -1)
_SYS_OPEN_TREE = 428 if _SYS_OPENAT2 > 0 else -1  # and move_mount 429: the same on every architecture since 5.2
OPEN_TREE_CLONE, MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH = 1, 0x4, 0x40
_SYS_BPF = {"x86_64": 321, "aarch64": 280, "ppc64le": 361, "riscv64": 280, "s390x": 351}.get(_MACHINE, -1)
_PROG_LOAD, _PROG_ATTACH, _PROG_DETACH, _PROG_GET_NEXT_ID, _PROG_GET_FD_BY_ID, _OBJ_GET_INFO_BY_FD, _PROG_QUERY = (
    5, 8, 9, 11, 13, 15, 16)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
_libc.setns.argtypes = (ctypes.c_int, ctypes.c_int)
_libc.unshare.argtypes = (ctypes.c_int,)
_libc.statfs.argtypes = (ctypes.c_char_p, ctypes.c_void_p)
_libc.setfsuid.argtypes = (ctypes.c_uint,)
_libc.setfsgid.argtypes = (ctypes.c_uint,)


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


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2), with the filesystem's options in `data` (tmpfs: size=, mode=). Mounts something."""
    rc = _libc.mount(os.fsencode(source) if source else None, os.fsencode(target),
                     os.fsencode(fstype) if fstype else None, flags,
                     ctypes.c_char_p(data.encode()) if data else None)
    if rc != 0:
        _raise(f"mount {source} on {target}")


def umount(target: str, flags: int) -> None:
    """umount2(2) (MNT_DETACH, UMOUNT_NOFOLLOW). Unmounts something."""
    if _libc.umount2(os.fsencode(target), flags) != 0:
        _raise(f"umount {target}")


def open_tree(path: str) -> int:
    """open_tree(2) with OPEN_TREE_CLONE: a detached copy of the mount at `path` (this mount namespace's), which
    move_mount can attach in another namespace; OSError(ENOSYS) before Linux 5.2."""
    if _SYS_OPEN_TREE < 0:
        raise OSError(38, "open_tree is unknown on this architecture")
    fd = _libc.syscall(_SYS_OPEN_TREE, ctypes.c_int(AT_FDCWD), os.fsencode(path),
                       ctypes.c_uint(OPEN_TREE_CLONE | os.O_CLOEXEC))
    if fd < 0:
        _raise(f"open_tree {path}")
    return int(fd)


def move_mount(tree: int, target: int) -> None:
    """move_mount(2): the detached mount `tree` attached on the open directory `target`. Mounts something."""
    rc = _libc.syscall(_SYS_OPEN_TREE + 1, ctypes.c_int(tree), b"", ctypes.c_int(target), b"",
                       ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
    if rc != 0:
        _raise("move_mount")


def setns(fd: int, nstype: int) -> None:
    """setns(2): move this (single-threaded) process into another namespace."""
    if _libc.setns(fd, nstype) != 0:
        _raise("setns")


def unshare(flags: int) -> None:
    """unshare(2): give this (single-threaded) process namespaces of its own."""
    if _libc.unshare(flags) != 0:
        _raise("unshare")


def set_fs_ids(uid: int, gid: int) -> tuple[int, int]:
    """setfsgid(2) and setfsuid(2): files this thread creates from now on are owned by uid:gid (capabilities for
    files drop while uid is not 0). The ids before; OSError where the kernel did not take them."""
    old_gid, old_uid = _libc.setfsgid(gid), _libc.setfsuid(uid)
    if _libc.setfsuid(uid) != uid or _libc.setfsgid(gid) != gid:  # each returns the ids now in force
        _libc.setfsuid(old_uid)
        _libc.setfsgid(old_gid)
        raise OSError(1, f"setfsuid/setfsgid {uid}:{gid}: refused")
    return int(old_uid), int(old_gid)


def statfs_type(path: str) -> int:
    """statfs(2)'s f_type of the filesystem at `path` (CGROUP2_SUPER_MAGIC for cgroup2)."""
    buf = (ctypes.c_long * 32)()  # struct statfs is 120 bytes on 64-bit Linux; f_type comes first
    if _libc.statfs(os.fsencode(path), buf) != 0:
        _raise(f"statfs {path}")
    return int(buf[0]) & 0xFFFFFFFF


# --- bpf(2): union bpf_attr, one structure per command, as include/uapi/linux/bpf.h lays it out ----------------

class _ProgLoad(ctypes.Structure):
    _fields_ = (("prog_type", ctypes.c_uint32), ("insn_cnt", ctypes.c_uint32), ("insns", ctypes.c_uint64),
                ("license", ctypes.c_uint64), ("log_level", ctypes.c_uint32), ("log_size", ctypes.c_uint32),
                ("log_buf", ctypes.c_uint64), ("kern_version", ctypes.c_uint32), ("prog_flags", ctypes.c_uint32),
                ("prog_name", ctypes.c_char * 16))


class _Attach(ctypes.Structure):
    _fields_ = (("target_fd", ctypes.c_uint32), ("attach_bpf_fd", ctypes.c_uint32), ("attach_type", ctypes.c_uint32),
                ("attach_flags", ctypes.c_uint32), ("replace_bpf_fd", ctypes.c_uint32))


class _Query(ctypes.Structure):
    _fields_ = (("target_fd", ctypes.c_uint32), ("attach_type", ctypes.c_uint32), ("query_flags", ctypes.c_uint32),
                ("attach_flags", ctypes.c_uint32), ("prog_ids", ctypes.c_uint64), ("prog_cnt", ctypes.c_uint32),
                ("_pad", ctypes.c_uint32))


class _Id(ctypes.Structure):
    _fields_ = (("id", ctypes.c_uint32), ("next_id", ctypes.c_uint32), ("open_flags", ctypes.c_uint32))


class _Info(ctypes.Structure):
    _fields_ = (("bpf_fd", ctypes.c_uint32), ("info_len", ctypes.c_uint32), ("info", ctypes.c_uint64))


class _ProgInfo(ctypes.Structure):  # the head of struct bpf_prog_info, up to its name
    _fields_ = (("type", ctypes.c_uint32), ("id", ctypes.c_uint32), ("tag", ctypes.c_uint8 * 8),
                ("jited_prog_len", ctypes.c_uint32), ("xlated_prog_len", ctypes.c_uint32),
                ("jited_prog_insns", ctypes.c_uint64), ("xlated_prog_insns", ctypes.c_uint64),
                ("load_time", ctypes.c_uint64), ("created_by_uid", ctypes.c_uint32), ("nr_map_ids", ctypes.c_uint32),
                ("map_ids", ctypes.c_uint64), ("name", ctypes.c_char * 16))


def _bpf(cmd: int, attr: ctypes.Structure, what: str) -> int:
    if _SYS_BPF < 0:
        raise OSError(38, f"{what}: bpf(2) is unknown on this architecture")
    rc = _libc.syscall(ctypes.c_long(_SYS_BPF), ctypes.c_int(cmd), ctypes.byref(attr),
                       ctypes.c_uint(ctypes.sizeof(attr)))
    if rc < 0:
        _raise(what)
    return int(rc)


def bpf_prog_load(prog_type: int, insns: bytes, license: str, name: str) -> int:
    """BPF_PROG_LOAD: a new program's descriptor (the caller closes it); OSError with the verifier's log."""
    code, lic = ctypes.create_string_buffer(insns, len(insns)), ctypes.create_string_buffer(license.encode())
    attr = _ProgLoad(prog_type, len(insns) // 8, ctypes.addressof(code), ctypes.addressof(lic))
    attr.prog_name = name.encode()[:15]
    try:
        return _bpf(_PROG_LOAD, attr, f"bpf(BPF_PROG_LOAD) of {name}")
    except OSError as e:  # again, with the verifier's log, to say why
        log = ctypes.create_string_buffer(1 << 16)
        attr.log_level, attr.log_size, attr.log_buf = 1, len(log), ctypes.addressof(log)
        try:
            return _bpf(_PROG_LOAD, attr, f"bpf(BPF_PROG_LOAD) of {name}")
        except OSError:
            text = " | ".join(log.value.decode(errors="replace").strip().splitlines()[-3:])
            raise OSError(e.errno, f"{e.strerror}{': ' + text if text else ''}") from None


def bpf_prog_query(target_fd: int, attach_type: int) -> tuple[int, list[int]]:
    """BPF_PROG_QUERY: the attach flags and the ids of the programs attached to `target_fd` (not inherited)."""
    size = 64
    while True:
        ids = (ctypes.c_uint32 * size)()
        attr = _Query(target_fd, attach_type, 0, 0, ctypes.addressof(ids), size)
        try:
            _bpf(_PROG_QUERY, attr, "bpf(BPF_PROG_QUERY)")
        except OSError as e:
            if e.errno != 28 or attr.prog_cnt <= size:  # ENOSPC: more than `size`, prog_cnt says how many
                raise
            size = attr.prog_cnt
            continue
        return int(attr.attach_flags), [int(i) for i in ids[: attr.prog_cnt]]


def bpf_prog_get_fd_by_id(prog_id: int) -> int:
    """BPF_PROG_GET_FD_BY_ID: a descriptor of a loaded program (the caller closes it)."""
    return _bpf(_PROG_GET_FD_BY_ID, _Id(prog_id), f"bpf(BPF_PROG_GET_FD_BY_ID) of program {prog_id}")


def bpf_prog_attach(target_fd: int, prog_fd: int, attach_type: int, flags: int, replace_fd: int = 0) -> None:
    """BPF_PROG_ATTACH (with BPF_F_REPLACE: in place of `replace_fd`, atomically). Changes a cgroup's programs."""
    _bpf(_PROG_ATTACH, _Attach(target_fd, prog_fd, attach_type, flags, replace_fd), "bpf(BPF_PROG_ATTACH)")


def bpf_prog_detach(target_fd: int, prog_fd: int, attach_type: int) -> None:
    """BPF_PROG_DETACH of one program. Changes a cgroup's programs."""
    _bpf(_PROG_DETACH, _Attach(target_fd, prog_fd, attach_type), "bpf(BPF_PROG_DETACH)")


def bpf_prog_info(prog_fd: int) -> tuple[int, int, str]:
    """BPF_OBJ_GET_INFO_BY_FD of a program: its type, id and name."""
    info = _ProgInfo()
    _bpf(_OBJ_GET_INFO_BY_FD, _Info(prog_fd, ctypes.sizeof(info), ctypes.addressof(info)), "bpf(BPF_OBJ_GET_INFO)")
    return int(info.type), int(info.id), info.name.decode(errors="replace")


def bpf_prog_ids() -> list[int]:
    """BPF_PROG_GET_NEXT_ID from the start: the ids of every program loaded on the machine."""
    out: list[int] = []
    while True:
        attr = _Id(out[-1] if out else 0)
        try:
            _bpf(_PROG_GET_NEXT_ID, attr, "bpf(BPF_PROG_GET_NEXT_ID)")
        except OSError as e:
            if e.errno == 2:  # ENOENT: no more
                return out
            raise
        out.append(int(attr.next_id))
