"""glibc's ld.so.cache, read strictly and written: what ldconfig would write for the same entries.

The file written is the new format alone ("glibc-ld.so.cache1.1"): header (nlibs, len_strings, an endianness flags
byte, extension_offset), entries (flags, key, value, osversion, hwcap: key and value are offsets of strings counted
from the header), the string table, then the extension directory (its magic, a count, sections of tag, flags,
offset, size) holding the generator string and, where entries live in glibc-hwcaps subdirectories, the array of
their subdirectory names' string offsets (an entry's hwcap then holds 1<<62 | isa_level<<32 | its index). Every
ld.so from glibc 2.3 on reads a file that starts with the new magic (2.31's included: only its ldconfig still
wrote the old "ld.so-1.7.0" format in front by default, which later ld.so skip). Entries are in ldconfig's order,
which ld.so's binary search relies on: SONAMEs descending by _dl_cache_libcmp (digit runs compared as numbers),
then flags descending, glibc-hwcaps entries first (by subdirectory name), then by hwcap, then osversion; equal
keys keep the order they were added in. Pure.

An entry is a tuple (flags, soname, path, osversion, hwcap, hwcaps subdirectory name or ""); an entry with a name
holds its hwcap without the file's index of that name.
"""

from __future__ import annotations

import struct

from gpuhook.host.ldcache import arch_flag

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    Entry = tuple[int, str, str, int, int, str]

MAGIC = b"glibc-ld.so.cache1.1"
_OLD_MAGIC = b"ld.so-1.7.0"
_HEADER = struct.Struct("<20sIIB3xI12x")
_ENTRY = struct.Struct("<iIIIQ")
_OLD_HEADER, _OLD_ENTRY = 16, 12  # magic (11) padded + nlibs; flags, key, value
_EXT = struct.Struct("<II")  # magic, count
_SECTION = struct.Struct("<IIII")  # tag, flags, offset, size
_EXT_MAGIC = 0xEAA42174
_TAG_GENERATOR, _TAG_HWCAPS = 0, 1
_HWCAP_EXTENSION = 1 << 62
_ENDIAN_LITTLE = 2
MAX_SIZE = 16 * 1024 * 1024  # bytes of an image's cache gpuhook reads
MAX_STRING = 4096
GENERATOR = b"gpuhook"
FLAG_ELF_LIBC6 = 0x0003


class CacheError(ValueError):
    """A file that is not a well-formed ld.so.cache (the image's, which gpuhook then ignores)."""


def read(data: bytes) -> list[Entry]:
    """The entries of a cache file, in file order; CacheError where any offset, count or string is out of bounds."""
    start, nlibs, ext_offset = _located(data)
    hwcaps = _hwcaps_names(data, start, ext_offset)
    strings: dict[int, str] = {}
    out: list[Entry] = []
    for i, (eflags, key, value, osversion, hwcap) in enumerate(
            _ENTRY.iter_unpack(data[start + _HEADER.size:start + _HEADER.size + nlibs * _ENTRY.size])):
        name = ""
        if hwcap & _HWCAP_EXTENSION:
            index = hwcap & 0xFFFFFFFF
            if index >= len(hwcaps):
                raise CacheError(f"entry {i}: glibc-hwcaps index {index} of {len(hwcaps)}")
            name = hwcaps[index]
            hwcap &= ~0xFFFFFFFF  # the index is the file's own: build() numbers the names again
        k = strings.get(key) or _string(data, start, key, strings)
        v = strings.get(value) or _string(data, start, value, strings)
        out.append((eflags, k, v, osversion, hwcap, name))
    return out


def _located(data: bytes) -> tuple[int, int, int]:
    """(where the new format starts, its number of entries, its extension offset); CacheError where the header or
    the entries do not fit. An old-format part in front (glibc 2.31's default) is skipped: its entries are even in
    number, so the new part starts 8-aligned after them."""
    if len(data) > MAX_SIZE:
        raise CacheError(f"{len(data)} bytes, more than {MAX_SIZE}")
    start = 0
    if data.startswith(_OLD_MAGIC):
        if len(data) < _OLD_HEADER:
            raise CacheError("truncated old-format header")
        (old,) = struct.unpack_from("<I", data, 12)
        if old > (len(data) - _OLD_HEADER) // _OLD_ENTRY:
            raise CacheError(f"{old} old-format entries do not fit in {len(data)} bytes")
        start = (_OLD_HEADER + old * _OLD_ENTRY + 7) & ~7
    if data[start:start + len(MAGIC)] != MAGIC or len(data) < start + _HEADER.size:
        raise CacheError("no glibc-ld.so.cache1.1 part")
    _, nlibs, _, flags, ext_offset = _HEADER.unpack_from(data, start)
    if flags & 3 not in (0, _ENDIAN_LITTLE):
        raise CacheError("not a little-endian cache")
    if nlibs > (len(data) - start - _HEADER.size) // _ENTRY.size:
        raise CacheError(f"{nlibs} entries do not fit in {len(data)} bytes")
    return start, nlibs, ext_offset


def _string(data: bytes, start: int, offset: int, memo: dict[int, str] | None = None) -> str:
    """The NUL-terminated string at `offset` from `start`; CacheError where it is out of the file or
    unterminated."""
    at = start + offset
    if at >= len(data):
        raise CacheError(f"string offset {offset} beyond the file")
    end = data.find(b"\0", at, at + MAX_STRING)
    if end < 0:
        raise CacheError(f"string at {offset} unterminated within {MAX_STRING} bytes")
    text = data[at:end].decode("utf-8", "surrogateescape")
    if memo is not None:
        memo[offset] = text
    return text


def _hwcaps_names(data: bytes, start: int, ext_offset: int) -> list[str]:
    """The glibc-hwcaps subdirectory names of the extension section ([] without one)."""
    return [_string(data, start, o) for o in hwcaps_offsets(data, start, ext_offset)]


def hwcaps_offsets(data: bytes, start: int, ext_offset: int) -> list[int]:
    """The string offsets of the glibc-hwcaps subdirectory names in the extension section ([] without one). The
    extension's own offsets count from the file's start (after an old-format part too), the names' from the
    new-format header, as glibc's cache.c writes them."""
    base = ext_offset
    if ext_offset == 0 or base + _EXT.size > len(data):
        return []
    magic, count = _EXT.unpack_from(data, base)
    if magic != _EXT_MAGIC:
        return []
    if count > 16 or base + _EXT.size + count * _SECTION.size > len(data):
        raise CacheError(f"{count} extension sections do not fit")
    for i in range(count):
        tag, _, offset, size = _SECTION.unpack_from(data, base + _EXT.size + i * _SECTION.size)
        if tag != _TAG_HWCAPS:
            continue
        if size % 4 or size > 4096 or offset + size > len(data):
            raise CacheError("glibc-hwcaps section out of the file")
        return [o for (o,) in struct.iter_unpack("<I", data[offset:offset + size])]
    return []


def libcmp(a: str, b: str) -> int:
    """_dl_cache_libcmp: strings compared character by character, runs of digits as numbers."""
    x, y = a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape")
    i = j = 0
    while i < len(x):
        if 48 <= x[i] <= 57:
            if j >= len(y) or not 48 <= y[j] <= 57:
                return 1
            i2, j2 = i, j
            while i2 < len(x) and 48 <= x[i2] <= 57:
                i2 += 1
            while j2 < len(y) and 48 <= y[j2] <= 57:
                j2 += 1
            diff = int(x[i:i2]) - int(y[j:j2])
            if diff:
                return diff
            i, j = i2, j2
        elif j < len(y) and 48 <= y[j] <= 57:
            return -1
        elif j >= len(y) or x[i] != y[j]:
            return _signed(x[i]) - (_signed(y[j]) if j < len(y) else 0)
        else:
            i, j = i + 1, j + 1
    return 0 - (_signed(y[j]) if j < len(y) else 0)


def _signed(c: int) -> int:
    """A byte as C's char on this machine compares it (signed on x86)."""
    return c - 256 if c > 127 and _SIGNED_CHAR else c


_SIGNED_CHAR = arch_flag() == 0x0300  # x86-64: char is signed; aarch64, ppc64le, riscv64: unsigned


def lib_key(name: str) -> tuple[tuple[int, int], ...]:
    """A sort key that orders SONAMEs as _dl_cache_libcmp does: a run of digits (its value) above any other
    character, characters by their (C char) value, the end of the string a character of value 0."""
    found = _KEYS.get(name)
    if found is not None:
        return found
    raw = name.encode("utf-8", "surrogateescape")
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(raw):
        if 48 <= raw[i] <= 57:
            j = i
            while j < len(raw) and 48 <= raw[j] <= 57:
                j += 1
            out.append((1, int(raw[i:j])))
            i = j
        else:
            out.append((0, _signed(raw[i])))
            i += 1
    out.append((0, 0))
    key = _KEYS[name] = tuple(out)
    if len(_KEYS) > 65536:
        _KEYS.clear()
    return key


_KEYS: dict[str, tuple[tuple[int, int], ...]] = {}


_PLAIN = (1,)


def _entry_key(e: Entry) -> tuple[object, ...]:
    """cache.c's compare() as a key for a descending sort: SONAME, flags, glibc-hwcaps entries first and by name
    ascending, then set hwcap bits, hwcap and osversion, each higher first."""
    name = e[5]
    if not name:
        return (lib_key(e[1]), e[0], 0, _PLAIN, e[4].bit_count(), e[4], e[3])
    return (lib_key(e[1]), e[0], 1, (*(-b for b in name.encode()), 1), 0, 0, e[3])


def ordered(entries: Iterable[Entry]) -> list[Entry]:
    """The entries in ldconfig's order (stable: equal keys keep the order given)."""
    return sorted(entries, key=_entry_key, reverse=True)


def merged(image: list[Entry], injected: Iterable[Entry]) -> list[Entry]:
    """The image's entries (in the order its ldconfig wrote them) with the injected ones put in their places: an
    injected SONAME replaces every image entry of the same SONAME and flags (glibc-hwcaps variants included); among
    injected ones of equal key the first stays first. An image cache out of ldconfig's order misleads only its own
    container's lookups, so it is not sorted again (a binary search per injected entry, not a sort of them all)."""
    mine = ordered(injected)
    taken = {(e[0], e[1]) for e in mine}
    out = [e for e in image if (e[0], e[1]) not in taken] if taken else list(image)
    for e in mine:
        key = _entry_key(e)
        lo, hi = 0, len(out)
        while lo < hi:
            mid = (lo + hi) // 2
            if _entry_key(out[mid]) >= key:
                lo = mid + 1
            else:
                hi = mid
        out.insert(lo, e)
    return out


def build(entries: list[Entry]) -> bytes:
    """The cache file holding `entries` (already in ldconfig's order) in the new format, with the extension
    directory (the generator, and the glibc-hwcaps names the entries use)."""
    names = sorted({e[5] for e in entries if e[5]})
    index = {n: i for i, n in enumerate(names)}
    table = Strings(_HEADER.size + len(entries) * _ENTRY.size)
    intern, strings = table.intern, table.data

    packed = bytearray()
    for flags, key, value, osversion, hwcap, name in entries:
        if name:
            hwcap = (hwcap & ~0xFFFFFFFF) | _HWCAP_EXTENSION | index[name]
        packed += _ENTRY.pack(flags, intern(key), intern(value), osversion, hwcap)
    hwcaps = [intern(n) for n in names]
    return finish(len(entries), bytes(packed), bytes(strings), hwcaps)


class Strings:
    """A string table being built: each string once, NUL-terminated, at file offsets from `base`."""

    def __init__(self, base: int) -> None:
        self.base, self.data, self._offsets = base, bytearray(), dict[str, int]()

    def intern(self, s: str) -> int:
        """The file offset of `s`, added where new."""
        found = self._offsets.get(s)
        if found is None:
            found = self._offsets[s] = self.base + len(self.data)
            self.data.extend(s.encode("utf-8", "surrogateescape") + b"\0")
        return found


def finish(count: int, packed: bytes, strings: bytes, hwcaps: list[int]) -> bytes:
    """The file from its parts: the header, `count` packed entries, the string table, padding to 4, the extension
    directory with the glibc-hwcaps array (`hwcaps`: string offsets) and the generator."""
    table_start = _HEADER.size + count * _ENTRY.size
    ext_offset = (table_start + len(strings) + 3) & ~3
    sections = [(_TAG_HWCAPS, len(hwcaps) * 4)] if hwcaps else []
    sections.append((_TAG_GENERATOR, len(GENERATOR)))
    ext = bytearray(_EXT.pack(_EXT_MAGIC, len(sections)))
    at = ext_offset + _EXT.size + len(sections) * _SECTION.size
    for tag, size in sections:
        ext += _SECTION.pack(tag, 0, at, size)
        at += size
    ext += struct.pack(f"<{len(hwcaps)}I", *hwcaps) + GENERATOR
    header = _HEADER.pack(MAGIC, count, len(strings), _ENDIAN_LITTLE, ext_offset)
    return header + packed + strings + b"\0" * (ext_offset - table_start - len(strings)) + bytes(ext)
