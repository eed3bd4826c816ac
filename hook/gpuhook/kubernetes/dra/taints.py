"""Health as device taints (KEP-5055, resource.k8s.io/v1 `Device.taints`): every device of every vendor is
published, an unhealthy one with a taint per fault (host/health.py: its class, value and effect) under the
driver's domain: `<driver>/gpu-lost`, `<driver>/xid`, `<driver>/ras`. The scheduler then allocates a tainted
device only to a claim that tolerates the taint; under NoExecute the device-taint eviction controller deletes the
pods whose claims hold it and do not tolerate it. A fault that goes takes its taint with it.

Where the cluster keeps no taints (before 1.33, or the DRADeviceTaints gate off: the API server drops the field)
the driver says so once and publishes as before them: an unhealthy device is left out.

XIDs are the kernel log's (host/kernel_log.py) and last until the GPU is reset: discovery stops seeing it (a
driver reload, a PCI remove and rescan) or the driver restarts. A missing device node and RAS counters are read
anew each round, so their taints go when the node is back or the counters are cleared.

Pure, but for `describe`, `counters` and `Watch`, which read the host, and `kept`, which asks the API server.
"""

from __future__ import annotations

import time

from gpuhook.host.health import faults, unhealthy
from gpuhook.host.kernel_log import KernelLog, xid
from gpuhook.host.ras import uncorrectable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    from gpuhook.host.health import Fault
    from gpuhook.host.inventory import Gpu, Inventory
    from gpuhook.host.root import Root
    from gpuhook.kubernetes.apiserver import ApiServer
    from gpuhook.vendors.contract import DraDevice

    Described = tuple[DraDevice, tuple[Fault, ...]]


def describe(inventory: Inventory, root: Root, xids: Xids, ras: Mapping[str, dict[str, int]]) -> list[Described]:
    """Every device of every vendor with its faults (none when healthy); `ras`: `counters`' answer. Loads the
    vendors' libraries; reads the host."""
    from gpuhook.vendors.registry import kubernetes as kube_part

    return [(d, faults(d.gpu, xids.of(d.gpu), ras.get(_device(d.gpu)))) for inv in inventory.vendors
            for d in kube_part(inv.vendor).dra_devices(inv, root)]


def counters(root: Root, inventory: Inventory) -> dict[str, dict[str, int]]:
    """The uncorrectable RAS errors of each GPU that has RAS counters, by its PCI device. Reads sysfs."""
    out: dict[str, dict[str, int]] = {}
    for g in (g for v in inventory.vendors for g in (*v.gpus, *v.slices)):
        if _device(g) not in out:
            out[_device(g)] = uncorrectable(root, g)
    return {k: v for k, v in out.items() if v}


def publishable(described: Sequence[Described], taints: bool) -> tuple[list[Described], dict[str, str]]:
    """What is published, and every unhealthy device with why ({name: why}, for the kubelet's health watch). Where
    the cluster keeps `taints`, every device, with its faults; else the unhealthy ones are left out and the
    others go without theirs (an informational taint, effect None)."""
    left = {d.name: why for d, found in described if (why := unhealthy(found))}
    if taints:
        return list(described), left
    return [(d, ()) for d, _ in described if d.name not in left], left


def taints_json(name: str, found: Sequence[Fault], domain: str, since: Stamps) -> list[dict[str, Any]]:
    """The API's taints of device `name`: key `<domain>/<class>`, the fault's value and effect, and timeAdded: when
    this driver first saw it (sent, so that a republished slice keeps it: the eviction's tolerationSeconds count
    from it)."""
    return [{"key": f"{domain}/{f.kind}", "value": f.value, "effect": f.effect,
             "timeAdded": since.of((name, f.kind, f.value, f.effect))} for f in found]


def summary(wanted: list[dict[str, Any]], left: dict[str, str]) -> str:
    """What the publish line adds: the tainted devices with their taints, and the unhealthy ones left out."""
    tainted = [b["name"] + " (" + ", ".join(f"{t['key']}={t['value']}:{t['effect']}" for t in b["taints"]) + ")"
               for b in wanted if b.get("taints")]
    names = {b["name"] for b in wanted}
    out = [f"{n} ({why})" for n, why in left.items() if n not in names]
    return ("; tainted: " + ", ".join(tainted) if tainted else "") + ("; left out: " + ", ".join(out) if out else "")


def kept(api: ApiServer, node: str, driver: str, say: Callable[[str], None]) -> bool | None:
    """Whether the API server kept the taints of the slices just written (it drops the field where the cluster has
    no device taints: before 1.33, or the DRADeviceTaints gate off); None where the slices cannot be read. Says
    which. Talks to the API server."""
    from gpuhook.kubernetes.apiserver import ApiError

    try:
        listed = api.get("/apis/resource.k8s.io/v1/resourceslices",
                         {"fieldSelector": f"spec.nodeName={node},spec.driver={driver}"})
    except ApiError:
        return None
    kept = any(d.get("taints") for s in listed.get("items") or [] for d in (s.get("spec") or {}).get("devices") or [])
    say("the cluster keeps device taints: an unhealthy device stays published, tainted" if kept else
        "the API server dropped the devices' taints (a cluster before 1.33, or its DRADeviceTaints gate off): an "
        "unhealthy device is left out of the slices instead")
    return kept


class Xids:
    """The XIDs the kernel logged for each GPU (by PCI address, without its function) since it was last reset."""

    def __init__(self) -> None:
        self._seen: dict[str, set[int]] = {}

    def add(self, messages: Iterable[str]) -> list[tuple[str, int]]:
        """The XIDs among the kernel log's `messages` remembered; those that were new, as (PCI address, XID)."""
        new = []
        for message in messages:
            found = xid(message)
            if found and found[1] not in self._seen.setdefault(found[0], set()):
                self._seen[found[0]].add(found[1])
                new.append(found)
        return new

    def keep(self, gpus: Iterable[Gpu]) -> bool:
        """Forget the XIDs of the GPUs not in `gpus` (discovery's: one it no longer sees was reset or removed);
        whether any was forgotten."""
        present = {_bus(g.pci) for g in gpus if g.pci}
        gone = [p for p in self._seen if p not in present]
        for p in gone:
            del self._seen[p]
        return bool(gone)

    def state(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """Everything remembered, comparable."""
        return tuple(sorted((p, tuple(sorted(x))) for p, x in self._seen.items() if x))

    def of(self, gpu: Gpu) -> tuple[int, ...]:
        """The XIDs logged for the GPU (a MIG device: its GPU's)."""
        return tuple(sorted(self._seen.get(_bus(gpu.pci), ()))) if gpu.pci else ()


class Stamps:
    """When each taint was first seen, in RFC 3339 (the API's timeAdded), while it lasts. `clock`: seconds since
    the epoch (tests pass their own)."""

    def __init__(self, clock: Any = time.time) -> None:
        self._clock = clock
        self._first: dict[tuple[str, ...], str] = {}
        self._used: set[tuple[str, ...]] = set()

    def of(self, key: tuple[str, ...]) -> str:
        """The time `key` was first seen (now, if it was not)."""
        self._used.add(key)
        if key not in self._first:
            self._first[key] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._clock()))
        return self._first[key]

    def forget_unused(self) -> None:
        """Forget the keys not asked for since the last call (taints that went)."""
        self._first = {k: v for k, v in self._first.items() if k in self._used}
        self._used = set()


def _device(gpu: Gpu) -> str:
    """The GPU's PCI device, as RAS counters are kept: its sysfs directory, else its address."""
    return gpu.sysfs or gpu.pci


def _bus(pci: str) -> str:
    """A PCI address as the kernel log names a GPU: without its function, lower case (0000:3b:00)."""
    return pci.rpartition(".")[0].lower() if "." in pci else pci.lower()


class Watch:
    """What the GPUs' health depends on beside discovery, read each round: the kernel log's XIDs and the RAS
    counters; when each taint was first seen; and whether the cluster keeps taints (None until a tainted slice was
    read back)."""

    def __init__(self, root: Root) -> None:
        self._root, self._log = root, KernelLog(root)
        self.xids, self.stamps = Xids(), Stamps()
        self.ras: dict[str, dict[str, int]] = {}
        self.keeps: bool | None = None

    def read(self, found: Inventory) -> tuple[tuple[Any, ...], list[str]]:
        """A comparable summary of what was read (it changes when a device's taints may), and the lines to log:
        the new XIDs. Reads the kernel log and sysfs."""
        said = [f"GPU {pci}: the kernel log has XID {x}" for pci, x in self.xids.add(self._log.read())]
        self.xids.keep(g for v in found.vendors for g in v.gpus)
        self.ras = counters(self._root, found)
        return (self.xids.state(), tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.ras.items())),
                self.keeps), said

    @property
    def log_error(self) -> str:
        """Why the kernel log cannot be read ("" when it can)."""
        return self._log.error
