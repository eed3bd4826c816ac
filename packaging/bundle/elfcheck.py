"""Check a self-contained build (packaging/build-bundle.sh) before it is published: what its ELF files need of the
host. Every file in bin/ that is an ELF must be static (no loader, no library); every other ELF may need only
libraries the build carries in lib/, and no glibc symbol version newer than the build's own C library defines.
Stub libraries (gpuhook/simulator/prebuilt), which containers of any age load, may need nothing above GLIBC_2.17.

Usage: python3 packaging/bundle/elfcheck.py BUILD_DIR   (prints the findings; exit 1 on any)
"""

from __future__ import annotations

import os
import struct
import sys

SHT_DYNAMIC, SHT_VERDEF, SHT_VERNEED = 6, 0x6FFFFFFD, 0x6FFFFFFE
PT_INTERP, DT_NEEDED = 3, 1
STUB_GLIBC = (2, 17)


def read_elf(path: str) -> dict[str, object] | None:
    """The loader, libraries and symbol versions an ELF file needs and defines; None when it is no ELF file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None  # not an ELF (or not 64-bit little-endian, which no target of the build is)
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    interp = None
    for i in range(phnum):
        ptype, _, off, _, _, size = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if ptype == PT_INTERP:
            interp = data[off:off + size].rstrip(b"\0").decode()
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table: int, at: int) -> str:
        start = sections[table][4] + at
        return data[start:data.index(b"\0", start)].decode()

    needed: list[str] = []
    wants: set[str] = set()
    defines: set[str] = set()
    for _, stype, _, _, off, size, link, info, _, entsize in sections:
        if stype == SHT_DYNAMIC:
            for at in range(off, off + size, entsize):
                tag, val = struct.unpack_from("<qQ", data, at)
                if tag == DT_NEEDED:
                    needed.append(string(link, val))
        elif stype == SHT_VERNEED:
            at = off
            for _ in range(info):
                _, cnt, _, aux, nxt = struct.unpack_from("<HHIII", data, at)
                a = at + aux
                for _ in range(cnt):
                    _, _, _, name, anext = struct.unpack_from("<IHHII", data, a)
                    wants.add(string(link, name))
                    a += anext
                at += nxt
        elif stype == SHT_VERDEF:
            at = off
            for _ in range(info):
                _, _, _, _, cnt, aux, nxt = struct.unpack_from("<HHHHIII", data, at)
                if cnt:
                    defines.add(string(link, struct.unpack_from("<I", data, at + aux)[0]))
                at += nxt
    return {"interp": interp, "needed": needed, "wants": wants, "defines": defines}


def glibc(versions: set[str]) -> tuple[int, ...]:
    """The newest GLIBC_x.y among `versions` ((0,) when none)."""
    found = [tuple(int(p) for p in v[6:].split(".")) for v in versions
             if v.startswith("GLIBC_") and v[6:].replace(".", "").isdigit()]
    return max(found, default=(0,))


def check(build: str) -> list[str]:
    """Every finding about `build`'s ELF files, one line each."""
    findings = []
    libdir = os.path.join(build, "lib")
    libc = read_elf(os.path.join(libdir, "libc.so.6"))
    if libc is None:
        return [f"{libdir}/libc.so.6: missing: the build carries its own C library"]
    own = glibc(libc["defines"])  # type: ignore[arg-type]
    carried = set(os.listdir(libdir))
    for top, dirs, files in os.walk(build):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            elf = read_elf(path)
            if elf is None:
                continue
            rel = os.path.relpath(path, build)
            wants = glibc(elf["wants"])  # type: ignore[arg-type]
            if rel.startswith("bin/"):
                if elf["interp"] or elf["needed"]:
                    findings.append(f"{rel}: not static (loader {elf['interp']}, needs {elf['needed']})")
            elif "/simulator/prebuilt/" in rel:
                if wants > STUB_GLIBC:
                    findings.append(f"{rel}: needs GLIBC_{'.'.join(map(str, wants))} (stubs: at most 2.17)")
            else:
                if wants > own:
                    findings.append(f"{rel}: needs GLIBC_{'.'.join(map(str, wants))}, the build's own C library "
                                    f"is {'.'.join(map(str, own))}")
                missing = [lib for lib in elf["needed"] if lib not in carried]  # type: ignore[attr-defined]
                if missing:
                    findings.append(f"{rel}: needs {', '.join(missing)}, which the build does not carry")
    return findings


def main() -> int:
    """Print the findings about the build named in argv; exit 1 on any."""
    findings = check(sys.argv[1])
    for line in findings:
        print(f"elfcheck: {line}", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
