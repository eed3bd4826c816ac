"""Read glibc's ld.so.cache (the "glibc-ld.so.cache1.1" format, alone or after the old one)."""

from __future__ import annotations

import os
import struct

_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_HEADER = struct.Struct("<20sIIB3xI12x")  # magic+version, nlibs, len_strings, flags, extension offset
_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap
_FLAG_ELF_LIBC6 = 0x0003
_ARCH_FLAGS = {"x86_64": 0x0300, "aarch64": 0x0A00, "ppc64le": 0x0500, "riscv64": 0x1000}


def arch_flag(machine: str | None = None) -> int:
    """The cache's required-flags value for 64-bit libraries of this machine."""
    return _ARCH_FLAGS.get(machine or os.uname().machine, 0)


def parse(data: bytes, required: int | None = None) -> list[tuple[str, str]]:
    """(SONAME, path) pairs for the libraries of one architecture, in cache order; [] if not a cache."""
    want = arch_flag() if required is None else required
    start = data.find(_NEW_MAGIC)
    if start < 0 or len(data) < start + _HEADER.size:
        return []
    _, nlibs, _, _, _ = _HEADER.unpack_from(data, start)
    out: list[tuple[str, str]] = []
    pos = start + _HEADER.size
    for _ in range(nlibs):
        if pos + _ENTRY.size > len(data):
            break
        flags, key, value, _, _ = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        if flags & 0xFF != _FLAG_ELF_LIBC6 or flags & 0xFF00 != want:
            continue
        if start + max(key, value) >= len(data):
            continue
        out.append((_cstr(data, start + key), _cstr(data, start + value)))
    return out


def _cstr(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    return data[offset:end if end >= 0 else len(data)].decode("utf-8", "replace")
