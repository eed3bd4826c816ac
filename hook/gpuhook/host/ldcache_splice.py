"""The image's ld.so.cache with the injected entries spliced in, without decoding the rest of it: the same file
ldcache_write.build(merged(read(image), injected)) writes, for the cost of the injected entries.

The image's entries stay as its ldconfig ordered them (binary searches find where each injected entry goes, and the
image entries of its SONAME and flags, which it replaces); their records are copied with their string offsets moved
by the size of the entries added or removed; the image's string table is copied whole after them, the injected
strings after it, then a new extension directory whose glibc-hwcaps array names the image's subdirectories in the
image's own order (so the image entries' hwcap indices stay valid). Every image string offset is checked to lie in
the image's string table, every hwcap index in its array. Pure.
"""

from __future__ import annotations

import struct

from gpuhook.host import ldcache_write as w

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from gpuhook.host.ldcache_write import Entry

_LOW = 0xFFFFFFFF


def splice(data: bytes, injected: Iterable[Entry]) -> bytes:
    """The cache file `data` (an image's) with `injected` entries in their places; CacheError where it is malformed."""
    start, nlibs, ext_offset = w._located(data)
    table = w._HEADER.size + nlibs * w._ENTRY.size  # the image's strings start here (offsets count from `start`)
    size = len(data) - start
    name_offsets = w.hwcaps_offsets(data, start, ext_offset)
    names = [w._string(data, start, o) for o in name_offsets]
    raw = data[start + w._HEADER.size:start + table]
    recs = list(w._ENTRY.iter_unpack(raw))
    if any(not table <= k < size or not table <= v < size for _, k, v, _, _ in recs) or any(
            not table <= o < size for o in name_offsets):
        raise w.CacheError("a string offset outside the string table")
    if any(h & w._HWCAP_EXTENSION and h & _LOW >= len(names) for *_, h in recs):
        raise w.CacheError("a glibc-hwcaps index outside its array")
    sonames: dict[int, str] = {}
    keys: dict[int, tuple[object, ...]] = {}

    def soname(i: int) -> str:
        found = sonames.get(i)
        if found is None:
            found = sonames[i] = w._string(data, start, recs[i][1])
        return found

    def key(i: int) -> tuple[object, ...]:
        found = keys.get(i)
        if found is None:
            flags, _, _, osversion, hwcap = recs[i]
            name = names[hwcap & _LOW] if hwcap & w._HWCAP_EXTENSION else ""
            found = keys[i] = w._entry_key((flags, soname(i), "", osversion, hwcap & ~_LOW if name else hwcap, name))
        return found

    removed: set[int] = set()
    places: list[tuple[int, Entry]] = []  # (the image entry it goes before, the entry): positions never decrease
    for e in w.ordered(injected):
        k = w._entry_key(e)
        lo, hi = 0, nlibs
        while lo < hi:
            mid = (lo + hi) // 2
            if key(mid) >= k:
                lo = mid + 1
            else:
                hi = mid
        for step, j in ((-1, lo - 1), (1, lo)):  # its group, both ways: the same SONAME key and flags
            while 0 <= j < nlibs and key(j)[:2] == k[:2]:
                if soname(j) == e[1]:
                    removed.add(j)
                j += step
        places.append((lo, e))
    return _assemble(data[start + table:], raw, nlibs, removed, places, name_offsets)


def _assemble(image_strings: bytes, raw: bytes, nlibs: int, removed: set[int], places: list[tuple[int, Entry]],
              name_offsets: list[int]) -> bytes:
    """The new file: the kept image records (offsets moved) with the injected ones between, the image's strings
    (its old extension, unused, with them), the injected strings, the extension."""
    count = nlibs - len(removed) + len(places)
    shift = (count - nlibs) * w._ENTRY.size
    table = w.Strings(w._HEADER.size + count * w._ENTRY.size + len(image_strings))
    intern, extra = table.intern, table.data

    out = bytearray()
    done = 0
    for pos, e in places:
        out += _moved(raw, done, pos, removed, shift)
        done = pos
        flags, soname, value, osversion, hwcap, _ = e
        out += w._ENTRY.pack(flags, intern(soname), intern(value), osversion, hwcap)
    out += _moved(raw, done, nlibs, removed, shift)
    return w.finish(count, bytes(out), image_strings + bytes(extra), [o + shift for o in name_offsets])


def _moved(raw: bytes, first: int, last: int, removed: set[int], shift: int) -> bytes:
    """Image records first..last-1, less the removed ones, their key and value offsets moved by `shift`."""
    if first >= last:
        return b""
    size = w._ENTRY.size
    if removed & set(range(first, last)):
        chunk = b"".join(raw[i * size:(i + 1) * size] for i in range(first, last) if i not in removed)
    else:
        chunk = raw[first * size:last * size]
    words = memoryview(bytearray(chunk)).cast("I")  # 6 per record: flags, key, value, osversion, hwcap (2)
    for column in (1, 2):  # (not the array module: it loads collections, which the GPU path keeps out)
        moved = [x + shift for x in words[column::6].tolist()]
        words[column::6] = memoryview(struct.pack(f"={len(moved)}I", *moved)).cast("I")
    return words.tobytes()
