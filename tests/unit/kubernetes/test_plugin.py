"""The DevicePlugin service called directly, with a fake gRPC context and a temporary state_dir."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpuhook.apply import allocations
from gpuhook.config import Config, from_table
from gpuhook.edits import DeviceNode
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.kubernetes.api import constants
from gpuhook.kubernetes.api import deviceplugin_pb2 as pb
from gpuhook.kubernetes.device_plugin.devices import Device, advertise
from gpuhook.kubernetes.device_plugin.server import ResourcePlugin
from gpuhook.vendors.registry import get

U = [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(3)]
KEY = "gpuhook.dev/allocation"
INV = VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=tuple(
    Gpu(vendor="nvidia", index=i, uuid=U[i], pci=f"0000:{0x10 + i:02x}:00.0", model="H100",
        nodes=(DeviceNode(path=f"/dev/nvidia{i}", kind="c", major=195, minor=i, mode=0o666, uid=0, gid=0),
               )) for i in range(3)), shared_nodes=())
NUMA = {"0000:10:00.0": 0, "0000:11:00.0": 1}


class Aborted(Exception):
    """What the fake context raises, as grpc's does."""


class FakeContext:
    def __init__(self) -> None:
        self.active = True

    def is_active(self) -> bool:
        return self.active

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class Plugin:
    """A ResourcePlugin for NVIDIA with its state_dir and what it said."""

    def __init__(self, tmp_path: Path, replicas: int = 1, **kubernetes: Any) -> None:
        self.state = str(tmp_path / "state")
        self.config: Config = from_table({"state_dir": self.state,
                                          "kubernetes": {"replicas": replicas, **kubernetes}}, "/x")
        self.said: list[str] = []
        self.service = ResourcePlugin(get("nvidia"), self.config, self.said.append)
        self.service.update(advertise(INV, replicas, NUMA))

    def allocate(self, *containers: list[str]) -> list[Any]:
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=c)
                                                         for c in containers])
        return list(self.service.Allocate(request, FakeContext()).container_responses)


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    return Plugin(tmp_path)


def test_allocate_writes_record_and_answers_with_annotation(plugin: Plugin) -> None:
    (answer,) = plugin.allocate([U[1]])
    alloc_id = answer.annotations[KEY]
    assert len(alloc_id) == 32 and set(alloc_id) <= set("0123456789abcdef")
    assert dict(answer.annotations) == {KEY: alloc_id}
    assert (dict(answer.envs), list(answer.cdi_devices), list(answer.devices), list(answer.mounts)) == ({}, [], [], [])
    rec = allocations.load(plugin.state, alloc_id)
    assert rec is not None
    assert (rec.resource, rec.vendor, rec.gpus, rec.devices, rec.shared) == (
        "nvidia.com/gpu", "nvidia", (U[1],), (U[1],), False)
    assert rec.expires - rec.created == 3600
    assert (rec.claimed_by, rec.container) == ("", "")
    path = os.path.join(plugin.state, "allocations", f"{alloc_id}.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert plugin.said == [f"nvidia.com/gpu: allocated {U[1]} as {alloc_id}"]


def test_allocation_ttl_from_config(tmp_path: Path) -> None:
    p = Plugin(tmp_path, allocation_ttl=120)
    (answer,) = p.allocate([U[0]])
    rec = allocations.load(p.state, answer.annotations[KEY])
    assert rec is not None and rec.expires - rec.created == 120


def test_allocate_with_annotation_env_and_cdi(tmp_path: Path) -> None:
    p = Plugin(tmp_path, allocate_with=["annotation", "env", "cdi"])
    (answer,) = p.allocate([U[2], U[0]])
    assert list(answer.annotations) == [KEY]
    assert dict(answer.envs) == {"NVIDIA_VISIBLE_DEVICES": f"{U[2]},{U[0]}"}
    assert [d.name for d in answer.cdi_devices] == [f"nvidia.com/gpu={U[2]}", f"nvidia.com/gpu={U[0]}"]
    rec = allocations.load(p.state, answer.annotations[KEY])
    assert rec is not None and rec.gpus == (U[2], U[0])


def test_allocate_with_env_only_still_writes_the_record(tmp_path: Path) -> None:
    p = Plugin(tmp_path, allocate_with=["env"])
    (answer,) = p.allocate([U[0]])
    assert (dict(answer.annotations), dict(answer.envs)) == ({}, {"NVIDIA_VISIBLE_DEVICES": U[0]})
    assert [r.gpus for r in allocations.all_records(p.state)] == [(U[0],)]


def test_second_allocate_of_a_claimed_device_supersedes(plugin: Plugin) -> None:
    (first,) = plugin.allocate([U[0], U[1]])
    (other,) = plugin.allocate([U[2]])
    old, kept = (a.annotations[KEY] for a in (first, other))
    allocations.claim(plugin.state, old, "pod-a/main", "c1", time.time())  # its container started, then ended
    (second,) = plugin.allocate([U[1]])
    new = second.annotations[KEY]
    assert allocations.load(plugin.state, old) is None
    assert {r.id for r in allocations.all_records(plugin.state)} == {kept, new}
    assert f"nvidia.com/gpu: allocation {old} superseded (the kubelet gave its devices anew)" in plugin.said


def test_init_and_app_containers_of_one_pod_both_keep_their_allocation(plugin: Plugin) -> None:
    """What a real kubelet does at a pod's admission when its init container and its app container both ask for
    one GPU: Allocate for each, with the same device, before either runs. Each then claims its own record."""
    (init,) = plugin.allocate([U[0]])
    (app,) = plugin.allocate([U[0]])
    now = time.time()
    first = allocations.claim(plugin.state, init.annotations[KEY], "pod-a/init", "c-init", now)
    second = allocations.claim(plugin.state, app.annotations[KEY], "pod-a/main", "c-main", now)
    assert first.gpus == second.gpus == (U[0],)
    assert not any("superseded" in line for line in plugin.said)


def test_one_request_for_two_containers(plugin: Plugin) -> None:
    a, b = plugin.allocate([U[0]], [U[1]])
    assert a.annotations[KEY] != b.annotations[KEY]
    assert sorted(r.gpus for r in allocations.all_records(plugin.state)) == [(U[0],), (U[1],)]


def test_unknown_device_aborts(plugin: Plugin) -> None:
    request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["GPU-nope"])])
    with pytest.raises(Aborted) as e:
        plugin.service.Allocate(request, FakeContext())
    code, details = e.value.args
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "gpuhook: nvidia.com/gpu: device 'GPU-nope' was never advertised on this node"
    assert allocations.all_records(plugin.state) == []


def test_replicas_share_and_dedupe(tmp_path: Path) -> None:
    p = Plugin(tmp_path, replicas=2, allocate_with=["annotation", "env"])
    (answer,) = p.allocate([f"{U[0]}::0", f"{U[0]}::1"])
    assert dict(answer.envs) == {"NVIDIA_VISIBLE_DEVICES": U[0]}
    rec = allocations.load(p.state, answer.annotations[KEY])
    assert rec is not None
    assert (rec.gpus, rec.devices, rec.shared) == ((U[0],), (f"{U[0]}::0", f"{U[0]}::1"), True)


def test_shares_of_one_gpu_do_not_supersede_each_other(tmp_path: Path) -> None:
    p = Plugin(tmp_path, replicas=2)
    (a,) = p.allocate([f"{U[0]}::0"])
    (b,) = p.allocate([f"{U[0]}::1"])
    assert {r.id for r in allocations.all_records(p.state)} == {a.annotations[KEY], b.annotations[KEY]}


def _listed(response: Any) -> list[tuple[str, str, list[int]]]:
    return [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in response.devices]


def test_list_and_watch_streams_changes(plugin: Plugin) -> None:
    ctx = FakeContext()
    stream: Iterator[Any] = plugin.service.ListAndWatch(pb.Empty(), ctx)
    assert _listed(next(stream)) == [(U[0], constants.HEALTHY, [0]), (U[1], constants.HEALTHY, [1]),
                                     (U[2], constants.HEALTHY, [])]
    changed = advertise(VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=INV.gpus[:2],
                                        shared_nodes=()), 1, NUMA, plugin.service.devices)
    assert plugin.service.update(changed)
    assert not plugin.service.update(changed)
    assert _listed(next(stream))[2] == (U[2], constants.UNHEALTHY, [])
    assert plugin.service.devices == changed
    plugin.service.stop()
    with pytest.raises(StopIteration):
        next(stream)


def test_device_without_numa_has_no_topology(plugin: Plugin) -> None:
    listed = next(plugin.service.ListAndWatch(pb.Empty(), FakeContext())).devices
    assert [d.HasField("topology") for d in listed] == [True, True, False]


def test_list_and_watch_wakes_on_update_and_stop(plugin: Plugin) -> None:
    stream: Iterator[Any] = plugin.service.ListAndWatch(pb.Empty(), FakeContext())
    next(stream)
    got: list[Any] = []

    def drain() -> None:
        for response in stream:
            got.append(response)

    waiter = threading.Thread(target=drain, daemon=True)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and got == []  # nothing changed: the stream waits
    plugin.service.update((Device(id="x", gpu="x", index=0, numa=-1, healthy=False, why="gone"),))
    for _ in range(50):
        if got:
            break
        waiter.join(0.1)
    assert [_listed(r) for r in got] == [[("x", constants.UNHEALTHY, [])]]
    plugin.service.stop()
    waiter.join(5)
    assert not waiter.is_alive()


def test_list_and_watch_ends_when_the_kubelet_hangs_up(plugin: Plugin) -> None:
    ctx = FakeContext()
    stream: Iterator[Any] = plugin.service.ListAndWatch(pb.Empty(), ctx)
    next(stream)
    ctx.active = False
    with pytest.raises(StopIteration):
        next(stream)


def test_preferred_allocation_and_options(plugin: Plugin) -> None:
    request = pb.PreferredAllocationRequest(container_requests=[
        pb.ContainerPreferredAllocationRequest(available_deviceIDs=U, must_include_deviceIDs=[U[1]],
                                               allocation_size=2)])
    answer = plugin.service.GetPreferredAllocation(request, FakeContext())
    assert [list(r.deviceIDs) for r in answer.container_responses] == [[U[1], U[2]]]
    options = plugin.service.GetDevicePluginOptions(pb.Empty(), FakeContext())
    assert (options.pre_start_required, options.get_preferred_allocation_available) == (False, True)


def test_resource_name_from_config(tmp_path: Path) -> None:
    p = Plugin(tmp_path, resources={"nvidia": "example.com/h100"}, allocate_with=["cdi"])
    (answer,) = p.allocate([U[0]])
    assert p.service.resource == "example.com/h100"
    assert [d.name for d in answer.cdi_devices] == [f"nvidia.com/gpu={U[0]}"]
    assert [r.resource for r in allocations.all_records(p.state)] == ["example.com/h100"]


def test_cdi_names_a_gpu_without_uuid_by_its_index(tmp_path: Path) -> None:
    """A GPU known by its PCI address (no UUID) is `<kind>=<index>` in CDI: gpuhook's specs name GPUs by UUID
    and by index, never by PCI address."""
    inv = VendorInventory(vendor="amd", driver_version="6.7.0", gpus=(Gpu(vendor="amd", index=0, uuid="",
                                                                          pci="0000:80:00.0", model="MI300X", nodes=()),
                                           Gpu(vendor="amd", index=1, uuid="0x5a1e000000000001", pci="0000:81:00.0",
                                               model="MI300X", nodes=())), shared_nodes=())
    config = from_table({"state_dir": str(tmp_path / "state"), "kubernetes": {"allocate_with": ["cdi"]}}, "/x")
    service = ResourcePlugin(get("amd"), config, lambda _: None)
    service.update(advertise(inv, 1, {}))
    request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["0000:80:00.0",
                                                                                              "0x5a1e000000000001"])])
    answer = service.Allocate(request, FakeContext()).container_responses[0]
    assert [d.name for d in answer.cdi_devices] == ["amd.com/gpu=0", "amd.com/gpu=0x5a1e000000000001"]
