"""The checked-in device plugin API speaks the kubelet's v1beta1 protocol."""

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpuhook.kubernetes.api import constants, deviceplugin_pb2, deviceplugin_pb2_grpc

pb = deviceplugin_pb2


def test_package_and_method_paths() -> None:
    services = pb.DESCRIPTOR.services_by_name
    assert pb.DESCRIPTOR.package == "v1beta1"
    assert sorted(services) == ["DevicePlugin", "Registration"]
    assert [f"/{m.full_name.rsplit('.', 1)[0]}/{m.name}" for m in services["Registration"].methods] == [
        "/v1beta1.Registration/Register"
    ]
    plugin = {m.name: m for m in services["DevicePlugin"].methods}
    assert sorted(f"/{services['DevicePlugin'].full_name}/{name}" for name in plugin) == [
        "/v1beta1.DevicePlugin/Allocate",
        "/v1beta1.DevicePlugin/GetDevicePluginOptions",
        "/v1beta1.DevicePlugin/GetPreferredAllocation",
        "/v1beta1.DevicePlugin/ListAndWatch",
        "/v1beta1.DevicePlugin/PreStartContainer",
    ]
    assert plugin["ListAndWatch"].server_streaming
    assert not plugin["ListAndWatch"].client_streaming
    assert not any(m.server_streaming for name, m in plugin.items() if name != "ListAndWatch")
    assert plugin["Allocate"].input_type.full_name == "v1beta1.AllocateRequest"
    assert plugin["Allocate"].output_type.full_name == "v1beta1.AllocateResponse"


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        ("RegisterRequest", "version", 1),
        ("RegisterRequest", "endpoint", 2),
        ("RegisterRequest", "resource_name", 3),
        ("RegisterRequest", "options", 4),
        ("DevicePluginOptions", "get_preferred_allocation_available", 2),
        ("Device", "ID", 1),
        ("Device", "health", 2),
        ("Device", "topology", 3),
        ("NUMANode", "ID", 1),
        ("AllocateRequest", "container_requests", 1),
        ("ContainerAllocateRequest", "devices_ids", 1),
        ("ContainerPreferredAllocationRequest", "must_include_deviceIDs", 2),
        ("ContainerPreferredAllocationRequest", "allocation_size", 3),
        ("ContainerAllocateResponse", "envs", 1),
        ("ContainerAllocateResponse", "mounts", 2),
        ("ContainerAllocateResponse", "devices", 3),
        ("ContainerAllocateResponse", "annotations", 4),
        ("ContainerAllocateResponse", "cdi_devices", 5),
        ("Mount", "read_only", 3),
        ("DeviceSpec", "permissions", 3),
    ],
)
def test_field_numbers(message: str, field: str, number: int) -> None:
    assert pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[field].number == number


def test_maps_and_scalar_types() -> None:
    car = pb.DESCRIPTOR.message_types_by_name["ContainerAllocateResponse"]
    for name in ("envs", "annotations"):
        entry = car.fields_by_name[name].message_type
        assert entry.GetOptions().map_entry
        assert [f.type for f in entry.fields] == [entry.fields[0].TYPE_STRING] * 2
    numa = pb.DESCRIPTOR.message_types_by_name["NUMANode"].fields_by_name["ID"]
    assert numa.type == numa.TYPE_INT64
    size = pb.DESCRIPTOR.message_types_by_name["ContainerPreferredAllocationRequest"].fields_by_name["allocation_size"]
    assert size.type == size.TYPE_INT32


def test_constants() -> None:
    assert constants.VERSION == "v1beta1"
    assert (constants.HEALTHY, constants.UNHEALTHY) == ("Healthy", "Unhealthy")
    assert constants.KUBELET_SOCKET == "/var/lib/kubelet/device-plugins/kubelet.sock"


class _Plugin(deviceplugin_pb2_grpc.DevicePluginServicer):
    def ListAndWatch(self, request: pb.Empty, context: Any) -> Iterator[pb.ListAndWatchResponse]:
        yield pb.ListAndWatchResponse(
            devices=[
                pb.Device(
                    ID="gpu0",
                    health=constants.HEALTHY,
                    topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=1)]),
                )
            ]
        )

    def Allocate(self, request: pb.AllocateRequest, context: Any) -> pb.AllocateResponse:
        return pb.AllocateResponse(
            container_responses=[
                pb.ContainerAllocateResponse(
                    envs={"GPUHOOK_DEVICES": ",".join(creq.devices_ids)},
                    devices=[
                        pb.DeviceSpec(container_path=f"/dev/{d}", host_path=f"/dev/{d}", permissions="rw")
                        for d in creq.devices_ids
                    ],
                    cdi_devices=[pb.CDIDevice(name=f"vendor.example/gpu={d}") for d in creq.devices_ids],
                )
                for creq in request.container_requests
            ]
        )


def test_round_trip_over_unix_socket(tmp_path: Path) -> None:
    address = f"unix://{tmp_path / 'plugin.sock'}"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    deviceplugin_pb2_grpc.add_DevicePluginServicer_to_server(_Plugin(), server)
    assert server.add_insecure_port(address) != 0
    server.start()
    try:
        with grpc.insecure_channel(address) as channel:
            stub = deviceplugin_pb2_grpc.DevicePluginStub(channel)
            answer = stub.Allocate(
                pb.AllocateRequest(
                    container_requests=[
                        pb.ContainerAllocateRequest(devices_ids=["gpu0", "gpu1"]),
                        pb.ContainerAllocateRequest(devices_ids=["gpu2"]),
                    ]
                ),
                timeout=5,
            )
            assert [dict(r.envs) for r in answer.container_responses] == [
                {"GPUHOOK_DEVICES": "gpu0,gpu1"},
                {"GPUHOOK_DEVICES": "gpu2"},
            ]
            first = answer.container_responses[0]
            assert [(d.host_path, d.permissions) for d in first.devices] == [("/dev/gpu0", "rw"), ("/dev/gpu1", "rw")]
            assert [c.name for c in first.cdi_devices] == ["vendor.example/gpu=gpu0", "vendor.example/gpu=gpu1"]

            stream = stub.ListAndWatch(pb.Empty(), timeout=5)
            update = next(stream)
            stream.cancel()
            assert [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in update.devices] == [
                ("gpu0", "Healthy", [1])
            ]
    finally:
        server.stop(grace=None)
