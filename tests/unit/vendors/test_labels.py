from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.host.root import Root
from gpuhook.vendors.amd import node_labels as amd_labels
from gpuhook.vendors.discover import discover
from gpuhook.vendors.labels import labels, render, valid_key, valid_value
from gpuhook.vendors.nvidia import node_labels as nvidia_labels

FakeHost = Callable[..., str]
ACCELERATOR = "gpuhook.feature.node.kubernetes.io/accelerator"


def _gpuhook_own(values: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in values.items() if k.startswith("gpuhook-")}


def _prefixed(values: dict[str, str], *prefixes: str) -> dict[str, str]:
    return {k: v for k, v in values.items() if k.startswith(prefixes)}


def test_mixed_node(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=2, amd=3, nvidia_driver="535.54.03", cuda_version=12020, amd_driver="6.8.5"))
    found = labels(discover(root), root, 1)
    assert _gpuhook_own(found) == {
        "gpuhook-nvidia.present": "true", "gpuhook-nvidia.count": "2", "gpuhook-nvidia.driver": "535.54.03",
        "gpuhook-nvidia.cuda": "12.2",  # asked of the host's own libcuda
        "gpuhook-amd.present": "true", "gpuhook-amd.count": "3", "gpuhook-amd.driver": "6.8.5",
        "gpuhook-amd.rocm": "6.2", "gpuhook-amd.gfx": "gfx942"}
    # the vendor with the most GPUs, and each vendor present
    assert _prefixed(found, ACCELERATOR) == {ACCELERATOR: "amd", f"{ACCELERATOR}.amd": "true",
                                             f"{ACCELERATOR}.nvidia": "true"}
    assert found["nvidia.com/gpu.count"] == "2" and found["amd.com/gpu.family"] == "AI"
    assert found["nvidia.com/cuda.driver-version.revision"] == "03"  # kept as a string, as GFD does


def test_a_tie_names_the_first_vendor(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=1, amd=1))
    assert labels(discover(root), root, 1)[ACCELERATOR] == "nvidia"


def test_nvidia_node_has_gfd_names(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=2))  # the stub H100: driver 550.54.15, CUDA 12.4, compute capability 9.0
    assert labels(discover(root), root, 1) == {
        "gpuhook-nvidia.present": "true", "gpuhook-nvidia.count": "2", "gpuhook-nvidia.driver": "550.54.15",
        "gpuhook-nvidia.cuda": "12.4",
        ACCELERATOR: "nvidia", f"{ACCELERATOR}.nvidia": "true",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper", "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/cuda.driver-version.major": "550", "nvidia.com/cuda.driver-version.minor": "54",
        "nvidia.com/cuda.driver-version.revision": "15", "nvidia.com/cuda.driver-version.full": "550.54.15",
        "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
        "nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "4",
        "nvidia.com/cuda.runtime-version.full": "12.4", "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "false",  # the stub NVML has no nvmlDeviceGetMigMode
        "nvidia.com/gpu.mode": "compute"}


def test_amd_node_has_the_node_labellers_names(fake_host: FakeHost) -> None:
    root = Root(fake_host(amd=2))  # the simulated MI300X: gfx942, device 0x74a1, 1216 SIMDs, 4 a CU, 192G
    found = labels(discover(root), root, 1)
    assert _prefixed(found, "amd.com/", "beta.amd.com/", ACCELERATOR) == {
        ACCELERATOR: "amd", f"{ACCELERATOR}.amd": "true",
        "amd.com/gpu.family": "AI", "beta.amd.com/gpu.family": "AI", "beta.amd.com/gpu.family.AI": "2",
        "amd.com/gpu.device-id": "74a1", "beta.amd.com/gpu.device-id": "74a1",
        "beta.amd.com/gpu.device-id.74a1": "2",
        "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
        "beta.amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
        "beta.amd.com/gpu.product-name.AMD_Instinct_MI300X_OAM": "2",
        "amd.com/gpu.vram": "192G", "beta.amd.com/gpu.vram": "192G", "beta.amd.com/gpu.vram.192G": "2",
        "amd.com/gpu.simd-count": "1216", "beta.amd.com/gpu.simd-count": "1216",
        "beta.amd.com/gpu.simd-count.1216": "2",
        "amd.com/gpu.cu-count": "304", "beta.amd.com/gpu.cu-count": "304", "beta.amd.com/gpu.cu-count.304": "2",
        "amd.com/gpu.driver-version": "6.7.0",
        "amd.com/gpu.replicas": "1", "amd.com/gpu.sharing-strategy": "none",
        # the partition modes amdgpu reports for the whole GPUs (SPX, NPS1)
        "amd.com/gpu.compute-partitioning-supported": "true", "amd.com/gpu.memory-partitioning-supported": "true",
        "amd.com/gpu.compute-memory-partition": "spx_nps1"}


def test_amd_partitions_are_counted_and_their_modes_labelled(fake_host: FakeHost) -> None:
    root = Root(fake_host(amd=2, amd_partitions="CPX", amd_memory_partition="NPS4"))
    found = labels(discover(root), root, 1)
    assert found["gpuhook-amd.count"] == "16" and found["gpuhook-amd.partitions"] == "16"  # as ROCm counts them
    assert found["amd.com/gpu.compute-memory-partition"] == "cpx_nps4"
    assert found["amd.com/gpu.compute-partitioning-supported"] == "true"


def test_amd_values_that_differ_are_counted(fake_host: FakeHost) -> None:
    host = fake_host(amd=3, amd_driver=None)
    props = Path(host, "sys/class/kfd/kfd/topology/nodes/3/properties")
    props.write_text(props.read_text().replace("device_id 29857", "device_id 29839"))  # 0x748f
    found = labels(discover(Root(host)), Root(host), 1)
    assert _prefixed(found, "amd.com/gpu.device-id", "beta.amd.com/gpu.device-id") == {
        "amd.com/gpu.device-id.74a1": "2", "amd.com/gpu.device-id.748f": "1",
        "beta.amd.com/gpu.device-id.74a1": "2", "beta.amd.com/gpu.device-id.748f": "1"}
    assert "amd.com/gpu.driver-version" not in found  # the in-kernel amdgpu has no version


def test_replicas_mean_time_slicing(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=1, amd=1))
    found = labels(discover(root), root, 4)
    assert found["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert _prefixed(found, "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy", "amd.com/gpu.replicas",
                     "amd.com/gpu.sharing-strategy") == {
        "nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "amd.com/gpu.replicas": "4", "amd.com/gpu.sharing-strategy": "time-slicing"}


def test_values_kubernetes_would_refuse_are_left_out(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=1, amd=1)
    info = next(Path(host, "proc/driver/nvidia/gpus").glob("*/information"))
    info.write_text(info.read_text().replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 " + "x" * 60))
    Path(host, "sys/devices/pci0000:00/0000:80:00.0/product_name").write_text("AMD Radeon\u2122 PRO W7900\n")
    found = labels(discover(Root(host)), Root(host), 1)
    assert "nvidia.com/gpu.product" not in found and found["nvidia.com/gpu.count"] == "1"
    assert not [k for k in found if "product-name" in k] and found["amd.com/gpu.family"] == "AI"
    assert all(valid_key(k) and valid_value(v) for k, v in found.items())


def test_in_tree_amd_and_file_format(fake_host: FakeHost) -> None:
    root = Root(fake_host(amd=1, amd_driver=None))
    text = render(labels(discover(root), root, 1))
    assert "gpuhook-amd.in-tree=true\n" in text and "rocm" not in text
    assert all(line.count("=") == 1 for line in text.splitlines())


def test_a_driver_without_gpus_has_no_device_labels(fake_host: FakeHost) -> None:
    root = Root(fake_host(drivers_without_gpus=("nvidia",)))
    assert labels(discover(root), root, 1) == {"gpuhook-nvidia.present": "true", "gpuhook-nvidia.count": "0",
                                               "gpuhook-nvidia.driver": "550.54.15", "gpuhook-nvidia.cuda": "12.4"}


def test_no_gpu_node(fake_host: FakeHost) -> None:
    root = Root(fake_host())
    assert labels(discover(root), root, 1) == {}


@pytest.mark.parametrize(("value", "ok"), [
    ("", True), ("NVIDIA-H100-80GB-HBM3", True), ("1.2_3-x", True), ("a" * 63, True), ("a" * 64, False),
    ("-SHARED", False), ("x.", False), ("has space", False), ("a/b", False), ("Radeon\u2122", False),
], ids=["empty", "product", "punctuation", "63", "64", "leading-dash", "trailing-dot", "space", "slash",
        "non-ascii"])
def test_valid_value(value: str, ok: bool) -> None:
    assert valid_value(value) is ok
    assert ok is bool(re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", value) and len(value) <= 63)


@pytest.mark.parametrize(("key", "ok"), [
    ("gpuhook-amd.gfx", True), ("nvidia.com/gpu.product", True), ("beta.amd.com/gpu.vram.192G", True),
    ("", False), ("nvidia.com/", False), ("Nvidia.com/gpu", False), ("-x.com/gpu", False),
    ("amd.com/gpu.product-name." + "x" * 50, False), ("a/b/c", False),
], ids=["own", "gfd", "beta", "empty", "no-name", "upper-prefix", "dash-prefix", "long-name", "two-slashes"])
def test_valid_key(key: str, ok: bool) -> None:
    assert valid_key(key) is ok


@pytest.mark.parametrize(("capability", "family"), [
    ((1, 3), "tesla"), ((3, 7), "kepler"), ((6, 1), "pascal"), ((7, 0), "volta"), ((7, 5), "turing"),
    ((8, 0), "ampere"), ((8, 6), "ampere"), ((8, 9), "ada-lovelace"), ((9, 0), "hopper"), ((10, 0), "blackwell"),
    ((12, 0), "blackwell"), ((13, 0), "rubin"), ((11, 0), "undefined"),
], ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else v)
def test_nvidia_family(capability: tuple[int, int], family: str) -> None:
    assert nvidia_labels.family(*capability) == family


@pytest.mark.parametrize(("model", "product"), [
    ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"), ("Tesla T4", "Tesla-T4"),
    ("NVIDIA  GeForce RTX 4090 (Laptop)", "NVIDIA-GeForce-RTX-4090-Laptop"), ("A100-SXM4-40GB", "A100-SXM4-40GB"),
], ids=["h100", "t4", "odd-chars", "dashes"])
def test_nvidia_product_is_sanitised_as_gfd_does(model: str, product: str) -> None:
    assert nvidia_labels.sanitise(model) == product


@pytest.mark.parametrize(("target", "family"), [
    (90402, "AI"), (90010, "AI"), (90000, "AI"), (90012, "RV"), (80003, "VI"), (80100, "CZ"), (70000, "KV"),
    (70001, "CI"), (60000, "SI"), (100300, "NV"), (100303, "VGH"), (100305, "YC"), (110000, "GC_11_0_0"),
    (110003, "GC_11_0_1"), (110501, "GC_11_5_0"), (120001, "GC_12_0_0"), (0, ""),
], ids=lambda v: str(v))
def test_amd_family_from_the_gfx_target(target: int, family: str) -> None:
    assert amd_labels.family(target) == family


MIG_LABELS = [
    ("none: whole GPUs, no MIG keys", "none", (), {}),
    ("mixed: a count per profile", "mixed", ("3g.40gb", "1g.10gb", "1g.10gb"), {
        "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "4",
        "nvidia.com/mig-1g.10gb.memory": "9984",
        "nvidia.com/mig-1g.10gb.slices.gi": "1", "nvidia.com/mig-1g.10gb.slices.ci": "1",
        "nvidia.com/mig-3g.40gb.count": "2", "nvidia.com/mig-3g.40gb.memory": "40704",
        "nvidia.com/mig-3g.40gb.slices.gi": "3", "nvidia.com/mig-3g.40gb.slices.ci": "3"}),
    ("single: the MIG devices are the GPUs", "single", ("1g.10gb", "1g.10gb"), {
        "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "nvidia.com/gpu.memory": "9984",
        "nvidia.com/gpu.slices.gi": "1", "nvidia.com/gpu.slices.ci": "1"}),
    ("single with two profiles keeps the whole-GPU labels", "single", ("3g.40gb", "1g.10gb"), {
        "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}),
]


@pytest.mark.parametrize(("strategy", "profiles", "expected"), [m[1:] for m in MIG_LABELS],
                         ids=[m[0] for m in MIG_LABELS])
def test_mig_labels_as_gfd_writes_them(fake_host: FakeHost, strategy: str, profiles: tuple[str, ...],
                                       expected: dict[str, str]) -> None:
    root = Root(fake_host(nvidia=2, mig=profiles))
    found = labels(discover(root), root, 1, strategy)
    assert found["nvidia.com/mig.capable"] == ("true" if profiles else "false")
    keys = {k for k in found if "mig" in k and k != "nvidia.com/mig.capable"} | {
        k for k in expected if k.startswith("nvidia.com/gpu.")}
    assert {k: found.get(k) for k in keys} == expected


def test_mps_sharing_is_nvidias_and_the_others_keep_time_slicing(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=1, amd=1))
    found = labels(discover(root), root, 2, "none", "mps")
    assert found["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert found["amd.com/gpu.sharing-strategy"] == "time-slicing"
