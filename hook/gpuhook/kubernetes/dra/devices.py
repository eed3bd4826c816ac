"""What gpuhook's DRA driver publishes in its node's ResourceSlices: each vendor's devices (vendors/<v>/dra.py)
as resource.k8s.io/v1 devices, from the same discovery the runtime uses.

Attributes and capacities, per device:
- gpuhook's own, bare (so `device.attributes["gpu.gpuhook.dev"]`): `type` (gpu, mig, partition), `vendor`
  (nvidia, amd), `index` (as gpuhook and the vendors' env count it), the vendor's facts under the vendor DRA
  driver's names (uuid, productName, architecture, driverVersion, profile, parentUUID, ...) and capacities
  (memory in bytes; a partition's computeUnits and simdUnits);
- every attribute and capacity the vendor's own driver publishes, under its domain (gpu.nvidia.com, gpu.amd.com)
  with its `type` values: the facts above again, and those gpuhook's domain never carried, once (NVIDIA's
  addressingMode, a MIG device's multiprocessors, engines and memorySlice<N>; AMD's numaNode). A claim's CEL written
  for that driver reads ours unchanged, `device.capacity["gpu.nvidia.com"].memory` too; only its deviceClassName
  changes. A driver run under the vendor's own name (the chart's dra.driverName: gpu.nvidia.com) publishes the
  vendor's names bare, once, and gpuhook's `type` as gpu.gpuhook.dev/type (the chart's classes select by it);
- Kubernetes' standard ones: resource.kubernetes.io/pciBusID, pcieRoot and numaNode.
At most 32 attributes and capacities per device (resource.k8s.io/v1's limit in Kubernetes 1.34 to 1.37). A device
that would have more (an NVIDIA MIG device under gpu.gpuhook.dev) leaves out, until it fits, said in the log: the
vendor's memorySlice<N> first, then gpuhook's bare copies of the vendor's facts in DROP_ORDER (the vendor's
domain keeps them), then anything else, last published first; never gpuhook's type, vendor and index, the
standard attributes or the bare capacities. Under time-slicing (`[kubernetes] replicas` N > 1, as for the device
plugin) each device may be allocated to N claims at once: it gains a `shares` capacity of N, of which a claim
takes one.

Which devices are published, and an unhealthy one's taints, is dra/taints.py's. Pure.

In kubernetes-sigs/dra-example-driver: cmd/dra-example-kubeletplugin/discovery.go and deviceinfo.go (devices
from discovery).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuhook.host.root import Root
    from gpuhook.vendors.contract import DraDevice

STANDARD = "resource.kubernetes.io"
OWN_DOMAIN = "gpu.gpuhook.dev"  # gpuhook's driver's name unless the chart's dra.driverName says another
MAX_FIELDS = 32  # attributes and capacities of one device (resource.k8s.io/v1, Kubernetes 1.34 to 1.37)
# gpuhook's bare copies of the vendor's facts, in the order they are left out when a device would pass MAX_FIELDS
# (the vendor's domain keeps each): the least selected first
DROP_ORDER = ("brand", "cudaDriverVersion", "driverVersionFull", "driverVersion", "cudaComputeCapability",
              "architecture", "deviceID", "partitionProfile", "productName", "uuid", "parentUUID", "profile")
MAX_DEVICES = 128  # devices in one ResourceSlice


def device_json(d: DraDevice, numa: int, pcie_root: str, shares: int = 1,
                driver: str = OWN_DOMAIN) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The API's device for `d`, published by the driver named `driver`, and the fields left out to keep within
    MAX_FIELDS (DROP_ORDER's, said in the log). `shares` > 1 ([kubernetes] replicas, time-slicing): the device may
    be allocated to that many claims at once (consumable capacity), each taking one `shares` and, unless it asks
    more, its share of every other capacity."""
    own: list[tuple[str, str | int | bool]] = [("type", d.kind), ("vendor", d.gpu.vendor), ("index", d.gpu.index)]
    standard: list[tuple[str, str | int | bool]] = [(f"{STANDARD}/pciBusID", d.gpu.pci)] if d.gpu.pci else []
    if pcie_root:
        standard.append((f"{STANDARD}/pcieRoot", pcie_root))
    if numa >= 0:
        standard.append((f"{STANDARD}/numaNode", numa))
    theirs = [*d.attributes, *d.domain_attributes, *([("numaNode", numa)] if d.numa_in_domain and numa >= 0 else [])]
    their_capacity = [*d.capacity, *d.domain_capacity]
    shared = [("shares", shares)] if shares > 1 else []
    if d.domain and d.domain == driver:  # the driver carries the vendor's name: its bare names are the vendor's
        names = {k for k, _ in theirs}
        attributes = [*theirs, *[a for a in own if a[0] not in names]]
        attributes.append((f"{OWN_DOMAIN}/type", d.kind))  # what the chart's DeviceClasses select by, any name
        capacity = [*their_capacity, *shared]
    else:
        attributes = [*own, *[(k, v) for k, v in d.attributes if k != "type"]]
        attributes += [(f"{d.domain}/{k}", v) for k, v in theirs] if d.domain else []
        capacity = [*d.capacity, *shared, *([(f"{d.domain}/{k}", v) for k, v in their_capacity] if d.domain else [])]
    attributes += standard
    keep = {n for n, _ in (*own, *standard, *shared, *d.capacity)} | {f"{OWN_DOMAIN}/type"}  # d.capacity's: bare
    left = _over_budget([n for n, _ in attributes], [n for n, _ in capacity], d.domain, keep)
    dropped = set(left)
    typed = {name: _value(name.rpartition("/")[2], value, d.versions)
             for name, value in attributes if name not in dropped}
    out: dict[str, Any] = {"name": d.name, "attributes": {k: v for k, v in typed.items() if v is not None}}
    kept = [(name, value) for name, value in capacity if name not in dropped]
    if kept:
        out["capacity"] = {name: _capacity(name, value, shares) for name, value in kept}
    if shares > 1:
        out["allowMultipleAllocations"] = True
    return out, tuple(left)


def _over_budget(attributes: list[str], capacity: list[str], domain: str, keep: set[str]) -> list[str]:
    """The names left out, in that order, until attributes and capacities together fit MAX_FIELDS: the vendor's
    memorySlice<N> first (all of them: a part of a placement selects nothing), then gpuhook's bare copies of facts
    the vendor's domain also carries, in DROP_ORDER, then the rest, last published first. What `keep` names
    (gpuhook's own type, vendor and index, Kubernetes' standard attributes, the bare capacities) is never left
    out."""
    names = [*attributes, *capacity]
    over = len(names) - MAX_FIELDS
    if over <= 0:
        return []
    dropped = [n for n in capacity if n.rpartition("/")[2].startswith("memorySlice") and n not in keep]
    present = set(names)
    dropped += [n for n in DROP_ORDER if n in present and f"{domain}/{n}" in present and n not in keep]
    dropped += [n for n in reversed(names) if n not in keep and n not in dropped]
    slices = len([n for n in dropped if n.rpartition("/")[2].startswith("memorySlice")])
    return dropped[:max(over, slices)]


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
