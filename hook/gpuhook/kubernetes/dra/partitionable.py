"""Partitions made on demand (KEP-4815's partitionable devices; `[kubernetes] partitions = "dynamic"`, the chart's
`dra.partitions: dynamic`): each GPU a vendor can partition (vendors/<v>/kubernetes.partitionable: NVIDIA's
MIG-capable GPUs, every profile at every placement; AMD's GPUs with partition modes, every partition of every
mode) is published as every partition it can take, each device consuming its share of the GPU's counters (a
CounterSet in a slice of its own, dra/slices.pool), so that the scheduler never allocates two that overlap. A GPU
laid out otherwise (partitions this driver did not make) is published as it is laid out.

A claim for one is prepared by making it (the vendor's make_partition: a MIG GPU instance and its compute instance;
an AMD GPU's modes), under the GPU path's lock, and only where nothing else holds the GPU: another claim or
container on it whole (or, for the GPU whole and for a mode change, on one of its partitions), partitions this
driver did not make, or (AMD) another mode other claims' partitions are in. Then the claim's record and CDI spec
name the device made, which the runtime checks as it checks any slice. What was made is written to
state_dir/partitions/<claim uid>.json (dra/made.py) at once, so that a prepare asked again finds it and an
unprepare removes it, after the claim's record and spec went, when no container holds it any more (a mode, when no
other claim has a partition of the GPU).

With the switch off nothing here runs: the slices and claims are what they were. Reads the host; makes and
removes partitions; writes state_dir/partitions.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from gpuhook.errors import GpuhookError, KubernetesError
from gpuhook.frozen import replace
from gpuhook.kubernetes.dra.made import Made, every_made, forget_made, made_for, save_made

T = TypeVar("T")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from gpuhook.config import Config
    from gpuhook.host.inventory import Gpu, Inventory
    from gpuhook.host.root import Root
    from gpuhook.plan.authority import PreparedClaim
    from gpuhook.vendors.contract import DraDevice, Partition, Partitionable


def offered(inventory: Inventory, root: Root) -> list[Partitionable]:
    """Every healthy GPU the vendors can partition on demand. Loads the vendors' libraries; reads the host."""
    from gpuhook.host.health import problem
    from gpuhook.vendors.registry import kubernetes as kube_part

    return [p for inv in inventory.vendors for p in kube_part(inv.vendor).partitionable(inv, root)
            if not problem(p.gpu)]


def published(shown: Sequence[tuple[DraDevice, T]], offers: Sequence[Partitionable]) -> list[tuple[DraDevice, T]]:
    """What to publish: `shown` (discovery's devices, each with what the driver keeps beside it) but for the devices
    of a partitionable GPU, which give way to its partitions, each with what the GPU's first device had; a GPU of
    which nothing was shown (unhealthy) offers none. Pure."""
    taken = {o.gpu.key(): o for o in offers}
    out = [(d, x) for d, x in shown if d.gpu.key() not in taken and d.gpu.parent not in taken]
    for key, o in taken.items():
        beside = [x for d, x in shown if key in (d.gpu.key(), d.gpu.parent)]
        out += [(p.device, beside[0]) for p in o.partitions] if beside else []
    return out


def counter_sets(offers: Sequence[Partitionable]) -> list[dict[str, Any]]:
    """The API's CounterSets of the offered GPUs. Pure."""
    return [{"name": o.counter_set, "counters": {k: {"value": str(v)} for k, v in o.counters}} for o in offers]


def consuming(body: dict[str, Any], partition: Partition | None, counter_set: str) -> dict[str, Any]:
    """A device's API body with what it consumes of its GPU's CounterSet (unchanged for a device no partition).
    Pure."""
    if partition is None:
        return body
    return {**body, "consumesCounters": [{"counterSet": counter_set,
                                         "counters": {k: {"value": str(v)} for k, v in partition.consumes}}]}


class Maker:
    """Makes the partitions a claim was allocated and removes them again."""

    def __init__(self, config: Config, node_root: str = "/") -> None:
        self._config, self._node_root = config, node_root
        self._offers: list[Partitionable] = []
        self.partitions: dict[str, Partition] = {}  # what is published now, by device name
        # the GPU path's lock is the process's (apply/state_dir), not a thread's: the claims the kubelet prepares at
        # once take turns here first
        self._turns = threading.Lock()

    def shown(self, shown: Sequence[tuple[DraDevice, T]], inventory: Inventory,
              root: Root) -> list[tuple[DraDevice, T]]:
        """The driver's devices with each partitionable GPU's partitions in place of its own (`published`), which
        are remembered for prepare; a GPU laid out otherwise (partitions this driver did not make) stays as it is
        laid out. Loads the vendors' libraries; reads the host and state_dir/partitions."""
        with self._turns:
            made = every_made(self._config.state_dir)
            self._offers = [o for o in offered(inventory, root) if not _foreign(inventory, o.gpu, made)]
        self.partitions = {p.device.name: p for o in self._offers for p in o.partitions}
        return published(shown, self._offers)

    def bodies(self, wanted: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The devices' API bodies, each partition's with what it consumes. Pure."""
        sets = {o.gpu.key(): o.counter_set for o in self._offers}
        out = []
        for body in wanted:
            part = self.partitions.get(str(body.get("name")))
            out.append(consuming(body, part, sets.get(part.device.gpu.key(), "")) if part else body)
        return out

    def counter_sets(self) -> list[dict[str, Any]]:
        """The CounterSets of what `shown` offered last."""
        return counter_sets(self._offers)

    def make(self, record: PreparedClaim, devices: Mapping[str, DraDevice],
             inventory: Inventory) -> tuple[PreparedClaim, dict[str, DraDevice], Inventory]:
        """The claim's partitions made (those made already found again), and the claim, devices and inventory
        naming them. KubernetesError with one line where a GPU is in use otherwise. Makes partitions; writes
        state_dir/partitions."""
        from gpuhook.apply.state_dir import Lock
        from gpuhook.vendors.registry import kubernetes as kube_part

        where = f"claim {record.namespace}/{record.name}"
        for c in record.devices:
            if c.admin and c.device in self.partitions and self.partitions[c.device].layout:
                raise KubernetesError(f"{where}: {c.device} is made only for a claim allocated it, never with "
                                      "adminAccess: ask for the GPU whole with adminAccess to watch it")
        asked = [(c.device, self.partitions[c.device]) for c in record.devices
                 if c.device in self.partitions and not c.admin]
        if not asked:
            return record, dict(devices), inventory
        with self._turns, Lock(self._config.state_dir, exclusive=True):
            made = {m.device: m for m in made_for(self._config.state_dir, record.uid)}
            for name, part in asked:
                if name in made:
                    continue
                fresh = self._fresh()
                self._refuse_if_used(where, record.uid, part, fresh)
                gpu = _physical(fresh, part.device.gpu.vendor, part.device.gpu.key()) or part.device.gpu
                try:
                    place = kube_part(gpu.vendor).make_partition(self._root(), gpu, part.layout)
                except GpuhookError as e:
                    raise KubernetesError(f"{where}: {name}: {e}") from e
                made[name] = Made(device=name, place=place, gpu=gpu.key(), vendor=gpu.vendor, mode=part.mode)
                save_made(self._config.state_dir, record.uid, list(made.values()))
        return self.view(record, devices, self._fresh())

    def view(self, record: PreparedClaim, devices: Mapping[str, DraDevice],
             inventory: Inventory) -> tuple[PreparedClaim, dict[str, DraDevice], Inventory]:
        """The claim, devices and inventory with each partition made for it in place of the device published.
        KubernetesError where one is gone (a reboot took it). Reads state_dir/partitions."""
        made = {m.device: m for m in made_for(self._config.state_dir, record.uid)}
        out = dict(devices)
        claimed = []
        for c in record.devices:
            part = self.partitions.get(c.device)
            if part is None or c.admin or (c.device not in made and not part.layout):
                claimed.append(c)
                continue
            m = made.get(c.device)
            gpu = _at(inventory, m.vendor, m.gpu, m.place) if m else None
            if gpu is None:
                raise KubernetesError(f"claim {record.namespace}/{record.name}: the partition made for "
                                      f"{c.device} is gone from the node: delete the pod to have it made anew")
            out[c.device] = replace(part.device, gpu=gpu)
            claimed.append(replace(c, gpu=gpu.key()))
        return replace(record, devices=tuple(claimed)), out, inventory

    def remove(self, uid: str) -> None:
        """The partitions made for claim `uid` removed once no container holds them (a mode, once no other claim
        has a partition of its GPU: the GPU is then whole again). GpuhookError while a container holds one (the
        kubelet asks again). Removes partitions; deletes state_dir/partitions/<uid>.json."""
        from gpuhook.apply.containers import live_records
        from gpuhook.apply.state_dir import Lock
        from gpuhook.vendors.registry import kubernetes as kube_part

        saved = made_for(self._config.state_dir, uid)
        if not saved:
            return
        with self._turns, Lock(self._config.state_dir, exclusive=True):
            fresh = self._fresh()
            users = live_records(self._config.state_dir, prune=False, node_root=self._node_root)
            others = [m for m in every_made(self._config.state_dir) if m.uid != uid]
            for m in saved:
                made = _at(fresh, m.vendor, m.gpu, m.place)
                held = [r.id for r in users if made is not None and made.key() in r.gpus]
                if held:
                    raise GpuhookError(f"{m.device} is still in use by container {held[0]}: it is removed once "
                                       "that container is gone")
                gpu = _physical(fresh, m.vendor, m.gpu)
                if gpu is None or (m.mode and any(o.gpu == m.gpu for o in others)):
                    continue  # the GPU is gone; or its mode is another claim's too
                kube_part(m.vendor).remove_partition(self._root(), gpu, m.place)
            forget_made(self._config.state_dir, uid)

    def _refuse_if_used(self, where: str, uid: str, part: Partition, inventory: Inventory) -> None:
        """KubernetesError naming what holds the partition's GPU otherwise: a claim or container on the GPU whole
        (for the whole GPU, or a mode the GPU is not in: on any of its partitions), partitions this driver did not
        make (a static layout), or another mode made for another claim."""
        from gpuhook.apply import claims
        from gpuhook.apply.containers import live_records

        key = part.device.gpu.key()
        made = [m for m in every_made(self._config.state_dir) if m.gpu == key]
        family = _family(inventory, part.device.gpu)
        foreign = _foreign(inventory, part.device.gpu, made)
        what = f"GPU {part.device.gpu.index} ({key})"
        if foreign:
            raise KubernetesError(f"{where}: {what} has a static layout ({len(foreign)} partition(s) the DRA driver "
                                  f"did not make): {part.device.name} is not made there; clear the layout "
                                  "(gpuhook partition apply) to use it")
        modes = {m.mode for m in made if m.mode}
        if part.mode and modes and modes != {part.mode}:
            raise KubernetesError(f"{where}: {what} is in {', '.join(sorted(modes))} for other claims: "
                                  f"{part.device.name} ({part.mode}) is made once they are unprepared")
        changes_all = not part.layout or (part.mode and not modes)
        held = {key} | ({g.key() for g in family} if changes_all else set())
        for c in claims.all_records(self._config.state_dir):
            if c.uid != uid and any(d.gpu in held for d in c.devices):
                raise KubernetesError(f"{where}: {what} is in use by claim {c.namespace}/{c.name}: "
                                      f"{part.device.name} is made once that claim is unprepared")
        for r in live_records(self._config.state_dir, prune=False, node_root=self._node_root):
            if held & set(r.gpus):
                raise KubernetesError(f"{where}: {what} is in use by container {r.id}: {part.device.name} is made "
                                      "once it is gone")

    def _fresh(self) -> Inventory:
        from gpuhook.vendors.discover import discover, identified

        root = self._root()
        return identified(root, discover(root))

    def _root(self) -> Root:
        from gpuhook.host.root import Root

        return Root(self._config.host_root)


def _family(inventory: Inventory, gpu: Gpu) -> list[Gpu]:
    """The partitions of `gpu` discovery sees now."""
    inv = inventory.vendor(gpu.vendor)
    return [g for g in (*(inv.gpus if inv else ()), *(inv.slices if inv else ())) if g.parent == gpu.key()]


def _foreign(inventory: Inventory, gpu: Gpu, made: Sequence[Made]) -> list[Gpu]:
    """The partitions of `gpu` this driver did not make (a mode it set makes them all its own)."""
    mine = [m for m in made if m.gpu == gpu.key()]
    if any(m.mode for m in mine):
        return []
    return [g for g in _family(inventory, gpu) if g.place not in {m.place for m in mine}]


def _physical(inventory: Inventory, vendor: str, key: str) -> Gpu | None:
    """The physical GPU `key` names as discovery sees it now: whole, or (a GPU in a partition mode, which is its
    partitions) made of its first partition; None where it is gone."""
    inv = inventory.vendor(vendor)
    every = (*(inv.gpus if inv else ()), *(inv.slices if inv else ()))
    whole = next((g for g in every if g.key() == key and not g.parent), None)
    if whole is not None:
        return whole
    first = next((g for g in every if g.parent == key), None)
    return None if first is None else replace(first, uuid=key, parent="", slice="", profile="", place="")


def _at(inventory: Inventory, vendor: str, key: str, place: str) -> Gpu | None:
    """The partition at `place` of GPU `key` (the GPU whole for ""), None where discovery does not see it."""
    inv = inventory.vendor(vendor)
    every = (*(inv.gpus if inv else ()), *(inv.slices if inv else ()))
    if not place:
        return next((g for g in every if g.key() == key and not g.parent), None)
    return next((g for g in every if g.parent == key and g.place == place), None)
