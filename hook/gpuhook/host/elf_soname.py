"""A shared library's linker-cache identity read from its ELF headers, as ldconfig reads it: DT_SONAME (through
PT_DYNAMIC and the PT_LOAD that maps DT_STRTAB) and the cache flags of its machine and class. The osversion is 0, as
glibc 2.35's ldconfig on write it (an older ld.so reads 0 as "any kernel"). Reads are bounded (a few headers, one
dynamic segment, one string) and made with pread on a descriptor the caller opened (non-blocking, a regular
file)."""

from __future__ import annotations

import os
import struct

from gpuhook.host.ldcache import arch_flag

_IDENT = b"\x7fELF\x02\x01"  # ELFCLASS64, little-endian
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_DYN = struct.Struct("<qQ")
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_NULL, _DT_STRTAB, _DT_SONAME = 0, 5, 14
_MACHINES = {62: "x86_64", 183: "aarch64", 21: "ppc64le", 243: "riscv64"}
_MAX_PHDRS = 128
_MAX_SEGMENT = 256 * 1024
_MAX_NAME = 1024


def identity(fd: int) -> tuple[str | None, int, int] | None:
    """(DT_SONAME or None, cache flags, osversion) of the 64-bit little-endian shared object open at `fd`; None for
    anything else (not ELF, another class, an executable, a machine the cache has no flag for). Reads the file."""
    head = os.pread(fd, _EHDR.size, 0)
    if len(head) < _EHDR.size or not head.startswith(_IDENT):
        return None
    _, e_type, machine, _, _, phoff, _, _, _, phentsize, phnum, *_ = _EHDR.unpack(head)
    name = _MACHINES.get(machine)
    if e_type != 3 or name is None or phentsize != _PHDR.size or not 0 < phnum <= _MAX_PHDRS:
        return None
    table = os.pread(fd, phnum * _PHDR.size, phoff)
    if len(table) < phnum * _PHDR.size:
        return None
    phdrs = [_PHDR.unpack_from(table, i * _PHDR.size) for i in range(phnum)]
    flags = arch_flag(name) | 0x0003  # FLAG_ELF_LIBC6: every 64-bit library (ldconfig's readelflib)
    return _soname(fd, phdrs), flags, 0


def _soname(fd: int, phdrs: list[tuple[int, ...]]) -> str | None:
    dynamic = next((p for p in phdrs if p[0] == _PT_DYNAMIC), None)
    if dynamic is None or dynamic[5] > _MAX_SEGMENT:
        return None
    data = os.pread(fd, dynamic[5], dynamic[2])
    strtab = soname = None
    for tag, value in struct.iter_unpack(_DYN.format, data[:len(data) - len(data) % _DYN.size]):
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab = value
        elif tag == _DT_SONAME:
            soname = value
    if strtab is None or soname is None:
        return None
    for p in phdrs:  # the string table's address, as a file offset
        if p[0] == _PT_LOAD and p[3] <= strtab < p[3] + p[5]:
            raw = os.pread(fd, _MAX_NAME, strtab - p[3] + p[2] + soname)
            end = raw.find(b"\0")
            return raw[:end].decode("utf-8", "surrogateescape") if end > 0 else None
    return None
