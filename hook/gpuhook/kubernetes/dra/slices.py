"""The node's ResourceSlices, kept as the driver's devices are: one pool named after the node, its slices
replaced whole (a new generation) when what is published changes, and nothing written when it does not. What is
on the API server is read again every RECHECK seconds even when nothing changed here: the kubelet deletes a
driver's slices some time after the driver's socket goes (a restart), and another client may have changed them.
Talks to the API server.

In kubernetes-sigs/dra-example-driver: the resourceslice controller its driver starts
(k8s.io/dynamic-resource-allocation).
"""

from __future__ import annotations

import time

from gpuhook.kubernetes.apiserver import ApiError
from gpuhook.kubernetes.dra.devices import slices

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from gpuhook.kubernetes.apiserver import ApiServer

_PATH = "/apis/resource.k8s.io/v1/resourceslices"
RECHECK = 15.0


class Publisher:
    """One node's slices of one driver."""

    def __init__(self, api: ApiServer, driver: str, node: str) -> None:
        self._api, self._driver, self._node = api, driver, node
        self._owner: dict[str, Any] | None = None
        self._published: list[dict[str, Any]] | None = None
        self._checked = 0.0

    def publish(self, devices: Sequence[dict[str, Any]]) -> bool:
        """The pool made to list exactly `devices`; whether anything was written. KubernetesError (ApiError) when
        the API server refuses or cannot be reached: the caller tries again."""
        wanted = list(devices)
        if wanted == self._published and time.monotonic() - self._checked < RECHECK:
            return False
        existing = self._existing()
        self._checked = time.monotonic()
        if [d for s in existing for d in s["spec"].get("devices") or []] == wanted and existing and all(
                s["spec"]["pool"].get("resourceSliceCount") == len(existing) for s in existing):
            self._published = wanted  # as it is (or as published before this process started)
            return False
        generation = 1 + max((int(s["spec"]["pool"].get("generation", 0)) for s in existing), default=0)
        by_name = {s["metadata"]["name"]: s for s in existing}
        desired = slices(self._node, self._driver, wanted, generation, self._node_owner())
        for s in desired:
            old = by_name.pop(s["metadata"]["name"], None)
            if old is None:
                self._api.request("POST", _PATH, s)
            else:
                s["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                self._api.request("PUT", f"{_PATH}/{s['metadata']['name']}", s)
        for name in by_name:
            try:
                self._api.request("DELETE", f"{_PATH}/{name}")
            except ApiError as e:
                if e.status != 404:
                    raise
        self._published = wanted
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
