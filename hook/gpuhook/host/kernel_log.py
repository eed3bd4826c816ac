"""The kernel log as the host's /dev/kmsg gives it, read as it grows: where NVIDIA's driver logs XIDs
(`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.`). Opened at the end, as NVML's event sets
start at registration, so that what the log held before is history; a log that appears, or is replaced, later (a
simulated host's, a regular file) is read from its start. Reads /dev/kmsg.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.host.root import Root

PATH = "/dev/kmsg"
_RECORD = 8192  # /dev/kmsg returns one record per read, and refuses a buffer smaller than the record
_LIMIT = 1 << 20  # at most this much read per call: a flood waits for the next
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})[^)]*\): (\d+)")


class KernelLog:
    """The log's new records since the last call. Where it cannot be read (no /dev/kmsg in the container, not
    allowed), `error` says why and every call returns nothing."""

    def __init__(self, root: Root) -> None:
        self._root = root
        self._fd = -1
        self._ident: tuple[int, int] | None = None
        self._first = True
        self._partial = b""
        self.error = ""

    def read(self) -> list[str]:
        """The messages (after each record's `prio,seq,time,flags;` header) logged since the last call."""
        self._reopen()
        if self._fd < 0:
            return []
        out: list[bytes] = []
        got = 0
        while got < _LIMIT:
            try:
                chunk = os.read(self._fd, _RECORD)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:  # records overwritten before they were read: go on from the next
                    continue
                self.error = f"{PATH}: {e.strerror}"
                self.close()
                break
            if not chunk:
                break
            got += len(chunk)
            lines = (self._partial + chunk).split(b"\n")
            self._partial = lines.pop()
            out += lines
        return [m for m in (_message(line) for line in out) if m]

    def close(self) -> None:
        """Let the log go (the next read opens it again)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self._ident, self._partial = -1, None, b""

    def _reopen(self) -> None:
        """Open the log where it is not open, or was replaced since (another file at the path)."""
        try:
            path = self._root.resolve(PATH)
            st = os.stat(path)
        except (OSError, ValueError) as e:
            self.close()
            self._first = False  # a log that appears later is read whole
            self.error = f"{PATH}: {getattr(e, 'strerror', None) or e}"
            return
        if self._fd >= 0 and (st.st_dev, st.st_ino) == self._ident:
            return
        self.close()
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            if self._first:
                os.lseek(self._fd, 0, os.SEEK_END)
        except OSError as e:
            self.close()
            self.error = f"{PATH}: {e.strerror}"
            return
        self._first, self._ident, self.error = False, (st.st_dev, st.st_ino), ""


def xid(message: str) -> tuple[str, int] | None:
    """(the GPU's PCI address without its function, lower case: 0000:3b:00; the XID) of an NVIDIA XID message,
    None for any other message."""
    found = _XID.search(message)
    return (found.group(1).lower(), int(found.group(2))) if found else None


def _message(line: bytes) -> str:
    """A record's message: the text after its header; "" for the lines that continue a record (" KEY=value")."""
    if not line or line[:1] == b" ":
        return ""
    text = line.decode("utf-8", "replace")
    head, sep, message = text.partition(";")
    return message if sep and "," in head else text
