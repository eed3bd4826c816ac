"""Apply and restore host tuning for containers, through the ledger and the vendor backends.

The first holder of a setting records the original and applies; a later container asking the same value
joins; a different value on a held GPU is refused before anything changes; the last holder leaving
restores. A failure half-way rolls back what this container applied. Holders are identified by their init
process and its start time, so a container that died (or whose runtime lost its state) is recognised.
"""

from __future__ import annotations

from gpuhook.errors import PolicyError, TuningError
from gpuhook.frozen import frozen
from gpuhook.host.processes import holder_alive
from gpuhook.plan.tuning import check_conflicts
from gpuhook.tuning import ledger
from gpuhook.vendors.contract import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from gpuhook.vendors.contract import Backend


@frozen
class Holder:
    """A container holding settings or a lease."""

    id: str
    pid: int
    start: str

    def as_dict(self) -> dict[str, Any]:
        """For the ledger."""
        return {"id": self.id, "pid": self.pid, "start": self.start}

    def same(self, h: dict[str, Any]) -> bool:
        """Whether a ledger holder is this container: its id and its init (pid and start time). The same id
        under two runtime roots (two engines on one host) is two containers."""
        return _identity(h) == (self.id, self.pid, self.start)


if TYPE_CHECKING:
    Backends = Callable[[str], Backend]  # vendor -> its backend, made on first use



def acquire(state_dir: str, me: Holder, settings: Sequence[Setting], exclusive: Sequence[str], backends: Backends,
            other_users: Callable[[str], list[str]] = lambda gpu: []) -> None:
    """Take `exclusive` leases (GPU names) and apply `settings` for container `me`; all or nothing."""
    with ledger.locked(state_dir) as state:
        _sweep(state_dir, state, backends)
        _check(state, me, settings, exclusive, other_users)
        done: list[str] = []
        try:
            for s in settings:
                done.append(s.key)  # before applying: a setting that fails half-way is rolled back too
                _apply(state_dir, state, me, s, backends)
            for gpu in exclusive:
                state["leases"][gpu] = me.as_dict()
            ledger.save(state_dir, state)
            for gpu in exclusive:  # the lease is on disk: a container that registers from now on sees it, and one
                users = [u for u in other_users(gpu) if u != me.id]  # that registered meanwhile is seen here
                if users:
                    raise PolicyError(f"gpuhook.dev/exclusive: GPU {gpu} is in use by container {users[0]}: "
                                      "wait for it to stop")
        except PolicyError:
            _release_holder(state, (me.id, me.pid, me.start), backends)
            ledger.save(state_dir, state)
            raise
        except (TuningError, OSError) as e:
            problems = _release_keys(state, me.same, reversed(done), backends)
            ledger.save(state_dir, state)
            extra = f" (and restoring failed: {'; '.join(problems)})" if problems else ""
            raise TuningError(f"{e}; what this container had applied was rolled back{extra}") from e


def release(state_dir: str, holder_id: str, backends: Backends, only_gone: bool = False) -> list[str]:
    """Drop the holdings and leases of container `holder_id` (with `only_gone`, those of its holders whose init
    has ended: poststop's, which must not release another engine's container of the same id), restoring what
    nobody else holds; the problems, if any."""
    with ledger.locked(state_dir) as state:
        problems = []
        for who in sorted({_identity(h) for h in _holders(state) if h["id"] == holder_id
                           and not (only_gone and holder_alive(h))}):
            problems += _release_holder(state, who, backends)
        ledger.save(state_dir, state)
        return problems


def sweep(state_dir: str, backends: Backends) -> list[str]:
    """Release every holder whose container is gone and retry restores that failed; the problems."""
    with ledger.locked(state_dir) as state:
        problems = _sweep(state_dir, state, backends)
        ledger.save(state_dir, state)
        return problems


def _sweep(state_dir: str, state: ledger.State, backends: Backends) -> list[str]:
    dead = {_identity(h) for h in _holders(state) if not holder_alive(h)}
    problems: list[str] = []
    for who in sorted(dead):
        problems += _release_holder(state, who, backends)
    orphans = [k for k, e in state["settings"].items() if not e["holders"]]  # a restore that failed before
    problems += _release_keys(state, lambda h: False, orphans, backends)
    return problems


def _holders(state: ledger.State) -> list[dict[str, Any]]:
    return [h for e in state["settings"].values() for h in e["holders"]] + list(state["leases"].values())


def _identity(h: dict[str, Any]) -> tuple[str, int, str]:
    return str(h.get("id", "")), int(h.get("pid") or 0), str(h.get("start") or "")


def _release_holder(state: ledger.State, who: tuple[str, int, str], backends: Backends) -> list[str]:
    """Drop one holder's settings (newest first, restoring what nobody else holds) and its leases."""
    def match(h: dict[str, Any]) -> bool:
        return _identity(h) == who

    keys = sorted((k for k, e in state["settings"].items() if any(match(h) for h in e["holders"])),
                  key=lambda k: state["settings"][k]["seq"], reverse=True)
    problems = _release_keys(state, match, keys, backends)
    for gpu in [g for g, h in state["leases"].items() if match(h)]:
        del state["leases"][gpu]
    return problems


def _check(state: ledger.State, me: Holder, settings: Sequence[Setting], exclusive: Sequence[str],
           other_users: Callable[[str], list[str]]) -> None:
    """Refuse before anything changes (the same check the shim makes read-only, before it edits the spec)."""
    check_conflicts(state, settings, exclusive, me.same, lambda gpu: [u for u in other_users(gpu) if u != me.id])


def _apply(state_dir: str, state: ledger.State, me: Holder, s: Setting, backends: Backends) -> None:
    entry = state["settings"].get(s.key)
    if entry and entry["holders"]:
        if not any(me.same(h) for h in entry["holders"]):
            entry["holders"].append(me.as_dict())
            ledger.save(state_dir, state)
        return
    backend = backends(s.vendor)
    original = entry["original"] if entry else backend.get(s)
    state["seq"] += 1
    state["settings"][s.key] = {"vendor": s.vendor, "gpu": s.gpu, "index": s.index, "pci": s.pci,
                                "device": s.device, "name": s.name, "original": original, "value": s.value,
                                "holders": [me.as_dict()], "seq": state["seq"]}
    ledger.save(state_dir, state)  # the original is on disk before the host changes
    if original != s.value:
        backend.set(s, s.value)


def _release_keys(state: ledger.State, match: Callable[[dict[str, Any]], bool], keys: Any,
                  backends: Backends) -> list[str]:
    problems = []
    for key in list(keys):
        entry = state["settings"].get(key)
        if entry is None:
            continue
        entry["holders"] = [h for h in entry["holders"] if not match(h)]
        if entry["holders"]:
            continue
        s = Setting(vendor=entry["vendor"], gpu=entry["gpu"], index=entry["index"], pci=entry["pci"],
                    device=entry["device"], name=entry["name"],
                    value=entry["value"])
        try:
            if entry["original"] != entry["value"]:
                backends(s.vendor).set(s, entry["original"])
            del state["settings"][key]
        except (TuningError, OSError) as e:
            problems.append(f"restoring {s.name} of GPU {s.gpu} to {entry['original']}: {e}")
    return problems

