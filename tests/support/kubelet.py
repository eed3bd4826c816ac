"""The kubelet's side of the device plugin API, for tests and for trying a plugin on a host without Kubernetes:
a Registration server on kubelet.sock that records every registration, and a client of a registered plugin
(its ListAndWatch stream kept in the background, Allocate, GetPreferredAllocation), over the real protocol.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from gpuhook.kubernetes.api import constants, deviceplugin_pb2_grpc
from gpuhook.kubernetes.api import deviceplugin_pb2 as pb


class _Registration(deviceplugin_pb2_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self._kubelet = kubelet

    def Register(self, request: Any, context: Any) -> Any:
        """Record the registration (the kubelet checks the version the same way)."""
        if request.version != constants.VERSION:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version!r}")
        with self._kubelet.changed:
            self._kubelet.registrations.append(request)
            self._kubelet.changed.notify_all()
        return pb.Empty()


class FakeKubelet:
    """kubelet.sock in `directory`; `registrations` lists every RegisterRequest, newest last."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.socket = os.path.join(directory, constants.KUBELET_SOCKET_NAME)
        self.registrations: list[Any] = []
        self.changed = threading.Condition()
        self._server: grpc.Server | None = None

    def start(self) -> FakeKubelet:
        """Serve Registration on kubelet.sock (a fresh socket file). Creates the socket."""
        os.makedirs(self.directory, exist_ok=True)
        if os.path.lexists(self.socket):
            os.unlink(self.socket)
        server = grpc.server(ThreadPoolExecutor(max_workers=2))
        deviceplugin_pb2_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server
        return self

    def restart(self, remove_plugin_sockets: bool = True) -> None:
        """What a kubelet restart does: its socket is recreated, and the plugins' sockets removed."""
        self.stop()
        if remove_plugin_sockets:
            for name in os.listdir(self.directory):
                if name.endswith(".sock") and name != constants.KUBELET_SOCKET_NAME:
                    os.unlink(os.path.join(self.directory, name))
        self.start()

    def stop(self) -> None:
        """Stop serving and remove kubelet.sock."""
        if self._server is not None:
            self._server.stop(0).wait(2)
            self._server = None
        if os.path.lexists(self.socket):
            os.unlink(self.socket)

    def wait_registered(self, resource: str, count: int = 1, timeout: float = 10.0) -> Any:
        """The `count`-th registration of `resource`; AssertionError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                got = [r for r in self.registrations if r.resource_name == resource]
                if len(got) >= count:
                    return got[count - 1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{resource} registered {len(got)} times, not {count}, in {timeout} s")
                self.changed.wait(left)

    def plugin(self, registration: Any) -> PluginClient:
        """A client of the plugin a registration names (its endpoint, in this directory)."""
        return PluginClient(os.path.join(self.directory, registration.endpoint))


class PluginClient:
    """The kubelet's calls into one plugin; `devices` is the latest ListAndWatch answer (id -> health)."""

    def __init__(self, socket: str) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.stub = deviceplugin_pb2_grpc.DevicePluginStub(self.channel)
        self.devices: dict[str, str] = {}
        self.topology: dict[str, list[int]] = {}
        self.updates = 0
        self._changed = threading.Condition()
        self._stream: Any = None
        self._thread: threading.Thread | None = None

    def watch(self) -> PluginClient:
        """Open ListAndWatch and follow it in a thread."""
        self._stream = self.stub.ListAndWatch(pb.Empty())
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()
        return self

    def _follow(self) -> None:
        try:
            for answer in self._stream:
                with self._changed:
                    self.devices = {d.ID: d.health for d in answer.devices}
                    self.topology = {d.ID: [n.ID for n in d.topology.nodes] for d in answer.devices}
                    self.updates += 1
                    self._changed.notify_all()
        except grpc.RpcError:
            pass

    def wait_for(self, check: Any, timeout: float = 10.0) -> dict[str, str]:
        """The devices once `check(devices)` holds; AssertionError with the last answer after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not check(self.devices):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"ListAndWatch did not get there in {timeout} s; last: {self.devices}")
                self._changed.wait(left)
            return dict(self.devices)

    def allocate(self, *containers: list[str]) -> Any:
        """Allocate, one device id list per container, as the kubelet sends it."""
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)
                                                         for ids in containers])
        return self.stub.Allocate(request, timeout=10)

    def preferred(self, available: list[str], size: int, must: list[str] | None = None) -> list[str]:
        """GetPreferredAllocation for one container."""
        request = pb.PreferredAllocationRequest(container_requests=[pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=available, must_include_deviceIDs=must or [], allocation_size=size)])
        return list(self.stub.GetPreferredAllocation(request, timeout=10).container_responses[0].deviceIDs)

    def close(self) -> None:
        """Hang up (the stream ends) and close the channel."""
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()
