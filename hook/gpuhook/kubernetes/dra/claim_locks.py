"""One lock per DRA claim, so that the kubelet's calls on one claim (NodePrepareResources and
NodeUnprepareResources, which the gRPC pool runs at once) take turns, while calls on different claims do not wait
for each other. The table holds a claim's entry only while a call holds or waits for its lock: it never grows
with the claims a node has seen.

In kubernetes-sigs/dra-example-driver: the per-claim serialisation its kubeletplugin helper gives Prepare and Unprepare.
"""

from __future__ import annotations

import contextlib
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


class ClaimLocks:
    """Locks keyed by claim uid, made on first use and dropped when the last caller lets go."""

    def __init__(self) -> None:
        self._table_lock = threading.Lock()
        self._table: dict[str, tuple[threading.Lock, int]] = {}  # uid -> (its lock, callers holding or waiting)

    @contextlib.contextmanager
    def hold(self, uid: str) -> Iterator[None]:
        """The claim's lock held for the block; blocks while another call holds it."""
        with self._table_lock:
            lock, users = self._table.get(uid, (None, 0))
            if lock is None:
                lock = threading.Lock()
            self._table[uid] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._table_lock:
                _, users = self._table[uid]
                if users == 1:
                    del self._table[uid]
                else:
                    self._table[uid] = (lock, users - 1)

    def __len__(self) -> int:
        """How many claims have a call holding or waiting for their lock now."""
        with self._table_lock:
            return len(self._table)
