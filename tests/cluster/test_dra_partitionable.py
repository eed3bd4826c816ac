"""Partitions made on demand (`[kubernetes] partitions = "dynamic"`, KEP-4815) on the one-node cluster with
containerd 2: one simulated H100, MIG capable with MIG mode off and no MIG device, and one MI300X in SPX. The driver
publishes the H100 whole and as every MIG profile at every placement over its memory-slice counters; the real
scheduler allocates a profile, the driver makes that MIG device at NodePrepareResources, the container sees exactly
it, a claim that would overlap stays Pending, and deleting the pod removes the MIG device (and lets the overlapping
claim run). The MI300X is every partition of every mode over its XCDs: a claim for a CPX partition puts the GPU in
CPX and gets that partition; one for a DPX partition is refused at preparation, in its pod's events, until the CPX
claim goes and the GPU is SPX again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuhook.testing.simulate import HostSpec
from gpuhook.vendors.nvidia import sim_mig
from tests.e2e import conftest

from .control_plane import control_plane
from .node import components, node, wait_for
from .test_cluster import _ready, _unschedulable
from .test_dra import Dra, _events, driver_argv, exactly

HOST = HostSpec(nvidia=1, amd=1, mig_capable=True)
SEE = "ls /dev | grep -E '^nvidia[0-9]+$'; ls /dev/nvidia-caps | sed 's/^/CAP /'; sleep 600"
MIG = 1 + 7 + 4 + 3 + 2 + 1 + 1  # the H100 whole; 1g.10gb x7, 1g.20gb x4, 2g.20gb x3, 3g.40gb x2, 4g, 7g
OFFERED = MIG + 2 * (1 + 2 + 4 + 8)  # and the MI300X's SPX, DPX, QPX and CPX partitions, with NPS1 and NPS4


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Iterator[Dra]:
    built = components()
    d = tmp_path_factory.mktemp("dra-partitions")
    specs = d / "cdi"
    specs.mkdir()
    with control_plane(d / "plane", built) as plane, \
            node(d / "node", base_rootfs, conftest.SHIM, conftest.GPUHOOK, plane, str(built / "containerd"),
                 host_spec=HOST, cdi_dirs=(str(specs),), kubernetes='partitions = "dynamic"\n') as n:
        n.stop_plugin()
        argv = driver_argv(plane, n, d, specs)
        cluster = Dra(plane, n, specs, argv, {**os.environ, "GPUHOOK_CONFIG": n.env.gpuhook_config})
        cluster.start_driver()
        try:
            wait_for(lambda: _ready(plane) and len(cluster.devices()) == OFFERED, 90,
                     lambda: f"devices {sorted(cluster.devices())}\n{cluster.log.read_text()}\n"
                     f"{n.kubelet_log.read_text()[-3000:]}")
            wait_for(lambda: "registered with the kubelet" in cluster.log.read_text(), 30,
                     lambda: f"{cluster.log.read_text()}\n{n.kubelet_log.read_text()[-3000:]}")
            yield cluster
        finally:
            plane.kubectl("delete", "pods", "--all", "--all-namespaces", "--wait", "--timeout", "60s", check=False,
                          timeout=90)
            cluster.stop_driver()


def _gis(cluster: Dra) -> list[str]:
    """The GPU instances the simulated driver's procfs lists on GPU 0."""
    mig = Path(cluster.node.env.host_root) / "proc/driver/nvidia/capabilities/gpu0/mig"
    return sorted(p.name for p in mig.iterdir() if p.name.startswith("gi")) if mig.is_dir() else []


def test_the_gpu_is_published_over_shared_counters(dynamic: Dra) -> None:
    """A slice of CounterSets beside the devices' (one pool of two slices); the whole GPU takes every memory slice,
    a 3g.40gb at placement 4 the upper four."""
    slices = dynamic.slices()
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2} and len(slices) == 2
    (sets,) = [s["spec"]["sharedCounters"] for s in slices if "sharedCounters" in s["spec"]]
    assert sorted(sets, key=lambda c: str(c["name"])) == [
        {"name": "amdgpu-0000-80-00-0-counters", "counters": {f"xcd-{n}": {"value": "1"} for n in range(8)}},
        {"name": "gpu-0-counters", "counters": {f"memory-slice-{n}": {"value": "1"} for n in range(8)}}]
    devices = dynamic.devices()
    whole = devices["gpu-0"]["consumesCounters"][0]
    assert whole["counterSet"] == "gpu-0-counters" and len(whole["counters"]) == 8
    three = devices["gpu-0-mig-3g40gb-p4"]
    assert sorted(three["consumesCounters"][0]["counters"]) == [f"memory-slice-{n}" for n in range(4, 8)]
    assert three["attributes"]["profile"] == {"string": "3g.40gb"} and three["attributes"]["type"] == {"string": "mig"}
    assert _gis(dynamic) == []  # nothing is made before a claim asks


def test_a_profile_is_made_for_its_claim_an_overlapping_claim_waits_and_the_pod_going_removes_it(
        dynamic: Dra) -> None:
    dynamic.claim_pod("slice", exactly("mig.gpu.gpuhook.dev", selectors=(
        "device.attributes['gpu.gpuhook.dev'].profile == '3g.40gb'",)), SEE)
    try:
        wait_for(lambda: len(dynamic.logs_so_far("slice", "main")) >= 3, 90,
                 lambda: f"{dynamic.status('slice')}\n{dynamic.log.read_text()[-3000:]}")
        seen = dynamic.logs_so_far("slice", "main")
        (device,) = dynamic.allocated("slice")
        assert device in ("gpu-0-mig-3g40gb-p0", "gpu-0-mig-3g40gb-p4"), device
        assert _gis(dynamic) == ["gi1"]  # made at prepare: the stub's first GPU instance
        assert seen[0] == "nvidia0" and sorted(s for s in seen if s.startswith("CAP ")) == sorted(
            [f"CAP nvidia-cap{sim_mig.minor(0, 1)}", f"CAP nvidia-cap{sim_mig.minor(0, 1, 0)}"]), seen
        assert len(dynamic.records()) == 1

        dynamic.claim_pod("whole", exactly("nvidia.gpu.gpuhook.dev"), "ls /dev | grep -E '^nvidia[0-9]+$'")
        wait_for(lambda: _unschedulable(dynamic, "whole") != "", 60, lambda: str(dynamic.status("whole")))
        assert dynamic.status("whole")["phase"] == "Pending"
    finally:
        dynamic.delete("slice")
    wait_for(lambda: _gis(dynamic) == [], 60, lambda: f"left {_gis(dynamic)}\n{dynamic.log.read_text()[-3000:]}")
    try:
        assert dynamic.logs("whole", "main", timeout=120) == ["nvidia0"]  # the GPU whole, now that it is free
    finally:
        dynamic.delete("whole")
    wait_for(lambda: not dynamic.records() and not list((dynamic.state / "partitions").glob("*.json")), 60,
             lambda: f"left {dynamic.records()}\n{dynamic.log.read_text()[-2000:]}")


def _mode(cluster: Dra) -> str:
    return (Path(cluster.node.env.host_root) / "sys/bus/pci/devices/0000:80:00.0/current_compute_partition"
            ).read_text().strip()


def _partition(profile: str) -> dict[str, object]:
    return exactly("partition.gpu.gpuhook.dev", selectors=(
        f"device.attributes['gpu.gpuhook.dev'].partitionProfile == '{profile}'",))


def test_an_amd_mode_is_set_for_its_claim_and_a_claim_for_another_mode_waits_until_it_goes(dynamic: Dra) -> None:
    assert _mode(dynamic) == "SPX"
    dynamic.claim_pod("cpx", _partition("cpx_nps1"), "ls /dev/dri | grep render; sleep 600")
    try:
        wait_for(lambda: len(dynamic.logs_so_far("cpx", "main")) >= 1, 120,
                 lambda: f"{_events(dynamic, 'cpx')}\n{dynamic.log.read_text()[-3000:]}")
        (device,) = dynamic.allocated("cpx")
        number = int(device.rpartition("-")[2])
        assert device == f"amdgpu-0000-80-00-0-cpx-nps1-{number}"
        assert dynamic.logs_so_far("cpx", "main") == [f"renderD{128 + number}"]  # that partition, made for it
        assert _mode(dynamic) == "CPX"
        dynamic.claim_pod("dpx", _partition("dpx_nps1"), "ls /dev/dri | grep render")
        wanted = "is in CPX NPS1 for other claims"
        wait_for(lambda: wanted in _events(dynamic, "dpx"), 90, lambda: _events(dynamic, "dpx"))
        assert _mode(dynamic) == "CPX"
    finally:
        dynamic.delete("cpx")
    try:
        seen = dynamic.logs("dpx", "main", timeout=240)  # the kubelet prepares it again once the GPU is free
        (dpx,) = dynamic.allocated("dpx")
        assert seen == [f"renderD{128 + int(dpx.rpartition('-')[2])}"] and _mode(dynamic) == "DPX", seen
    finally:
        dynamic.delete("dpx")
    wait_for(lambda: _mode(dynamic) == "SPX", 60, lambda: f"{_mode(dynamic)}\n{dynamic.log.read_text()[-2000:]}")
