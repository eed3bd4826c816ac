"""Claims written for NVIDIA's and AMD's own DRA drivers, on gpuhook's: the attributes and capacities published
under their domains (the exact JSON, from simulated hosts), what is left out past the API's 32 fields, and their
opaque configurations mapped to gpuhook's keys or refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhook.edits import DeviceNode
from gpuhook.errors import KubernetesError
from gpuhook.host.inventory import Gpu
from gpuhook.host.numa import numa_node
from gpuhook.host.root import Root
from gpuhook.kubernetes.dra.config import tuning_by_request
from gpuhook.kubernetes.dra.devices import MAX_FIELDS, device_json, pcie_root
from gpuhook.kubernetes.dra.ported import AMD_API, NVIDIA_API
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.contract import DraDevice
from gpuhook.vendors.discover import discover, identified
from gpuhook.vendors.registry import kubernetes as kube_part

OURS = "gpu.gpuhook.dev"
H100 = "NVIDIA H100 80GB HBM3"
H100_BYTES = "85520809984"  # what NVML reports of an H100 80GB: 79.65 GiB, under 80Gi


def _published(tmp_path: Path, spec: HostSpec, driver: str = OURS) -> dict[str, dict[str, Any]]:
    host = str(tmp_path / "host")
    build_host(host, spec)
    root = Root(host)
    out = {}
    for inv in identified(root, discover(root)).vendors:
        for d in kube_part(inv.vendor).dra_devices(inv, root):
            body, dropped = device_json(d, numa_node(root, d.gpu.pci), pcie_root(root, d.gpu.pci), 1, driver)
            assert len(body["attributes"]) + len(body.get("capacity", {})) <= MAX_FIELDS
            out[d.name] = {**body, "dropped": dropped}
    return out


def test_an_nvidia_gpu_carries_every_attribute_and_capacity_of_nvidias_driver_under_its_domain(
        tmp_path: Path) -> None:
    gpu = _published(tmp_path, HostSpec(nvidia=2, numa_nodes=2))["gpu-1"]
    uuid = {"string": "GPU-00000001-5a1e-4000-8000-0000d00d0001"}
    facts = {"productName": {"string": H100}, "brand": {"string": "Tesla"}, "architecture": {"string": "Hopper"},
             "cudaComputeCapability": {"version": "9.0.0"}, "driverVersion": {"version": "550.54.15"},
             "cudaDriverVersion": {"version": "12.4.0"}, "uuid": uuid}
    assert gpu == {
        "name": "gpu-1", "dropped": (),
        "attributes": {"type": {"string": "gpu"}, "vendor": {"string": "nvidia"}, "index": {"int": 1}, **facts,
                       "gpu.nvidia.com/type": {"string": "gpu"}, **{f"gpu.nvidia.com/{k}": v for k, v in facts.items()},
                       "resource.kubernetes.io/pciBusID": {"string": "0000:11:00.0"},
                       "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
                       "resource.kubernetes.io/numaNode": {"int": 1}},
        "capacity": {"memory": {"value": H100_BYTES}, "gpu.nvidia.com/memory": {"value": H100_BYTES}}}


def test_a_mig_device_carries_nvidias_mig_capacities_and_fits_the_apis_32_fields(tmp_path: Path) -> None:
    devices = _published(tmp_path, HostSpec(nvidia=1, mig=("1g.10gb", "3g.40gb"), numa_nodes=2))
    small, big = devices["gpu-0-mig-1g10gb-1-0"], devices["gpu-0-mig-3g40gb-2-0"]
    capacity = {k.removeprefix("gpu.nvidia.com/"): v["value"] for k, v in small["capacity"].items()
                if k.startswith("gpu.nvidia.com/")}
    assert capacity == {"multiprocessors": "16", "copyEngines": "1", "decoders": "1", "encoders": "0",
                        "jpegEngines": "1", "ofaEngines": "0", "memory": "10468982784"}
    assert {k: v["value"] for k, v in big["capacity"].items() if not k.startswith("memory")} == {
        "gpu.nvidia.com/multiprocessors": "48", "gpu.nvidia.com/copyEngines": "3", "gpu.nvidia.com/decoders": "3",
        "gpu.nvidia.com/encoders": "0", "gpu.nvidia.com/jpegEngines": "3", "gpu.nvidia.com/ofaEngines": "0",
        "gpu.nvidia.com/memory": "42681237504"}
    # 33 with the NUMA node: gpuhook's bare brand goes first, the vendor's domain keeps it
    assert small["dropped"] == ("brand",) and small["attributes"]["gpu.nvidia.com/brand"] == {"string": "Tesla"}
    assert small["attributes"]["gpu.nvidia.com/profile"] == small["attributes"]["profile"] == {"string": "1g.10gb"}
    assert small["attributes"]["gpu.nvidia.com/type"] == {"string": "mig"}


def test_under_nvidias_driver_name_its_names_are_bare_and_published_once(tmp_path: Path) -> None:
    mig = _published(tmp_path, HostSpec(nvidia=1, mig=("7g.80gb",), numa_nodes=2), "gpu.nvidia.com")
    device = mig["gpu-0-mig-7g80gb-1-0"]
    theirs = [k for k in (*device["attributes"], *device["capacity"]) if k.startswith("gpu.")]
    assert theirs == ["gpu.gpuhook.dev/type"]  # gpuhook's own type, which the chart's classes select by
    assert device["attributes"]["type"] == {"string": "mig"} and device["attributes"]["vendor"] == {"string": "nvidia"}
    assert device["attributes"]["gpu.gpuhook.dev/type"] == {"string": "mig"}
    assert {k: v["value"] for k, v in device["capacity"].items()} == {
        "memory": "85630910464", "multiprocessors": "112", "copyEngines": "8", "decoders": "7", "encoders": "0",
        "jpegEngines": "7", "ofaEngines": "1"}
    assert device["dropped"] == ()


def test_an_amd_partition_carries_amds_attributes_and_capacities_under_its_domain(tmp_path: Path) -> None:
    devices = _published(tmp_path, HostSpec(amd=1, amd_partitions="CPX", numa_nodes=2))
    part = devices["amdgpu-135"]
    theirs = {k.removeprefix("gpu.amd.com/"): v for k, v in part["attributes"].items() if k.startswith("gpu.amd.com/")}
    assert theirs == {"type": {"string": "amdgpu-partition"}, "productName": {"string": "AMD_Instinct_MI300X_OAM"},
                      "deviceID": {"string": "0x74a1"}, "architecture": {"string": "gfx942"},
                      "partitionProfile": {"string": "cpx_nps1"}, "driverVersion": {"version": "6.7.0"},
                      "driverVersionFull": {"string": "6.7.0"}, "numaNode": {"int": 0}}
    assert part["attributes"]["type"] == {"string": "partition"}
    assert {k: v["value"] for k, v in part["capacity"].items()} == {
        "memory": "25727860736", "computeUnits": "38", "simdUnits": "152", "gpu.amd.com/memory": "25727860736",
        "gpu.amd.com/computeUnits": "38", "gpu.amd.com/simdUnits": "152"}


def test_under_amds_driver_name_its_type_is_bare_and_gpuhooks_moves_to_its_own_domain(tmp_path: Path) -> None:
    gpu = _published(tmp_path, HostSpec(amd=1, numa_nodes=2), "gpu.amd.com")["amdgpu-128"]
    a = gpu["attributes"]
    assert a["type"] == {"string": "amdgpu"} and a["gpu.gpuhook.dev/type"] == {"string": "gpu"}
    assert a["partitionProfile"] == {"string": "spx_nps1"} and a["numaNode"] == {"int": 0}
    assert set(gpu["capacity"]) == {"memory", "computeUnits", "simdUnits"}


def _mig(slices: int) -> DraDevice:
    node = DeviceNode(path="/dev/nvidia0", kind="c", major=195, minor=0, mode=0o666, uid=0, gid=0)
    gpu = Gpu(vendor="nvidia", index=0, uuid="MIG-0", pci="0000:10:00.0", model=H100, nodes=(node,))
    facts = tuple((name, "x") for name in ("uuid", "parentUUID", "profile", "productName", "brand", "architecture"))
    versions = (("cudaComputeCapability", "9.0"), ("driverVersion", "550.54.15"), ("cudaDriverVersion", "12.4"))
    return DraDevice(name="gpu-0-mig-7g80gb-1-0", gpu=gpu, kind="mig", domain="gpu.nvidia.com",
                     attributes=(("type", "mig"), *facts, *versions), capacity=(("memory", 80 << 30),),
                     versions=tuple(k for k, _ in versions), domain_attributes=(("addressingMode", "HMM"),),
                     domain_capacity=(("multiprocessors", 132), ("copyEngines", 8), ("decoders", 7),
                                      ("encoders", 0), ("jpegEngines", 7), ("ofaEngines", 1),
                                      *((f"memorySlice{n}", 1) for n in range(slices))))


@pytest.mark.parametrize(("driver", "slices", "shares", "dropped"), [
    (OURS, 0, 1, ("brand", "cudaDriverVersion")),
    (OURS, 8, 4, (*(f"gpu.nvidia.com/memorySlice{n}" for n in range(8)), "brand", "cudaDriverVersion",
                  "driverVersion")),
    ("gpu.nvidia.com", 8, 1, ()),
    # 33: 11 of NVIDIA's attributes, gpuhook's type, vendor, index, 3 standard, 16 capacities
    ("gpu.nvidia.com", 8, 4, tuple(f"memorySlice{n}" for n in range(8))),
], ids=["no slices", "slices, shared", "nvidia's name", "nvidia's name, shared"])
def test_past_32_fields_memory_slices_go_first_then_gpuhooks_bare_copies_in_their_order(
        driver: str, slices: int, shares: int, dropped: tuple[str, ...]) -> None:
    body, left = device_json(_mig(slices), 0, "pci0000:00", shares, driver)
    assert left == dropped
    assert len(body["attributes"]) + len(body["capacity"]) <= MAX_FIELDS
    assert {"type", "vendor", "index", "resource.kubernetes.io/numaNode"} <= set(body["attributes"])
    assert "memory" in body["capacity"] and ("shares" in body["capacity"]) == (shares > 1)


def _theirs(api: str, kind: str, driver: str = "gpu.nvidia.com", **fields: Any) -> dict[str, Any]:
    return {"source": "FromClaim", "opaque": {"driver": driver, "parameters": {"apiVersion": api, "kind": kind,
                                                                                **fields}}}


@pytest.mark.parametrize(("entry", "expected"), [
    (_theirs(NVIDIA_API, "GpuConfig"), {}),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "TimeSlicing"}), {"compute-mode": "default"}),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "TimeSlicing", "timeSlicingConfig": {
        "interval": "Default"}}), {"compute-mode": "default"}),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS"}), {"mps": "true"}),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "10Gi", "multiUser": False}}),
     {"mps": "true", "mps-threads": "50", "mps-memory": "10240M"}),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultPinnedDeviceMemoryLimit": "8G"}}), {"mps": "true", "mps-memory": "7629M"}),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultPinnedDeviceMemoryLimit": "1.5Gi"}}), {"mps": "true", "mps-memory": "1536M"}),
    (_theirs(NVIDIA_API, "MigDeviceConfig", sharing={"strategy": "TimeSlicing"}), {}),
    (_theirs(NVIDIA_API, "MigDeviceConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultActiveThreadPercentage": 25}}), {"mps": "true", "mps-threads": "25"}),
    (_theirs(NVIDIA_API, "GpuConfig", driver=OURS, sharing={"strategy": "MPS"}), {"mps": "true"}),
    (_theirs(AMD_API, "GpuConfig", driver="gpu.amd.com"), {}),
], ids=["no sharing", "time-slicing", "time-slicing, default interval", "mps", "mps config", "decimal G",
        "a fraction", "mig time-slicing", "mig mps", "addressed to gpuhook's name", "amd's"])
def test_a_config_written_for_a_vendors_driver_maps_to_gpuhooks_keys(entry: dict[str, Any],
                                                                       expected: dict[str, str]) -> None:
    vendor = "amd" if "amd" in entry["opaque"]["driver"] else "nvidia"
    assert tuning_by_request([entry], OURS, ["gpu"], "team-a/train", {"gpu": {vendor}}) == {"gpu": expected}


def test_under_the_vendors_driver_name_its_config_is_the_drivers_own() -> None:
    entry = _theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS"})
    assert tuning_by_request([entry], "gpu.nvidia.com", ["gpu"]) == {"gpu": {"mps": "true"}}


def test_a_vendors_config_addressed_to_its_driver_applies_to_that_vendors_gpus_only() -> None:
    entry = _theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS"})
    vendors = {"n": {"nvidia"}, "a": {"amd"}, "both": {"nvidia", "amd"}}
    assert tuning_by_request([entry], OURS, ["n", "a", "both"], "", vendors) == {
        "n": {"mps": "true"}, "a": {}, "both": {}}
    assert tuning_by_request([_theirs(AMD_API, "GpuConfig", driver="gpu.nvidia.com")], OURS, ["n"], "",
                             vendors) == {"n": {}}  # AMD's shape addressed to NVIDIA's name: not ours


@pytest.mark.parametrize(("entry", "says"), [
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "TimeSlicing", "timeSlicingConfig": {
        "interval": "Long"}}), "interval='Long': gpuhook leaves the driver's time slice as it is"),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultPerDevicePinnedMemoryLimit": {"0": "1Gi"}}}), "defaultPerDevicePinnedMemoryLimit: gpuhook gives"),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {"multiUser": True}}),
     "multiUser=True"),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultPinnedDeviceMemoryLimit": "512Ki"}}), "expected a quantity of memory"),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultPinnedDeviceMemoryLimit": "9" * 5000}}), "expected a quantity of memory"),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "MPS", "mpsConfig": {
        "defaultActiveThreadPercentage": 0}}), "expected a whole number 1-100"),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "Exclusive"}), "expected TimeSlicing or MPS"),
    (_theirs(NVIDIA_API, "GpuConfig", sharing={"strategy": "TimeSlicing", "mpsConfig": {}}),
     "mpsConfig with strategy TimeSlicing"),
    (_theirs(NVIDIA_API, "MigDeviceConfig", sharing={"strategy": "TimeSlicing", "timeSlicingConfig": {}}),
     "unknown field sharing.'timeSlicingConfig'"),
    (_theirs(NVIDIA_API, "GpuConfig", shareing={}), "unknown field 'shareing'"),
    (_theirs(NVIDIA_API, "VfioDeviceConfig"), "VfioDeviceConfig .* no counterpart .*VFIO passthrough"),
    (_theirs(NVIDIA_API, "ComputeDomainChannelConfig"), "no counterpart .*IMEX"),
    (_theirs(NVIDIA_API, "GpuConfigs"), "gpuhook reads kind GpuConfig, MigDeviceConfig of"),
    (_theirs(AMD_API, "GpuConfig", driver="gpu.amd.com", sharing={}), "unknown field 'sharing': its fields are none"),
    (_theirs(AMD_API, "VfioDeviceConfig", driver="gpu.amd.com"), "no counterpart"),
], ids=["an interval", "per-device limits", "multi-user", "under 1 MiB", "5000 digits", "0 threads",
        "a strategy", "both", "mig interval", "a typo", "vfio", "compute domain", "a kind", "amd field", "amd vfio"])
def test_what_gpuhook_has_no_counterpart_for_is_refused_by_name_in_one_line(entry: dict[str, Any],
                                                                             says: str) -> None:
    vendor = "amd" if "amd" in entry["opaque"]["driver"] else "nvidia"
    with pytest.raises(KubernetesError, match=says) as e:
        tuning_by_request([entry], OURS, ["gpu"], "team-a/train", {"gpu": {vendor}})
    assert str(e.value).startswith("claim team-a/train, config[0] (from the claim): ")
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


class _FakeNvml:
    """The pynvml calls host/nvml.py makes of a MIG GPU on a driver that tells placements and addressing modes."""

    NVML_DEVICE_ADDRESSING_MODE_NONE, NVML_DEVICE_ADDRESSING_MODE_HMM, NVML_DEVICE_ADDRESSING_MODE_ATS = 0, 1, 2

    class NVMLError(Exception):
        pass

    class _Attrs:
        multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount = 60, 3, 3, 0
        sharedJpegCount, sharedOfaCount, memorySizeMB = 3, 0, 40704

    class _Placement:
        start, size = 4, 4

    class _Info:
        placement = None

    def __init__(self, mode: int) -> None:
        self.mode = mode

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        return uuid

    def nvmlDeviceGetAddressingMode(self, handle: str) -> int:
        if self.mode < 0:
            raise self.NVMLError("not supported")
        return self.mode

    def nvmlDeviceGetMigMode(self, handle: str) -> tuple[int, int]:
        return 1, 1

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: str) -> int:
        return 2

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: str, i: int) -> int:
        if i:
            raise self.NVMLError("no MIG device at this index")
        return i

    def nvmlDeviceGetAttributes(self, mig: int) -> Any:
        return self._Attrs()

    def nvmlDeviceGetGpuInstanceId(self, mig: int) -> int:
        return 2

    def nvmlDeviceGetComputeInstanceId(self, mig: int) -> int:
        return 0

    def nvmlDeviceGetGpuInstanceById(self, handle: str, gi: int) -> int:
        return gi

    def nvmlGpuInstanceGetInfo(self, gi: int) -> Any:
        info = self._Info()
        info.placement = self._Placement()
        return info


@pytest.mark.parametrize(("mode", "expected"), [(0, "None"), (1, "HMM"), (2, "ATS"), (7, ""), (-1, "")],
                         ids=["none", "hmm", "ats", "unknown", "not supported"])
def test_the_addressing_mode_is_nvidias_word_or_left_out(mode: int, expected: str) -> None:
    from gpuhook.host.nvml import addressing_mode

    assert addressing_mode(_FakeNvml(mode), "GPU-0") == expected  # type: ignore[arg-type]


def test_a_mig_devices_placement_gives_its_memory_slices() -> None:
    from gpuhook.host.nvml import mig_resources
    from gpuhook.vendors.nvidia.dra import _mig_capacity

    counts = mig_resources(_FakeNvml(1), "GPU-0")  # type: ignore[arg-type]
    assert _mig_capacity(counts[("GPU-0", 2, 0)]) == (
        ("multiprocessors", 60), ("copyEngines", 3), ("decoders", 3), ("encoders", 0), ("jpegEngines", 3),
        ("ofaEngines", 0), ("memorySlice4", 1), ("memorySlice5", 1), ("memorySlice6", 1), ("memorySlice7", 1))
    assert _mig_capacity({"placementStart": 6, "placementSize": 20}) == ()  # no GPU has that many slices
