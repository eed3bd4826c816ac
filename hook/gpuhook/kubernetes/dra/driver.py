"""`gpuhook dra-driver`: the DRA driver's node side. It registers with the kubelet through its plugin registry
(pluginregistration v1: type DRAPlugin, the services v1.DRAPlugin and v1beta1.DRAPlugin), serves
NodePrepareResources and NodeUnprepareResources on its own socket (kubernetes/dra/state.py), and publishes the
node's devices as ResourceSlices (dra/devices.py, dra/slices.py).

Every `[kubernetes] health_interval` it runs discovery again (the runtime's own): a GPU that goes, turns unhealthy,
or whose MIG layout or partition mode changes is republished. An unhealthy GPU stays in the slices with a taint per
fault (dra/taints.py: no new claim gets it unless it tolerates the taint, and NoExecute evicts the pods holding it),
or leaves them where the cluster keeps no taints; the kubelet's health watch (DRAResourceHealth, on by default from
1.36) hears it UNHEALTHY, with why, so that the pods holding it say so in their status. When the kubelet removes
its sockets (a restart) it serves and registers anew. SIGTERM or SIGINT: stop serving, remove the sockets, exit 0;
the slices stay (the kubelet removes an unregistered driver's slices itself), and so do the prepared claims' records
and CDI specs, which a new driver answers from.

With `[kubernetes] partitions = "dynamic"` (`--partitions=dynamic`) each GPU a vendor can partition is published as
every partition it can take over shared counters, and a claim's partition is made when it is prepared
(dra/partitionable.py).

The loop that discovers, publishes and serves is dra/loop.py (`run`).

In kubernetes-sigs/dra-example-driver: cmd/dra-example-kubeletplugin/driver.go and health.go (the plugin and its health
watch); the kubeletplugin helper's registration and sockets are dra/registration.py here.
"""

from __future__ import annotations

import sys
import threading

from gpuhook.errors import GpuhookError
from gpuhook.kubernetes.api import dra_pb2 as pb
from gpuhook.kubernetes.api import (
    dra_pb2_grpc,
    drahealth_pb2,
    drahealth_pb2_grpc,
    pluginregistration_pb2,
    pluginregistration_pb2_grpc,
)
from gpuhook.kubernetes.dra.claim_locks import ClaimLocks
from gpuhook.kubernetes.dra.state import Preparer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.config import Config
    from gpuhook.host.inventory import Inventory
    from gpuhook.vendors.contract import DraDevice

DRIVER = "gpu.gpuhook.dev"
SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # the kubelet picks the first it speaks
HEARTBEAT = 10.0  # seconds between health reports when nothing changes
_HEALTH_TIMEOUT = 30  # what each report tells the kubelet: UNKNOWN after this long without one


def say(line: str) -> None:
    """One line on stderr (the DaemonSet's log)."""
    sys.stderr.write(f"gpuhook dra-driver: {line}\n")
    sys.stderr.flush()


class Driver(dra_pb2_grpc.DRAPluginServicer, drahealth_pb2_grpc.DRAResourceHealthServicer,
             pluginregistration_pb2_grpc.RegistrationServicer):
    """The node plugin's services and what they share: the devices published now and every device's health,
    under a lock (a change wakes the health watches); and one lock per claim, held around its preparation and
    unpreparation, so that calls on one claim take turns (each leaves its CDI spec and records both there or both
    gone, dra/state.Preparer) while different claims are prepared at once."""

    def __init__(self, config: Config, preparer: Preparer, endpoint: str, driver: str) -> None:
        self._config, self._preparer, self._endpoint, self._driver = config, preparer, endpoint, driver
        self._lock = threading.Condition()
        self._devices: dict[str, DraDevice] = {}
        self._inventory: Inventory | None = None
        self._health: dict[str, str] = {}  # every device ever published: "" healthy, else why not
        self._version = 0
        self._stopping = False
        self.claims = ClaimLocks()
        self.registered = threading.Event()
        self.republish = threading.Event()  # the slices written again without waiting for the recheck

    def update(self, devices: dict[str, DraDevice], inventory: Inventory, left: dict[str, str]) -> None:
        """What is published now, and what was left out and why."""
        health = {**{name: "gone from the node" for name in self._health}, **{n: "" for n in devices}, **left}
        with self._lock:
            self._devices, self._inventory = devices, inventory
            if health != self._health:
                self._health, self._version = health, self._version + 1
                self._lock.notify_all()

    def stop(self) -> None:
        """End the health watches."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()

    def NodeWatchResources(self, request: Any, context: Any) -> Any:
        """Every device's health, then again on each change and every HEARTBEAT seconds (the kubelet takes a
        report older than its timeout for UNKNOWN), until the kubelet goes or the driver stops."""
        import time

        seen, sent = -1, 0.0
        while context.is_active():
            with self._lock:
                self._lock.wait_for(lambda: self._stopping or self._version != seen,  # noqa: B023
                                    timeout=max(0.0, sent + HEARTBEAT - time.monotonic()))
                if self._stopping:
                    return
                if self._version == seen and time.monotonic() - sent < HEARTBEAT:
                    continue
                seen, health = self._version, dict(self._health)
            sent = time.monotonic()
            yield drahealth_pb2.NodeWatchResourcesResponse(devices=[_health(self._preparer.node, name, why)
                                                                    for name, why in sorted(health.items())])

    def GetInfo(self, request: Any, context: Any) -> Any:
        """The kubelet's first question: who we are and where we serve."""
        return pluginregistration_pb2.PluginInfo(type="DRAPlugin", name=self._driver, endpoint=self._endpoint,
                                                 supported_versions=list(SERVICES))

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        """The kubelet's verdict on our registration."""
        if request.plugin_registered:
            say(f"registered with the kubelet as {self._driver} ({self._endpoint})")
            self.registered.set()  # a kubelet starting deletes its node's slices of drivers not registered yet
            self.republish.set()
        else:
            say(f"the kubelet refused the registration: {request.error}")
        return pluginregistration_pb2.RegistrationStatusResponse()

    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        """Each claim prepared, or its one-line error (the kubelet shows it in the pod's events and retries)."""
        answer = pb.NodePrepareResourcesResponse()
        for c in request.claims:
            with self._lock:
                devices, inventory = dict(self._devices), self._inventory
            try:
                if inventory is None:
                    raise GpuhookError("the driver has not discovered the node's GPUs yet")
                with self.claims.hold(c.uid):  # one claim's lock at a time: never two held, no order to deadlock
                    prepared = self._preparer.prepare(c.namespace, c.uid, c.name, devices, inventory)
            except (GpuhookError, OSError, ValueError) as e:
                say(f"claim {c.namespace}/{c.name} ({c.uid}): {e}")
                answer.claims[c.uid].error = f"gpuhook: {e}"
                continue
            for req, device, cdi, share in prepared:
                answer.claims[c.uid].devices.append(pb.Device(request_names=[req], pool_name=self._preparer.node,
                                                              device_name=device, cdi_device_ids=[cdi],
                                                              share_id=share or None))
            say(f"prepared claim {c.namespace}/{c.name} ({c.uid}): {', '.join(d for _, d, _, _ in prepared)}")
        return answer

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        """Each claim's CDI spec and record removed."""
        answer = pb.NodeUnprepareResourcesResponse()
        for c in request.claims:
            try:
                with self.claims.hold(c.uid):
                    self._preparer.unprepare(c.uid)
            except (GpuhookError, OSError, ValueError) as e:
                answer.claims[c.uid].error = f"gpuhook: {e}"
                continue
            answer.claims[c.uid].SetInParent()
            say(f"unprepared claim {c.namespace}/{c.name} ({c.uid})")
        return answer


def _health(pool: str, name: str, why: str) -> Any:
    """One device's health as the kubelet's watch reads it."""
    import time

    status = drahealth_pb2.UNHEALTHY if why else drahealth_pb2.HEALTHY
    return drahealth_pb2.DeviceHealth(device=drahealth_pb2.DeviceIdentifier(pool_name=pool, device_name=name),
                                      health=status, last_updated_time=int(time.time()),
                                      health_check_timeout_seconds=_HEALTH_TIMEOUT, message=why)
