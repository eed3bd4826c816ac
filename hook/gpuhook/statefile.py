"""The one reader of gpuhook's own files (state_dir's records, allocations, ledger and procfs copies, a bundle's
config.json): opened non-blocking, never through a link, regular files only, and bounded, as image files are. A
FIFO, a device node or a link put where a record should be is an OSError naming the path, never a process that
waits or reads forever. (The reading itself is configfile.read_regular, which the pass-through path has loaded.)"""

from __future__ import annotations

import os

from gpuhook.configfile import read_regular


def read_bounded(path: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them; OSError (ELOOP for a link, EINVAL for
    anything but a regular file, EFBIG past `limit`) otherwise. Reads a file."""
    return read_regular(path, os.O_NOFOLLOW, limit)
