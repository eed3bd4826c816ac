"""Which free units to hand out: the device plugin's preferred allocation and count requests
(gpuhook.dev/gpus=count:N) on a single host. Pure: no I/O, tested with literals.

A unit is a GPU, or one share of a time-sliced GPU. The pick keeps a container on one NUMA node where the
free units there suffice (the node with the least used GPUs first), and within it spreads over the least used
GPUs, counting what it has already picked, so that shares of one GPU go together only when they must.
"""

from __future__ import annotations

from gpuhook.errors import PlanError
from gpuhook.frozen import frozen, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpuhook.host.inventory import VendorInventory
    from gpuhook.request.container import Selection


@frozen
class Unit:
    """One thing that can be allocated."""

    id: str  # what is handed out: a GPU's id, or a share's
    gpu: str  # the GPU it is (part of)
    numa: int  # its NUMA node; -1 where the host does not say
    order: int  # the GPU's index, for stable ties


def pick(available: Sequence[Unit], size: int, must: Sequence[str] = (),
         in_use: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """`size` unit ids from `available`, the `must` ones first; fewer when fewer are available. `in_use` counts
    the units of each GPU already handed out elsewhere."""
    by_id = {u.id: u for u in available}
    chosen = [by_id[i] for i in dict.fromkeys(must) if i in by_id][:size]
    load = dict(in_use or {})
    for u in chosen:
        load[u.gpu] = load.get(u.gpu, 0) + 1
    rest = [u for u in available if u not in chosen]
    wanted = size - len(chosen)
    if wanted <= 0:
        return tuple(u.id for u in chosen)
    rank = _numa_rank(rest, wanted, chosen, load)
    while len(chosen) < size and rest:
        best = min(rest, key=lambda u: (rank.get(u.numa, len(rank)), load.get(u.gpu, 0), u.order, u.id))
        rest.remove(best)
        chosen.append(best)
        load[best.gpu] = load.get(best.gpu, 0) + 1
    return tuple(u.id for u in chosen)


def _numa_rank(rest: Sequence[Unit], wanted: int, chosen: Sequence[Unit], load: Mapping[str, int]) -> dict[int, int]:
    """NUMA nodes in the order to take from: the one the `must` units are on, then nodes where all the wanted
    units fit (least used first), then the others, the largest first."""
    free: dict[int, list[Unit]] = {}
    for u in rest:
        free.setdefault(u.numa, []).append(u)

    def used(numa: int) -> int:
        return sum(load.get(g, 0) for g in {u.gpu for u in free[numa]})

    home = {u.numa for u in chosen}
    order = sorted(free, key=lambda n: (n not in home, len(free[n]) < wanted, used(n) if len(free[n]) >= wanted
                                        else -len(free[n]), n))
    return {n: i for i, n in enumerate(order)}


def resolve_count(sel: Selection, inv: VendorInventory, label: str, users: Mapping[str, str],
                  numa: Mapping[str, int]) -> Selection:
    """A count:N selection as the N free GPUs it gets (by UUID, else PCI address); PlanError when fewer are free.
    `users` maps a GPU in use to a container using it; `numa` a GPU's PCI address to its NUMA node."""
    free = [g for g in inv.gpus if not g.missing and g.key() not in users]
    units = [Unit(g.key(), g.key(), numa.get(g.pci, -1), g.index) for g in free]
    got = pick(units, sel.count)
    if len(got) < sel.count:
        busy = [f"GPU {g.index} by container {users[g.key()][:12]}" for g in inv.gpus
                if g.key() in users][:4]
        broken = [f"GPU {g.index} lacks {g.missing[0]}" for g in inv.gpus if g.missing][:2]
        why = "; ".join(busy + broken) or "the host has no more"
        raise PlanError(f"{sel.source}={sel.shown!r}: only {len(free)} of this host's {len(inv.gpus)} {label} GPUs "
                        f"are free ({why}): stop a GPU container, ask for fewer, or name GPUs")
    return replace(sel, vendor=inv.vendor, devices=got, count=0)
