"""One resource's device plugin (nvidia.com/gpu, amd.com/gpu): the kubelet's DevicePlugin service.

ListAndWatch streams the advertised devices and every change to them; GetPreferredAllocation keeps a container
on one NUMA node and off shared GPUs; Allocate writes the allocation record gpuhook's runtime verifies and
answers with what [kubernetes] allocate_with names: the record's annotation, the vendor's env, CDI devices.

In the device plugin API (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1): the DevicePlugin service (ListAndWatch,
GetPreferredAllocation, Allocate, PreStartContainer).
"""

from __future__ import annotations

import os
import threading
import time

import grpc

from gpuhook.apply import allocations
from gpuhook.kubernetes.api import constants, deviceplugin_pb2_grpc
from gpuhook.kubernetes.api import deviceplugin_pb2 as pb
from gpuhook.kubernetes.device_plugin.devices import gpus_of, preferred
from gpuhook.plan.authority import Allocation
from gpuhook.request.container import ALLOCATION, PREFIX
from gpuhook.vendors import registry
from gpuhook.vendors.registry import kubernetes as kube_part

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from gpuhook.config import Config
    from gpuhook.kubernetes.device_plugin.devices import Device
    from gpuhook.vendors.registry import Vendor


class ResourcePlugin(deviceplugin_pb2_grpc.DevicePluginServicer):
    """The DevicePlugin service for one vendor's resource; `update` feeds it what discovery sees."""

    def __init__(self, vendor: Vendor, config: Config, say: Callable[[str], None], resource: str = "") -> None:
        self.vendor = vendor
        self.resource = resource or registry.resource(vendor.NAME, config.kubernetes.resources)
        self._config = config
        self._say = say
        self._cond = threading.Condition()
        self._devices: tuple[Device, ...] = ()
        self._version = 0
        self._stopping = False

    @property
    def devices(self) -> tuple[Device, ...]:
        """What is advertised now."""
        with self._cond:
            return self._devices

    def update(self, devices: tuple[Device, ...]) -> bool:
        """Advertise `devices`; every open ListAndWatch stream gets them when they differ. Returns whether so."""
        with self._cond:
            if devices == self._devices:
                return False
            self._devices = devices
            self._version += 1
            self._cond.notify_all()
        return True

    def stop(self) -> None:
        """End every open stream (the plugin is going away)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    # The method names are the protocol's (the gRPC servicer dispatches on them).
    def GetDevicePluginOptions(self, request: Any, context: Any) -> Any:
        """Preferred allocation is offered; no PreStartContainer call is needed."""
        return pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def ListAndWatch(self, request: Any, context: Any) -> Iterator[Any]:
        """The devices now, then again at every change, until the kubelet hangs up or the plugin stops."""
        seen = -1
        while True:
            with self._cond:
                while self._version == seen and not self._stopping and context.is_active():
                    self._cond.wait(0.5)
                if self._stopping or not context.is_active():
                    return
                seen, devices = self._version, self._devices
            yield pb.ListAndWatchResponse(devices=[_device(d) for d in devices])

    def GetPreferredAllocation(self, request: Any, context: Any) -> Any:
        """For each container: the must-include devices, then one NUMA node's least shared GPUs."""
        devices = self.devices
        answers = [pb.ContainerPreferredAllocationResponse(deviceIDs=preferred(
            devices, list(r.available_deviceIDs), list(r.must_include_deviceIDs), int(r.allocation_size)))
            for r in request.container_requests]
        return pb.PreferredAllocationResponse(container_responses=answers)

    def Allocate(self, request: Any, context: Any) -> Any:
        """For each container: an allocation record (superseding any older one for the same devices) and the
        answer that names it. Writes files under state_dir."""
        devices = self.devices
        asked = []
        for r in request.container_requests:  # every container checked before any record is written
            ids = tuple(r.devices_ids)
            try:
                asked.append((ids, gpus_of(ids, devices)))
            except KeyError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              f"gpuhook: {self.resource}: device {e.args[0]!r} was never advertised on this node")
        # CDI names a GPU by UUID, else by index (gpuhook's specs have both; a PCI address is not a name); a slice
        # by its own name in CDI and the env alike
        cdi = {d.gpu: d.name or (d.gpu if ":" not in d.gpu else str(d.index)) for d in devices}
        env = {d.gpu: d.name or d.gpu for d in devices}
        return pb.AllocateResponse(container_responses=[self._allocate(ids, gpus, cdi, env) for ids, gpus in asked])

    def PreStartContainer(self, request: Any, context: Any) -> Any:
        """Not asked for (pre_start_required is false); answered empty."""
        return pb.PreStartContainerResponse()

    def _allocate(self, ids: tuple[str, ...], gpus: tuple[str, ...], cdi: dict[str, str], env: dict[str, str]) -> Any:
        k8s = self._config.kubernetes
        now = time.time()
        secret = os.urandom(16).hex()  # the kernel's CSPRNG, as secrets uses (which would load random and hashlib)
        mps_shared = k8s.replicas > 1 and k8s.sharing == "mps" and "mps" in kube_part(self.vendor.NAME).SHARING
        mps = 100 // k8s.replicas if mps_shared else 0
        alloc = Allocation(id=secret, resource=self.resource, vendor=self.vendor.NAME, gpus=gpus, devices=ids,
                           shared=k8s.replicas > 1, created=now, expires=now + k8s.allocation_ttl, mps_threads=mps)
        state_dir = self._config.state_dir
        allocations.save(state_dir, alloc)
        for old in allocations.supersede(state_dir, ids, keep=alloc.id):
            self._say(f"{self.resource}: allocation {old} superseded (the kubelet gave its devices anew)")
        self._say(f"{self.resource}: allocated {', '.join(ids)} as {alloc.id}")
        answer = pb.ContainerAllocateResponse()
        if "annotation" in k8s.allocate_with:
            answer.annotations[f"{PREFIX}{ALLOCATION}"] = alloc.id
        if "env" in k8s.allocate_with:
            answer.envs[self.vendor.ENV_KEY] = ",".join(env[g] for g in gpus)
        if "cdi" in k8s.allocate_with:
            answer.cdi_devices.extend(pb.CDIDevice(name=f"{self.vendor.CDI_KIND}={cdi[g]}") for g in gpus)
        return answer


def _device(d: Device) -> Any:
    health = constants.HEALTHY if d.healthy else constants.UNHEALTHY
    topology = pb.TopologyInfo(nodes=[pb.NUMANode(ID=d.numa)]) if d.numa >= 0 else None
    return pb.Device(ID=d.id, health=health, topology=topology)
