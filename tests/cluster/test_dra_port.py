"""Claims copied from NVIDIA's and AMD's DRA drivers' docs, on gpuhook's driver and the real scheduler: their
capacity selectors (`device.capacity['gpu.nvidia.com'].memory`, AMD's `cel.bind(cap, device.capacity[...])`), a MIG
capacity, a GpuConfig in NVIDIA's shape mapped or refused by name, a selector that must not match leaving the pod
Pending; then the driver run under NVIDIA's own name with NVIDIA's DeviceClasses, where such a claim runs with
nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuhook.testing.simulate import HostSpec
from tests.e2e import conftest

from .control_plane import ControlPlane, control_plane
from .node import REPO, Node, components, node, wait_for
from .test_cluster import SEE, _ready, _unschedulable
from .test_dra import Dra, _events, driver_argv, exactly

HOST = HostSpec(nvidia=2, amd=2, mig=("1g.10gb", "3g.40gb"), mig_gpus=1, numa_nodes=2)
NVIDIA_API = "resource.nvidia.com/v1beta1"


class Port(Dra):
    """The cluster, with the driver's name its slices are read under."""

    def __init__(self, plane: ControlPlane, n: Node, specs: Path, argv: list[str], env: dict[str, str]) -> None:
        super().__init__(plane, n, specs, argv, env)
        self.driver = "gpu.gpuhook.dev"

    def slices(self) -> list[dict[str, Any]]:
        listed = json.loads(self.plane.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
        return [s for s in listed if s["spec"]["driver"] == self.driver]

    def renamed(self, driver: str) -> None:
        """The driver started again under another name."""
        self.stop_driver()
        self.argv = [*self.argv, "--driver-name", driver]
        self.driver = driver
        self.start_driver()
        wait_for(lambda: len(self.devices()) == 5, 90, lambda: self.log.read_text()[-3000:])


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str, kube_version: str,
         kube_gates_off: tuple[str, ...]) -> Iterator[Port]:
    built = components(kube_version)
    d = tmp_path_factory.mktemp("dra-port")
    specs = d / "cdi"
    specs.mkdir()
    with control_plane(d / "plane", built, kube_gates_off) as plane, \
            node(d / "node", base_rootfs, conftest.SHIM, conftest.GPUHOOK, plane, str(built / "containerd"),
                 host_spec=HOST, cdi_dirs=(str(specs),)) as n:
        n.stop_plugin()
        argv = driver_argv(plane, n, d, specs)
        cluster = Port(plane, n, specs, argv, {**os.environ, "GPUHOOK_CONFIG": n.env.gpuhook_config})
        cluster.start_driver()
        try:
            wait_for(lambda: _ready(plane) and len(cluster.devices()) == 5, 90,
                     lambda: f"devices {sorted(cluster.devices())}\n{cluster.log.read_text()}")
            wait_for(lambda: "registered with the kubelet" in cluster.log.read_text(), 30,
                     lambda: cluster.log.read_text())
            yield cluster
        finally:
            plane.kubectl("delete", "pods", "--all", "--all-namespaces", "--wait", "--timeout", "60s", check=False,
                          timeout=90)
            cluster.stop_driver()


def _runs(port: Port, name: str, claim: dict[str, Any], prefix: str) -> str:
    """The one device the pod's container saw, a /dev name starting with `prefix`."""
    port.claim_pod(name, claim, SEE)
    try:
        seen = port.logs(name, "main")
        assert len(seen) == 1 and seen[0].startswith(prefix), (seen, port.log.read_text()[-2000:])
        return seen[0]
    finally:
        port.delete(name)


def test_nvidias_documented_memory_selector_selects_a_whole_h100(port: Port) -> None:
    """NVIDIA's docs' capacity selector, only the class changed; the GPU not in MIG mode is gpu-1."""
    claim = exactly("nvidia.gpu.gpuhook.dev", selectors=(
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].brand == 'Tesla'"))
    assert _runs(port, "nv-memory", claim, "nvidia") == "nvidia1"


def test_amds_documented_cel_bind_selects_an_amd_gpu(port: Port) -> None:
    claim = exactly("amd.gpu.gpuhook.dev", selectors=(
        'cel.bind(cap, device.capacity["gpu.amd.com"], has(cap.memory) && '
        'cap.memory.compareTo(quantity("64Gi")) >= 0 && cap.computeUnits.compareTo(quantity("256")) >= 0)',
        'device.attributes["gpu.amd.com"].type == "amdgpu"'))
    _runs(port, "amd-bind", claim, "renderD")


def test_a_mig_device_by_nvidias_mig_capacities(port: Port) -> None:
    """The 3g.40gb MIG device by its multiprocessors and decoders (the simulator's H100 figures)."""
    port.claim_pod("mig-sm", exactly("mig.gpu.gpuhook.dev", selectors=(
        "device.capacity['gpu.nvidia.com'].multiprocessors.compareTo(quantity('32')) >= 0",
        "device.capacity['gpu.nvidia.com'].decoders.compareTo(quantity('3')) >= 0")), SEE)
    try:
        assert port.logs("mig-sm", "main") == ["nvidia0"]
        assert port.allocated("mig-sm") == ["gpu-0-mig-3g40gb-2-0"]
    finally:
        port.delete("mig-sm")


def test_an_80gi_selector_matches_no_h100_80gb_and_leaves_the_pod_pending(port: Port) -> None:
    """NVML reports an H100 80GB's memory as 79.65 GiB: `>= 80Gi` matches none of them."""
    port.claim_pod("eighty", exactly("nvidia.gpu.gpuhook.dev", selectors=(
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0",)), SEE)
    try:
        wait_for(lambda: "cannot allocate all claims" in _unschedulable(port, "eighty"), 60,
                 lambda: json.dumps(port.status("eighty")))
        assert port.status("eighty")["phase"] == "Pending"
    finally:
        port.delete("eighty")


def _nvidia_config(driver: str, **sharing: Any) -> list[dict[str, Any]]:
    return [{"opaque": {"driver": driver, "parameters": {"apiVersion": NVIDIA_API, "kind": "GpuConfig",
                                                          "sharing": sharing}}}]


def test_a_gpuconfig_in_nvidias_shape_is_mapped_or_refused_by_name(port: Port) -> None:
    """Addressed to gpu.nvidia.com, as NVIDIA's docs write it: TimeSlicing is the Default compute mode for the
    claim (in its record); an interval gpuhook cannot set fails the preparation with gpuhook's line."""
    port.claim_pod("ts", exactly("nvidia.gpu.gpuhook.dev", config=_nvidia_config(
        "gpu.nvidia.com", strategy="TimeSlicing", timeSlicingConfig={"interval": "Default"})), SEE + "; sleep 30")
    try:
        wait_for(lambda: port.logs_so_far("ts", "main"), 90, lambda: json.dumps(port.status("ts")))
        records = " ".join(p.read_text() for p in (port.state / "claims").glob("*.json"))
        assert "compute-mode" in records and "default" in records, records
    finally:
        port.delete("ts")
    port.claim_pod("ts-long", exactly("nvidia.gpu.gpuhook.dev", config=_nvidia_config(
        "gpu.nvidia.com", strategy="TimeSlicing", timeSlicingConfig={"interval": "Long"})), SEE)
    try:
        wanted = "gpuhook leaves the driver's time slice as it is"
        wait_for(lambda: wanted in _events(port, "ts-long"), 60, lambda: _events(port, "ts-long"))
        assert port.status("ts-long")["phase"] == "Pending"
    finally:
        port.delete("ts-long")


def test_under_nvidias_driver_name_a_claim_from_its_docs_runs_unchanged(port: Port) -> None:
    """The driver as the chart's dra.driverName gpu.nvidia.com, with the DeviceClasses the chart renders under that
    name (gpu.nvidia.com and mig.nvidia.com among them, as NVIDIA's chart names its own): NVIDIA's claim, class and
    config as its docs write them."""
    port.renamed("gpu.nvidia.com")
    rendered = subprocess.run([str(components() / "helm"), "template", "g", str(REPO / "packaging/helm/gpuhook"),
                               "--set", "dra.enabled=true", "--set", "devicePlugin.enabled=false",
                               "--set", "dra.driverName=gpu.nvidia.com"],
                              capture_output=True, text=True, check=True, timeout=60).stdout
    classes = [o for o in yaml.safe_load_all(rendered) if o and o["kind"] == "DeviceClass"]
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= {c["metadata"]["name"] for c in classes}
    port.plane.apply(*classes)
    claim = exactly("gpu.nvidia.com", selectors=(
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",),
        config=_nvidia_config("gpu.nvidia.com", strategy="TimeSlicing"))
    assert _runs(port, "nv-own", claim, "nvidia") == "nvidia1"
    mig = exactly("mig.nvidia.com", selectors=("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",))
    assert _runs(port, "nv-mig", mig, "nvidia") == "nvidia0"
    device = port.devices()["gpu-1"]
    assert "gpu.nvidia.com/memory" not in device["capacity"] and "memory" in device["capacity"]
