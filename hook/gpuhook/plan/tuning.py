"""Tuning requests -> per-GPU settings (each vendor says which), checked against policy. Pure."""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.plan.shared_gpu import SLICE, SLICE_OPEN, Grant, check
from gpuhook.request.knobs import CHOICES, KNOBS, RANGE, SWITCH
from gpuhook.vendors.contract import Setting
from gpuhook.vendors.registry import get
from gpuhook.vendors.registry import tuning as tuning_part

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    from gpuhook.config import TuningPolicy
    from gpuhook.host.inventory import Gpu, Inventory, VendorInventory
    from gpuhook.plan.select import Selected
    from gpuhook.request.knobs import Bound
    from gpuhook.request.tuning import Tuning


def settings_for(tuning: Tuning, selected: Iterable[tuple[VendorInventory, Sequence[Gpu]]],
                 shared_slices: bool = False) -> tuple[Setting, ...]:
    """The host settings that give `selected` GPUs what `tuning` asks, on the physical GPUs (a slice's settings are
    its GPU's); RequestError for the wrong vendor, PolicyError for what a slice whose siblings the container lacks
    does not allow (plan/shared_gpu.py; `shared_slices`: [tuning] shared_slices). Nothing asked of the GPUs: no
    vendor's tuning part is loaded (the GPU path without tuning)."""
    if not tuning.sets_gpu():
        return ()
    out: dict[str, Setting] = {}
    for inv, gpus in selected:
        for gpu in gpus:
            physical = gpu
            if gpu.parent and tuning.sets_gpu():
                physical = _physical(tuning, inv, gpu, gpus, shared_slices)
            for s in tuning_part(inv.vendor).settings(tuning, physical):
                out.setdefault(s.key, s)
    return tuple(out.values())


def _physical(tuning: Tuning, inv: VendorInventory, gpu: Gpu, chosen: Sequence[Gpu], shared_slices: bool) -> Gpu:
    """The GPU a slice's tuning lands on; PolicyError (plan/shared_gpu.py's rule) naming the siblings the container
    does not hold, where they make the GPU shared."""
    lacking = [g for g in inv.siblings(gpu) if g not in chosen]
    if lacking:
        names = ", ".join(g.slice + (f" ({g.uuid})" if g.uuid else "") for g in lacking)
        check(tuning, Grant(SLICE_OPEN if shared_slices else SLICE,
                            f"slice {gpu.slice} of the whole GPU {gpu.index} ({gpu.parent}), whose other slices this "
                            f"container lacks: not {names}",
                            "ask for every slice of the GPU" + ("" if shared_slices else ", or the admin allows "
                                                               "clocks, power, fans and performance level with "
                                                               "[tuning] shared_slices = true")))
    return next((g for g in inv.gpus if not g.parent and (g.uuid or g.pci) == gpu.parent), gpu)


def check_policy(tuning: Tuning, policy: TuningPolicy) -> None:
    """PolicyError saying what the policy allows when the request is outside it: [policy] allow_tuning, then each
    knob's [tuning] bounds (request/knobs.py), in the table's order."""
    if tuning.touches_host() and not policy.allow:
        raise PolicyError("this host does not allow GPU tuning ([policy] allow_tuning = false): remove the "
                          "gpuhook.dev/ tuning annotations")
    for knob in KNOBS:
        asked = tuning.value(knob.key)
        for bound in knob.bounds:
            if asked and asked != bound.free:
                _within(knob.key, asked, bound, getattr(policy, bound.policy))


def _within(key: str, asked: Any, bound: Bound, limit: Any) -> None:
    """PolicyError where `asked` (a knob's value) is outside `limit`, the value of its [tuning] key `bound`."""
    if bound.kind == SWITCH and not limit:
        if bound.free:
            raise PolicyError(f"gpuhook.dev/{key}={asked}: this host does not {bound.denies} ([tuning] "
                              f"{bound.policy} = false): ask gpuhook.dev/{key}={bound.free} or remove it")
        raise PolicyError(f"this host does not {bound.denies} ([tuning] {bound.policy} = false): remove "
                          f"gpuhook.dev/{key}")
    if bound.kind == RANGE and limit:
        lo, hi = asked if isinstance(asked, tuple) else (int(asked), int(asked))
        if not (limit[0] <= lo and hi <= limit[1]):
            shown = f"{lo}-{hi}" if isinstance(asked, tuple) else asked
            raise PolicyError(f"gpuhook.dev/{key}={shown} is outside what this host allows: {limit[0]}-{limit[1]}"
                              f"{bound.unit} ([tuning] {bound.policy})")
    if bound.kind == CHOICES and limit is not None and asked not in limit:
        raise PolicyError(f"gpuhook.dev/{key}={asked!r} is not allowed on this host; allowed: "
                          f"{', '.join(limit) or 'none'} ([tuning] {bound.policy})")


def check_leases(leases: Mapping[str, Any], gpus: Iterable[str],
                 is_me: Callable[[dict[str, Any]], bool] = lambda h: False,
                 way_out: str = "wait for it to stop or pick other GPUs") -> None:
    """PolicyError for the first of `gpus` another container holds exclusively."""
    for gpu in gpus:
        lease = leases.get(gpu)
        if lease and not is_me(lease):
            raise PolicyError(f"GPU {gpu} is held exclusively by container {lease['id']}: {way_out}")


def check_conflicts(state: Mapping[str, Any], settings: Sequence[Setting], exclusive: Sequence[str],
                    is_me: Callable[[dict[str, Any]], bool], other_users: Callable[[str], list[str]]) -> None:
    """PolicyError before anything changes: a GPU leased by another, an exclusive GPU that others use, or a
    different value of a setting another holds. `state` is the ledger's (its holders alive)."""
    check_leases(state["leases"], sorted({s.gpu for s in settings} | set(exclusive)), is_me)
    for gpu in exclusive:
        users = sorted({h["id"] for k, e in state["settings"].items() if e["gpu"] == gpu for h in e["holders"]
                        if not is_me(h)} | set(other_users(gpu)))
        if users:
            raise PolicyError(f"gpuhook.dev/exclusive: GPU {gpu} is in use by container {users[0]}"
                              + (f" and {len(users) - 1} more" if len(users) > 1 else "") + ": wait for it to stop")
    for s in settings:
        entry = state["settings"].get(s.key)
        if entry and entry["holders"] and entry["value"] != s.value:
            holder = entry["holders"][0]["id"]
            raise PolicyError(f"GPU {s.index} ({s.gpu}) has {s.name} {entry['value']} set for container {holder}; "
                              f"this container asks {s.value}: ask for the same value, another GPU, or wait")


def gpus_in_spec(devices: Iterable[Mapping[str, Any]], inventory: Inventory) -> Selected:
    """GPUs whose nodes the spec already has (a device plugin or --device put them there); a GPU's slices (MIG
    devices) in its place where the spec has their nodes."""
    numbers = {(d.get("major"), d.get("minor")) for d in devices}
    out = []
    for inv in inventory.vendors:
        claims = get(inv.vendor).claims
        slices = tuple(s for s in inv.slices if claims(s) and all((n.major, n.minor) in numbers for n in claims(s)))
        held = {s.parent for s in slices}
        gpus = tuple(g for g in inv.gpus if g.key() not in held
                     and any((n.major, n.minor) in numbers for n in claims(g))) + slices
        if gpus:
            out.append((inv, gpus))
    return tuple(out)
