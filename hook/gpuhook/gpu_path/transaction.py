"""The GPU path's one transaction for a container, written once:

    with Transaction(state_dir, container_id, exclusive) as txn:  # the lock (state_dir/count.lock)
        txn.users(), txn.held(), txn.recorded()                   # the records, read under it
        ... decide (plan/prepare.decide, a count's pick), then config.json edited or the container given live
        txn.commit(record, recheck=..., count=...)                # its record, the leases again, the count
    # the lock let go: on every way out of the block, an error's too

The lock is shared by a start and held alone by a count (the records it picks around stay the truth until its
record is on disk) and by a layout change (`partition apply`: no start sees a GPU's devices while they change,
and one that started before it is its user). The shim (inject._edited), a container with GPU nodes but no request
(inject.register_device_container) and the prestart hook (hook_stages._give) run it; the hook that follows the
shim's plan (hook_stages._follow) commits without the lock, as it always did: the shim held it over that plan.
"""

from __future__ import annotations

import os

from gpuhook.apply import containers
from gpuhook.apply.state_dir import Lock, ensure

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

WAY_OUT = "wait for it to stop or pick other GPUs"  # what a refusal on another container's lease says to do


class Transaction:
    """One container's start on the GPU path, from the lock to its record (see the module's docstring)."""

    __slots__ = ("_lock", "container_id", "state_dir")

    def __init__(self, state_dir: str, container_id: str, exclusive: bool = False, locked: bool = True) -> None:
        self.state_dir = state_dir
        self.container_id = container_id
        self._lock = Lock(state_dir, exclusive) if locked else None

    def __enter__(self) -> Transaction:
        """Wait for the GPU path's lock (shared, or `exclusive`), unless not `locked`. Opens and locks a file."""
        if self._lock is not None:
            self._lock.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        """Let the next start, count pick or layout change go on. Closes the lock's file."""
        if self._lock is not None:
            self._lock.__exit__(*exc)

    def users(self) -> tuple[tuple[str, str], ...]:
        """(GPU, container) of the live GPU containers recorded, but this one: what a count picks around and an
        exclusive request is refused on. Reads the records."""
        return tuple((gpu, r.id) for r in containers.live_records(self.state_dir, prune=False) for gpu in r.gpus
                     if r.id != self.container_id)

    def held(self) -> tuple[str, ...] | None:
        """The GPUs a live record of this container holds (the shim's, when the hook runs after it: a count
        resolved there is not picked again); None without one, or without a container id. Reads its records."""
        return containers.gpus_of(self.state_dir, self.container_id) if self.container_id else None

    def recorded(self) -> bool:
        """Whether this container has a live record already (the shim's, which counted it). Reads its records."""
        return containers.recorded(self.state_dir, self.container_id)

    def commit(self, record: containers.ContainerRecord, *, recheck: bool = True,
               count: tuple[tuple[str, str], ...] = (), way_out: str = WAY_OUT) -> None:
        """This container's record written, first: an exclusive request from now on sees it. Then, with `recheck`,
        the leases once more: an exclusive holder that took its lease meanwhile did not see the record, so this
        container sees the lease (its record removed, PolicyError naming `way_out`). Then one more container
        prepared for each vendor of `count` ((vendor, driver) pairs: the exporter's counter). Writes the record
        and the counters."""
        containers.save(self.state_dir, record)
        if recheck:
            from gpuhook.errors import PolicyError
            from gpuhook.plan.tuning import check_leases

            try:
                check_leases((ledger_view(self.state_dir) or {}).get("leases", {}), record.gpus, way_out=way_out)
            except PolicyError:
                containers.remove(self.state_dir, record)
                raise
        if count:
            from gpuhook.apply import counters

            for vendor in dict.fromkeys(v for v, _ in count):
                counters.bump(self.state_dir, counters.PREPARED, vendor)


def ledger_view(state_dir: str) -> dict[str, Any] | None:
    """The ledger as it is now, read without its lock and with only live holders: what the GPU path refuses on
    before it edits anything, and the leases a commit checks again. None without a ledger (then not even the
    ledger module is loaded); a corrupt one is reported by the prestart hook, where it matters. Reads files."""
    if not os.path.exists(os.path.join(state_dir, "ledger.json")):
        return None
    from gpuhook.errors import LedgerError
    from gpuhook.host.processes import holder_alive
    from gpuhook.tuning import ledger

    try:
        state = ledger.load(os.path.join(ensure(state_dir), ledger.NAME))
    except LedgerError:
        return None
    settings = {k: {**e, "holders": [h for h in e["holders"] if holder_alive(h)]} for k, e in state["settings"].items()}
    return {"settings": settings, "leases": {g: h for g, h in state["leases"].items() if h and holder_alive(h)}}
