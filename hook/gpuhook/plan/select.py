"""Request x inventory -> the GPUs it names -> Edits. Pure: no I/O, tested with literals."""

from __future__ import annotations

from gpuhook.edits import Edits, merge
from gpuhook.errors import PlanError
from gpuhook.host.inventory import Gpu, Inventory, VendorInventory
from gpuhook.request.container import Request, Selection
from gpuhook.request.docker_flag import SOURCE as FLAG_SOURCE
from gpuhook.vendors.registry import Vendor, all_vendors

Selected = tuple[tuple[VendorInventory, tuple[Gpu, ...]], ...]


def plan_edits(request: Request, inventory: Inventory) -> Edits:
    """The edits that give the container exactly what it asked for; PlanError names what is missing."""
    return edits_for(select_all(request, inventory), request, inventory)


def select_all(request: Request, inventory: Inventory) -> Selected:
    """Each selection's vendor inventory and GPUs, in request order."""
    by_name = {v.NAME: v for v in all_vendors()}
    return tuple(select(sel, inventory, by_name) for sel in request.selections)


def edits_for(selected: Selected, request: Request, inventory: Inventory) -> Edits:
    """The edits for already selected GPUs."""
    by_name = {v.NAME: v for v in all_vendors()}
    return merge([by_name[inv.vendor].plan(inv, gpus, request.capabilities, inventory.root) for inv, gpus in selected])


def select(sel: Selection, inventory: Inventory, vendors: dict[str, Vendor]) -> tuple[VendorInventory, tuple[Gpu, ...]]:
    """The vendor and the GPUs one selection names, in the order asked; PlanError when they do not exist."""
    inv = vendor_for(sel, inventory, vendors)
    if sel.devices is None:
        gpus: tuple[Gpu, ...] = (*inv.gpus, *inv.slices)  # as NVIDIA's toolkit: all GPUs and all MIG devices
        if not gpus:
            raise PlanError(f"{sel.source}={sel.shown!r} asks for all {_label(inv, vendors)} GPUs but the "
                            f"{_label(inv, vendors)} driver on this host lists none")
    else:
        _count_fits(sel, inv, vendors)
        gpus = tuple(dict.fromkeys(_find(ident, sel, inv, vendors) for ident in sel.devices))
    for gpu in gpus:
        if gpu.missing:
            raise PlanError(f"{sel.source}={sel.shown!r}: {_label(inv, vendors)} GPU {gpu.index} ({gpu.pci}) "
                            f"has no device node {gpu.missing[0]} on this host: load the driver's device "
                            "nodes (nvidia-modprobe / udev) or pick another GPU")
    return inv, gpus


def vendor_for(sel: Selection, inventory: Inventory, vendors: dict[str, Vendor]) -> VendorInventory:
    if sel.vendor is not None:
        inv = inventory.vendor(sel.vendor)
        others = [v for v in inventory.with_gpus() if v.vendor != sel.vendor]
        if sel.any_vendor and (inv is None or not inv.gpus) and len(others) == 1:
            return others[0]  # Docker's --gpus on a host whose GPUs are all another vendor's ([policy] gpus_any_vendor)
        if inv is None:
            hint = ("; [policy] gpus_any_vendor = true lets --gpus give them" if sel.source == FLAG_SOURCE and others
                    else "")
            raise PlanError(f"{sel.source}={sel.shown!r} asks for {vendors[sel.vendor].LABEL} GPUs but "
                            f"{_host_has(inventory, vendors)}{hint}")
        return inv
    ids = sel.devices or ()
    # identifiers in one vendor's own form (its UUIDs) name that vendor; a form two share (KFD unique ids: AMD's and
    # Hygon's) names the one whose GPUs have them, else the one present
    forms = [v for v in vendors.values() if ids and all(v.parse_id(i) is not None for i in ids)]
    if len(forms) > 1:
        forms = [v for v in forms if _has_ids(inventory.vendor(v.NAME), ids)] or \
            [v for v in forms if inventory.vendor(v.NAME)] or forms
    if forms:
        return vendor_for(Selection(vendor=forms[0].NAME, devices=sel.devices, source=sel.source, raw=sel.raw),
                          inventory, vendors)
    if ids and all(":" in i for i in ids):
        owners = {v.vendor for v in inventory.vendors for g in v.gpus if g.pci in ids}
        if len(owners) == 1:
            return vendor_for(Selection(vendor=owners.pop(), devices=sel.devices, source=sel.source, raw=sel.raw),
                              inventory, vendors)
    candidates = inventory.with_gpus()
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise PlanError(f"{sel.source}={sel.shown!r} asks for GPUs but {_host_has(inventory, vendors)}")
    names = " and ".join(f"{_label(v, vendors)} ({len(v.gpus)} GPUs)" for v in candidates)
    raise PlanError(f"{sel.source}={sel.shown!r} is ambiguous: this host has {names}; add "
                    + " or ".join(f"gpuhook.dev/vendor={v.vendor}" for v in candidates))


def _has_ids(inv: VendorInventory | None, ids: tuple[str, ...]) -> bool:
    return inv is not None and all(any(i.lower() == g.uuid.lower() for g in inv.gpus) for i in ids)


def _find(ident: str, sel: Selection, inv: VendorInventory, vendors: dict[str, Vendor]) -> Gpu:
    for gpu in inv.gpus:  # an AMD partition also by the key an allocation record holds
        if ident.lower() in (str(gpu.index), gpu.uuid.lower(), gpu.pci) or (gpu.parent and ident == gpu.key()):
            return gpu
    for gpu in inv.slices:  # by index form, UUID, or the key an allocation record holds
        if ident.lower() in (gpu.slice, gpu.uuid.lower(), gpu.key().lower()):
            return gpu
    have = ", ".join(f"{g.index} ({g.uuid or g.pci})" for g in inv.gpus) or "none"
    if inv.slices:
        have += "; slices " + ", ".join(f"{g.slice}" + (f" ({g.uuid})" if g.uuid else "") for g in inv.slices)
    count = f" ({len(inv.gpus)} {_label(inv, vendors)} GPUs)" if ident.isdigit() else ""
    raise PlanError(f"{sel.source}={sel.shown!r}: no {_label(inv, vendors)} GPU {ident} on this host{count}; "
                    f"it has: {have}")


def _count_fits(sel: Selection, inv: VendorInventory, vendors: dict[str, Vendor]) -> None:
    """dockerd turns `--gpus N` into the first N indices: more than the host has is a count too large, said so."""
    n = len(sel.devices or ())
    if sel.source != FLAG_SOURCE or n <= len(inv.gpus) or list(sel.devices or ()) != [str(i) for i in range(n)]:
        return
    have = ", ".join(f"{g.index} ({g.uuid or g.pci})" for g in inv.gpus) or "none"
    raise PlanError(f"{sel.source} {n} (or device={sel.shown}) asks for {n} {_label(inv, vendors)} GPUs but this "
                    f"host has {len(inv.gpus)}: {have}; ask for at most {len(inv.gpus)}, or --gpus all")


def _label(inv: VendorInventory, vendors: dict[str, Vendor]) -> str:
    return vendors[inv.vendor].LABEL


def _host_has(inventory: Inventory, vendors: dict[str, Vendor]) -> str:
    if not inventory.vendors:
        return (f"the host (root {inventory.root}) has no GPU driver loaded: no /proc/driver/nvidia, "
                "no /sys/class/kfd")
    parts = [f"{len(v.gpus)} {vendors[v.vendor].LABEL} GPUs" for v in inventory.vendors]
    return "the host has " + " and ".join(parts)
