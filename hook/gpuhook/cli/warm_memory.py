"""The warm helper's memory: which pages a call writes, learned from the first calls, copied ahead in each
new worker before it waits.

A worker is a fork of the daemon: every page its first call writes is first copied (a copy-on-write fault, ~10 us
each on a VM; ~500 pages per container start here, ~5 ms). Its later calls find those pages its own: workers are
long-lived (cli/warm_worker.py), so this matters only for a fresh worker's first call (the first workers, a burst's
extra ones, a replacement). Each of the first workers reports, after its first call, the pages of the daemon's
writable mappings it now holds alone (/proc/self/pagemap: present and exclusively mapped); the daemon keeps their
union, and each worker forked later copies just those (MADV_POPULATE_WRITE, Linux 5.14) before it waits for a
call. Nothing else is copied: a waiting worker costs the host only what a call would have copied anyway.
"""

from __future__ import annotations

import os
from array import array

PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_PAGES = 16384  # 64 MiB of 4 KiB pages: more is not a container start's working set
_PRESENT, _EXCLUSIVE = 1 << 63, 1 << 56
_MADV_POPULATE_WRITE = 23


def writable() -> list[tuple[int, int]]:
    """The (first page, end page) of this process's private writable mappings."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            span, perms = line.split(None, 2)[:2]
            if perms.startswith("rw") and perms.endswith("p"):
                low, _, high = span.partition("-")
                out.append((int(low, 16) // PAGE, int(high, 16) // PAGE))
    return out


def owned(ranges: list[tuple[int, int]]) -> list[int]:
    """The pages of `ranges` this process holds alone now (written since the fork, or new)."""
    pages: list[int] = []
    fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    try:
        for first, end in ranges:
            entries = array("Q")
            entries.frombytes(os.pread(fd, 8 * (end - first), 8 * first))
            pages.extend(first + i for i, e in enumerate(entries) if e & _PRESENT and e & _EXCLUSIVE)
            if len(pages) >= MAX_PAGES:
                return pages[:MAX_PAGES]
    finally:
        os.close(fd)
    return pages


def report(fd: int, pages: list[int]) -> None:
    """Write `pages` to the daemon's memory file `fd` (one per worker). Writes a file."""
    os.write(fd, array("Q", pages).tobytes())


def read(fd: int) -> list[int]:
    """The pages a worker reported in its memory file."""
    data = os.pread(fd, 8 * MAX_PAGES, 0)
    pages = array("Q")
    pages.frombytes(data[:len(data) - len(data) % 8])
    return list(pages)


def populate(pages: set[int]) -> None:
    """Copy `pages` into this process now (runs of adjacent pages, one madvise each; pages not mapped here are
    skipped by the kernel's error, which is ignored)."""
    if not pages:
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    ordered = sorted(pages)
    start = prev = ordered[0]
    for page in [*ordered[1:], -1]:
        if page == prev + 1:
            prev = page
            continue
        libc.madvise(start * PAGE, (prev - start + 1) * PAGE, _MADV_POPULATE_WRITE)
        start = prev = page
