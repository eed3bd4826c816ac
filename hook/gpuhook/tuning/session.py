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
from gpuhook.tuning import ledger
from gpuhook.vendors.contract import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from gpuhook.tuning.backends import BackendSet
    from gpuhook.vendors.contract import Backend


@frozen
class Holder:
    """A container holding settings or a lease."""

    id: str
    pid: int  # its init, or (with `root`) the process that execs runc for it
    start: str
    root: str = ""  # runc's state directory: a holder the shim recorded before runc made the container (join)

    def as_dict(self) -> dict[str, Any]:
        """For the ledger."""
        return {"id": self.id, "pid": self.pid, "start": self.start, **({"root": self.root} if self.root else {})}

    def same(self, h: dict[str, Any]) -> bool:
        """Whether a ledger holder is this container: its id and its init (pid and start time). The same id
        under two runtime roots (two engines on one host) is two containers."""
        return _identity(h) == (self.id, self.pid, self.start)


if TYPE_CHECKING:
    Backends = Callable[[str], Backend]  # vendor -> its backend, made on first use



def acquire(state_dir: str, me: Holder, settings: Sequence[Setting], exclusive: Sequence[str], backends: BackendSet,
            other_users: Callable[[str], list[str]] = lambda gpu: [], used: Sequence[str] = ()) -> None:
    """Take `exclusive` leases (GPU names) and apply `settings` for container `me`; all or nothing. `used`: the GPUs
    its record holds, refused here where another container leases one (the check a record's commit makes, made under
    the ledger's lock instead). The ledger is read and written once (every original and lease on disk before the
    host changes, at most once more to roll back); a setting another container holds is joined with no backend
    made; a value asked is checked last through `backends` (which remembers what a GPU took)."""
    from gpuhook.plan.tuning import check_leases  # (start-up cost: a poststop's release needs none of plan/)

    with ledger.locked(state_dir) as state:
        _sweep(state_dir, state, backends)
        check_leases(state["leases"], used, me.same)
        _check(state, me, settings, exclusive, other_users)
        fresh: list[Setting] = []  # what this container is the first to hold: it applies them
        made: list[str] = []  # of those, the entries it made (the others held an original left by a failed restore)
        tried: list[str] = []  # of those, the ones written (or being written: a write failing half-way is restored)
        try:
            for s in settings:
                entry = state["settings"].get(s.key)
                if entry and entry["holders"]:
                    if not any(me.same(h) for h in entry["holders"]):
                        entry["holders"].append(me.as_dict())
                    continue
                original = entry["original"] if entry else backends(s.vendor).get(s)
                state["seq"] += 1
                state["settings"][s.key] = {"vendor": s.vendor, "gpu": s.gpu, "index": s.index, "pci": s.pci,
                                            "device": s.device, "name": s.name, "original": original,
                                            "value": s.value, "holders": [me.as_dict()], "seq": state["seq"]}
                fresh.append(s)
                if entry is None:
                    made.append(s.key)
            for gpu in exclusive:
                state["leases"][gpu] = me.as_dict()
            ledger.save(state_dir, state)  # every original and lease on disk before the host changes
            for gpu in exclusive:  # the lease is on disk: a container that registers from now on sees it, and one
                users = [u for u in other_users(gpu) if u != me.id]  # that registered meanwhile is seen here
                if users:
                    raise PolicyError(f"gpuhook.dev/exclusive: GPU {gpu} is in use by container {users[0]}: "
                                      "wait for it to stop")
            for s in fresh:
                if state["settings"][s.key]["original"] == s.value:  # STYLE rule 4: no write that changes nothing
                    continue
                backends.check(s)  # the last guard, right before the write (what the GPU took is remembered)
                tried.append(s.key)
                backends(s.vendor).set(s, s.value)
        except PolicyError:
            _undo(state, me, made, tried, backends)
            ledger.save(state_dir, state)
            raise
        except (TuningError, OSError) as e:
            problems = _undo(state, me, made, tried, backends)
            ledger.save(state_dir, state)
            extra = f" (and restoring failed: {'; '.join(problems)})" if problems else ""
            raise TuningError(f"{e}; what this container had applied was rolled back{extra}") from e


def _undo(state: ledger.State, me: Holder, made: Sequence[str], tried: Sequence[str],
          backends: BackendSet) -> list[str]:
    """Roll an acquire back: the entries it made and never wrote dropped (no host write), the ones it wrote
    restored newest first, `me` out of the entries it joined, its leases let go; the problems."""
    for key in made:
        if key not in tried:
            del state["settings"][key]
    return _release_holder(state, (me.id, me.pid, me.start), backends)


def join(state_dir: str, me: Holder, settings: Sequence[Setting], bundle: str = "") -> bool:
    """Record `me` (and its `bundle`, by which its poststop knows it: release) as a holder of `settings` where each is
    held already, at exactly its value, by a live container, and no live lease holds its GPU: True, the ledger
    written once and the host untouched (nothing to apply: the shim then gives the container no prestart hook to
    tune); else False, nothing written. Reads (and writes) the ledger under its lock."""
    if not settings:
        return False
    with ledger.locked(state_dir) as state:
        for s in settings:
            entry = state["settings"].get(s.key)
            lease = state["leases"].get(s.gpu)
            if not entry or entry["value"] != s.value or not any(holder_alive(h) for h in entry["holders"]) \
                    or (lease and holder_alive(lease)):
                return False
        for s in settings:
            holders = state["settings"][s.key]["holders"]
            if not any(me.same(h) for h in holders):
                holders.append({**me.as_dict(), **({"bundle": bundle} if bundle else {})})
        ledger.save(state_dir, state)
        return True


def release(state_dir: str, holder_id: str, backends: Backends, only_gone: bool = False, bundle: str = "") -> list[str]:
    """Drop the holdings and leases of container `holder_id` (with `only_gone`, those of its holders that have ended:
    poststop's, which must not release another engine's container of the same id; one the shim joined with this
    `bundle` has ended once runc's state of it is gone, even while the `runc run` that made it still runs the
    poststop hooks), restoring what nobody else holds, and with them those of holders found gone (a container runc
    never made after the shim joined it must not keep a setting applied); the problems, if any. The ledger is
    written only where it changed."""
    def ended(h: dict[str, Any]) -> bool:
        if bundle and h.get("bundle") == bundle and isinstance(h.get("root"), str):
            return not holder_alive({"id": h["id"], "root": h["root"]})  # runc's state alone, not its process
        return not holder_alive(h)

    with ledger.locked(state_dir) as state:
        before = ledger.render(state)
        problems = []
        gone = sorted({_identity(h) for h in _holders(state) if h["id"] == holder_id and (not only_gone or ended(h))})
        for who in gone:
            problems += _release_holder(state, who, backends)
        if gone:
            problems += _sweep(state_dir, state, backends)
        if ledger.render(state) != before:
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
    from gpuhook.plan.tuning import check_conflicts

    check_conflicts(state, settings, exclusive, me.same, lambda gpu: [u for u in other_users(gpu) if u != me.id])


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

