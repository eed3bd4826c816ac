"""The node's ResourceSlices, kept as the driver's devices are: one pool named after the node, its slices
replaced whole (a new generation) when what is published changes, and nothing written when it does not. What is
on the API server is read again every RECHECK seconds even when nothing changed here: the kubelet deletes a
driver's slices some time after the driver's socket goes (a restart), and another client may have changed them.
Talks to the API server.

With partitions made on demand (dra/partitionable.py) the pool also carries the GPUs' CounterSets, in slices of
their own (resource.k8s.io/v1 lets a slice carry devices or sharedCounters, not both; at most 8 sets a slice), and
its devices, which consume counters, go at most 64 to a slice (the API's limit for such devices). Without them the
slices are what they always were.

In kubernetes-sigs/dra-example-driver: the resourceslice controller its driver starts
(k8s.io/dynamic-resource-allocation).
"""

from __future__ import annotations

import time

from gpuhook.errors import KubernetesError
from gpuhook.kubernetes.apiserver import ApiError
from gpuhook.kubernetes.dra.devices import MAX_DEVICES, slice_name, slices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuhook.kubernetes.apiserver import ApiServer

_PATH = "/apis/resource.k8s.io/v1/resourceslices"
RECHECK = 15.0
MAX_CONSUMING = 64  # devices in one ResourceSlice where any consumes counters or has taints
MAX_COUNTER_SETS = 8  # CounterSets in one ResourceSlice


def pool(node: str, driver: str, devices: Sequence[dict[str, Any]], counter_sets: Sequence[dict[str, Any]],
         generation: int, owner: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The pool's ResourceSlices: as dra/devices.slices makes them where there are no `counter_sets` and no
    device has taints; else the devices at most MAX_CONSUMING a slice where any consumes counters or has taints,
    then the CounterSets at most MAX_COUNTER_SETS a slice, in slices of their own, all of one generation and count.
    Pure."""
    advanced = any("consumesCounters" in d or "taints" in d for d in devices)  # tainted: dra/taints.py
    if not counter_sets and not advanced:
        return slices(node, driver, devices, generation, owner)
    per = MAX_CONSUMING if advanced else MAX_DEVICES
    groups: list[tuple[str, list[dict[str, Any]]]] = [
        ("devices", list(devices[i:i + per])) for i in range(0, len(devices), per)]
    groups += [("sharedCounters", list(counter_sets[i:i + MAX_COUNTER_SETS]))
               for i in range(0, len(counter_sets), MAX_COUNTER_SETS)]
    out = []
    for n, (field, items) in enumerate(groups):
        (made,) = slices(node, driver, [], generation, owner)
        del made["spec"]["devices"]  # a slice has devices or sharedCounters, never both (an empty list is one)
        made["spec"][field] = items
        made["metadata"]["name"] = slice_name(node, driver, n)
        made["spec"]["pool"]["resourceSliceCount"] = len(groups)
        out.append(made)
    return out


class Publisher:
    """One node's slices of one driver."""

    def __init__(self, api: ApiServer, driver: str, node: str) -> None:
        self._api, self._driver, self._node = api, driver, node
        self._owner: dict[str, Any] | None = None
        self._published: list[dict[str, Any]] | None = None
        self._checked = 0.0
        self._dropped: tuple[list[dict[str, Any]], float] | None = None  # counters the API server dropped, when

    def publish(self, devices: Sequence[dict[str, Any]], counter_sets: Sequence[dict[str, Any]] = ()) -> bool:
        """The pool made to list exactly `devices` (and `counter_sets`, the CounterSets they consume); whether
        anything was written. KubernetesError (ApiError) when the API server refuses or cannot be reached: the
        caller tries again."""
        wanted = list(devices)
        sets = list(counter_sets)
        whole = wanted + sets
        if whole == self._published and time.monotonic() - self._checked < RECHECK:
            return False
        if self._dropped and self._dropped[0] == whole and time.monotonic() - self._dropped[1] < RECHECK:
            return False  # not written again at once, though the driver forgot what it published
        existing = self._existing()
        self._checked = time.monotonic()
        if [d for s in existing for d in s["spec"].get("devices") or []] == wanted and existing and all(
                s["spec"]["pool"].get("resourceSliceCount") == len(existing) for s in existing) and \
                [c for s in existing for c in s["spec"].get("sharedCounters") or []] == sets:
            self._published = whole  # as it is (or as published before this process started)
            return False
        generation = 1 + max((int(s["spec"]["pool"].get("generation", 0)) for s in existing), default=0)
        by_name = {s["metadata"]["name"]: s for s in existing}
        desired = pool(self._node, self._driver, wanted, sets, generation, self._node_owner())
        dropped = False
        for s in desired:
            old = by_name.pop(s["metadata"]["name"], None)
            if old is None:
                stored = self._api.request("POST", _PATH, s)
            else:
                s["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                stored = self._api.request("PUT", f"{_PATH}/{s['metadata']['name']}", s)
            kept = stored.get("spec") if isinstance(stored, dict) else None
            dropped |= "sharedCounters" in s["spec"] and not (kept or {}).get("sharedCounters")
        for name in by_name:
            try:
                self._api.request("DELETE", f"{_PATH}/{name}")
            except ApiError as e:
                if e.status != 404:
                    raise
        self._published = whole
        if dropped:  # written again only after RECHECK, and said once by the driver
            self._dropped = (whole, time.monotonic())
            raise KubernetesError("the API server dropped the slices' sharedCounters: this cluster has the "
                                  "DRAPartitionableDevices feature gate off (on by default from Kubernetes 1.36); "
                                  "turn it on, or set [kubernetes] partitions = \"static\" (the chart's "
                                  "dra.partitions)")
        return True

    def forget(self) -> None:
        """Read what the API server has on the next call, and write what differs."""
        self._published = None

    def _existing(self) -> list[dict[str, Any]]:
        listed = self._api.get(_PATH, {"fieldSelector": f"spec.nodeName={self._node},spec.driver={self._driver}"})
        return sorted((s for s in listed.get("items") or [] if isinstance(s, dict) and isinstance(s.get("spec"), dict)),
                      key=lambda s: str(s.get("metadata", {}).get("name", "")))

    def _node_owner(self) -> dict[str, Any] | None:
        """The Node as the slices' owner (they go when it is deleted); None where it cannot be read."""
        if self._owner is None:
            try:
                node = self._api.get(f"/api/v1/nodes/{self._node}")
            except ApiError:
                return None
            self._owner = {"apiVersion": "v1", "kind": "Node", "name": self._node,
                           "uid": node.get("metadata", {}).get("uid", ""), "controller": True}
        return self._owner
