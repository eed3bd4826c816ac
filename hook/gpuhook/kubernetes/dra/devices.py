"""What gpuhook's DRA driver publishes in its node's ResourceSlices: each vendor's devices (vendors/<v>/dra.py)
as resource.k8s.io/v1 devices, from the same discovery the runtime uses.

Attributes, per device:
- gpuhook's own, bare (so `device.attributes["gpu.gpuhook.dev"]`): `type` (gpu, mig, partition), `vendor`
  (nvidia, amd), `index` (as gpuhook and the vendors' env count it), and the vendor's facts under the vendor DRA
  driver's names (uuid, productName, architecture, driverVersion, profile, parentUUID, ...);
- the same facts again under the vendor's own driver's domain (gpu.nvidia.com, gpu.amd.com), with its `type`
  values: a claim's CEL written for that driver reads ours unchanged, only its deviceClassName changes;
- Kubernetes' standard ones: resource.kubernetes.io/pciBusID, pcieRoot and numaNode.
Capacities: memory (bytes), and a partition's computeUnits and simdUnits. At most 32 attributes and capacities
per device (the API's limit): the vendor-domain copies are dropped first, said in the log. Under time-slicing
(`[kubernetes] replicas` N > 1, as for the device plugin) each device may be allocated to N claims at once: it
gains a `shares` capacity of N, of which a claim takes one.

A GPU that discovery no longer sees, or that is unhealthy (host/health.py, the device plugin's rule), is not
published: the scheduler then allocates it to no new claim. Pure, but for `describe`, which reads the host.

In kubernetes-sigs/dra-example-driver: cmd/dra-example-kubeletplugin/discovery.go and deviceinfo.go (devices
from discovery).
"""

from __future__ import annotations

import os

from gpuhook.host.health import problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuhook.host.inventory import Inventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import DraDevice

STANDARD = "resource.kubernetes.io"
MAX_FIELDS = 32  # attributes and capacities of one device
MAX_DEVICES = 128  # devices in one ResourceSlice


def describe(inventory: Inventory, root: Root) -> tuple[list[DraDevice], dict[str, str]]:
    """Every healthy device of every vendor, and those left out: {name: why}. Loads the vendors' libraries; reads
    the host."""
    from gpuhook.vendors.registry import kubernetes as kube_part

    devices: list[DraDevice] = []
    left: dict[str, str] = {}
    for inv in inventory.vendors:
        for d in kube_part(inv.vendor).dra_devices(inv, root):
            why = problem(d.gpu)
            if why:
                left[d.name] = why
            else:
                devices.append(d)
    return devices, left


def device_json(d: DraDevice, numa: int, pcie_root: str, shares: int = 1) -> tuple[dict[str, Any], bool]:
    """The API's device for `d` and whether the vendor-domain copies had to be dropped (the 32-field limit).
    `shares` > 1 ([kubernetes] replicas, time-slicing): the device may be allocated to that many claims at once
    (consumable capacity), each taking one `shares` and, unless it asks more, its share of every other capacity."""
    own: list[tuple[str, str | int | bool]] = [("type", d.kind), ("vendor", d.gpu.vendor), ("index", d.gpu.index)]
    own += [(k, v) for k, v in d.attributes if k != "type"]
    standard: list[tuple[str, str | int | bool]] = [(f"{STANDARD}/pciBusID", d.gpu.pci)] if d.gpu.pci else []
    if pcie_root:
        standard.append((f"{STANDARD}/pcieRoot", pcie_root))
    if numa >= 0:
        standard.append((f"{STANDARD}/numaNode", numa))
    mirrored: list[tuple[str, str | int | bool]] = [(f"{d.domain}/{k}", v) for k, v in d.attributes if d.domain]
    if d.numa_in_domain and numa >= 0:
        mirrored.append((f"{d.domain}/numaNode", numa))  # the vendor's driver publishes it under its domain
    capacity = list(d.capacity) + ([("shares", shares)] if shares > 1 else [])
    room = MAX_FIELDS - len(capacity) - len(own) - len(standard)
    dropped = len(mirrored) > room
    attributes = {name: _value(name.rpartition("/")[2], value, d.versions)
                  for name, value in (*own, *standard, *(() if dropped else mirrored))}
    attributes = {k: v for k, v in attributes.items() if v is not None}
    out: dict[str, Any] = {"name": d.name, "attributes": attributes}
    if capacity:
        out["capacity"] = {name: _capacity(name, value, shares) for name, value in capacity}
    if shares > 1:
        out["allowMultipleAllocations"] = True
    return out, dropped


def _capacity(name: str, value: int, shares: int) -> dict[str, Any]:
    """One capacity; on a shared device, what a claim takes of it unless it asks: one share, a share's part of the
    rest."""
    out: dict[str, Any] = {"value": str(value)}
    if shares > 1:
        each = "1" if name == "shares" else str(value // shares)
        out["requestPolicy"] = {"default": each, "validRange": {"min": each, "max": str(value)}}
    return out


def slices(node: str, driver: str, devices: Sequence[dict[str, Any]], generation: int,
           owner: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The pool's ResourceSlices (at most 128 devices each; one, empty, when there are none), named
    <node>-<driver>-<n> and owned by the Node, so that they go with it."""
    chunks = [list(devices[i:i + MAX_DEVICES]) for i in range(0, len(devices), MAX_DEVICES)] or [[]]
    out = []
    for n, chunk in enumerate(chunks):
        meta: dict[str, Any] = {"name": slice_name(node, driver, n)}
        if owner:
            meta["ownerReferences"] = [owner]
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta,
                    "spec": {"driver": driver, "nodeName": node, "devices": chunk,
                             "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)}}})
    return out


def slice_name(node: str, driver: str, n: int) -> str:
    """A slice's name: <node>-<driver>-<n>, cut to the API's 253 characters."""
    tail = f"-{driver}-{n}"
    return node[:253 - len(tail)] + tail


def pcie_root(root: Root, pci: str) -> str:
    """The PCIe root complex of a PCI device (pci<domain>:<bus>, as Kubernetes' deviceattribute names it): the
    first part of its sysfs device path; "" when sysfs does not say. Reads a link."""
    if not pci:
        return ""
    try:
        real = root.resolve(f"/sys/bus/pci/devices/{pci}")
    except (OSError, ValueError):
        return ""
    parts = root.to_host(real).split("/")
    found = [p for p in parts if p.startswith("pci") and ":" in p]
    return found[0] if found and os.sep not in found[0] else ""


def _value(name: str, value: str | int | bool, versions: Sequence[str]) -> dict[str, Any] | None:
    """The API's typed attribute value: version (semver, the vendor says which), bool, int or string."""
    if name in versions:
        semver = _semver(str(value))
        return {"version": semver} if semver else None
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)[:64]}


def _semver(text: str) -> str:
    """A driver's or capability's version as semver (8.0 -> 8.0.0, 535.104.05 -> 535.104.5); "" if it is none."""
    core, sep, rest = text.strip().partition("-")
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return ""
    numbers = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(numbers) + (f"-{rest}" if sep and rest else "")
