"""The warm helper's pool of long-lived workers, as the daemon keeps count of it: which workers wait for a call and
which hold one, when to fork another, and which waiting worker to ask to go. Pure bookkeeping (the daemon, in
cli/warm.py, forks, reads the workers' messages and tells them to go); times are the caller's clock.

Steady state forks nothing: a worker answers its call and waits for the next. `spares` workers wait; when none
waits (every one holds a call) the daemon forks at once, and when fewer than `spares` wait for longer than `grace`
(the busy ones did not come back) it forks up to `spares` waiting, never beyond `most` in all. Waiting workers
beyond `spares`, left from a burst, go after `linger` seconds, one at a time. A worker is never killed to be
retired: the daemon asks it, and a worker that has taken a call meanwhile finishes it first (cli/warm.py)."""

from __future__ import annotations

SPARES = 2  # workers waiting for a call: two containers may start at once without waiting for a fork
MOST = 8  # workers in all, waiting or busy
GRACE = 1.0  # seconds fewer than SPARES may wait before another is forked (a call takes a few milliseconds)
LINGER = 5.0  # seconds a waiting worker beyond SPARES stays, for the next burst


class Pool:
    """The workers by pid: waiting (since when) or busy, and how many calls each took."""

    def __init__(self, spares: int = SPARES, most: int = MOST, grace: float = GRACE, linger: float = LINGER) -> None:
        self.spares, self.most, self.grace, self.linger = spares, max(most, spares, 1), grace, linger
        self.waiting: dict[int, float] = {}  # pid -> since when
        self.busy: set[int] = set()
        self.leaving: set[int] = set()  # asked to go; they exit once they see it (after a call they hold)
        self.calls: dict[int, int] = {}
        self.short_since: float | None = None  # when fewer than `spares` began to wait
        self.recent: list[float] = []  # when the forks of the last second were made

    def __len__(self) -> int:
        return len(self.waiting) + len(self.busy) + len(self.leaving)

    def forked(self, pid: int, now: float) -> None:
        """A new worker, waiting."""
        self.recent.append(now)
        self.waiting[pid] = now
        self.calls[pid] = 0
        self._count(now)

    def took(self, pid: int, now: float) -> None:
        """`pid` took a call."""
        if pid in self.leaving or pid not in self.calls:
            return
        self.waiting.pop(pid, None)
        self.busy.add(pid)
        self.calls[pid] += 1
        self._count(now)

    def back(self, pid: int, now: float) -> None:
        """`pid` answered its call and waits again."""
        if pid in self.leaving or pid not in self.calls:
            return
        self.busy.discard(pid)
        self.waiting[pid] = now
        self._count(now)

    def gone(self, pid: int, now: float) -> None:
        """`pid` exited (or its channel closed)."""
        self.waiting.pop(pid, None)
        self.busy.discard(pid)
        self.leaving.discard(pid)
        self.calls.pop(pid, None)
        self._count(now)

    def to_fork(self, now: float) -> int:
        """How many workers to fork now: never more than `most` in a second (workers that die as they start
        are not forked again and again)."""
        self.recent = [t for t in self.recent if now - t < 1.0]
        short = min(self.spares - len(self.waiting), self.most - len(self.recent))
        if short <= 0:
            return 0
        if self.waiting and (self.short_since is None or now - self.short_since < self.grace):
            return 0
        return max(0, min(short, self.most - len(self)))

    def to_retire(self, now: float) -> int | None:
        """A waiting worker to ask to go, or None; it counts as leaving. The one that served the fewest calls goes
        (the newest of them): those that served more have their pages copied and their code specialised."""
        if len(self.waiting) <= self.spares:
            return None
        lingering = [pid for pid, since in self.waiting.items() if now - since >= self.linger]
        if not lingering:
            return None
        pid = min(lingering, key=lambda p: (self.calls[p], -p))
        del self.waiting[pid]
        self.leaving.add(pid)
        return pid

    def wake(self, now: float) -> float:
        """Seconds until the pool's next decision is due (at most 1)."""
        due = [1.0]
        if self.short_since is not None and self.waiting:
            due.append(self.short_since + self.grace - now)
        if len(self.waiting) > self.spares:
            due.append(min(self.waiting.values()) + self.linger - now)
        return max(0.0, min(due))

    def _count(self, now: float) -> None:
        if len(self.waiting) >= self.spares:
            self.short_since = None
        elif self.short_since is None:
            self.short_since = now
