"""One scrape's reads: the runtime's own discovery, telemetry, and gpuhook's state (container records, the tuning
ledger, counters). Reads only: state_dir is never created, records of gone containers are left for the runtime
and gc, and the ledger is read without its lock (it is replaced atomically and never missing while it exists),
so a scrape never waits on, or delays, a container's start."""

from __future__ import annotations

import os

from gpuhook.apply import containers, counters
from gpuhook.apply.state_dir import check
from gpuhook.errors import LedgerError, StateError
from gpuhook.host.processes import holder_alive
from gpuhook.metrics.families import TuningRow, View
from gpuhook.tuning import ledger
from gpuhook.vendors.discover import discover

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuhook.host.inventory import Gpu
    from gpuhook.host.root import Root
    from gpuhook.metrics.telemetry import Sessions


def gather(root: Root, state_dir: str, sessions: Sessions | None, known: Sequence[Gpu] = (),
           node_root: str = "/") -> View:
    """What the host and state_dir say now (telemetry through `sessions`, when given; `node_root`: where the
    node's / is, for an exporter in a container of its own). Reads the host, the drivers and state_dir."""
    inventory = discover(root)
    readings = tuple(sessions.read(inventory).items()) if sessions is not None else None
    if not os.path.isdir(state_dir):  # no GPU container was ever prepared here: nothing to read
        return View(inventory=inventory, known=tuple(known), readings=readings)
    try:
        check(state_dir)  # trusted only while it is root's alone: checked at every scrape, never made
    except StateError:
        return View(inventory=inventory, known=tuple(known), readings=readings, ledger_ok=False)
    records = tuple(containers.live_records(state_dir, prune=False, node_root=node_root))
    totals = tuple(counters.totals(state_dir).items())
    try:
        settings, leases = _ledger(state_dir)
    except LedgerError:
        return View(inventory=inventory, known=tuple(known), readings=readings, records=records, counters=totals,
                    ledger_ok=False)
    return View(inventory=inventory, known=tuple(known), readings=readings, records=records, settings=settings,
                leases=leases, counters=totals)


def _ledger(state_dir: str) -> tuple[tuple[TuningRow, ...], tuple[tuple[str, str], ...]]:
    """The ledger's settings (with their live holders counted) and its live leases; LedgerError when it is
    corrupt."""
    path = os.path.join(state_dir, ledger.NAME)
    state = ledger.load(path)  # no lock: see the module's docstring
    try:
        rows = tuple(TuningRow(vendor=str(e["vendor"]), gpu=str(e["gpu"]), setting=str(e["name"]),
                               current=str(e["value"]), original=str(e["original"]),
                               holders=sum(1 for h in e["holders"] if _alive(h)))
                     for _, e in sorted(state["settings"].items()))
        leases = tuple((str(gpu), str(h["id"])) for gpu, h in sorted(state["leases"].items()) if _alive(h))
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise LedgerError(f"the tuning ledger {path} has an entry gpuhook cannot read ({e!r})") from e
    return rows, leases


def _alive(holder: Any) -> bool:
    return isinstance(holder, dict) and holder_alive(holder)
