"""kubernetes/dra/taints.py: an unhealthy device stays in the slice, tainted by class with its effect and the time
it was first seen, and is left out where the cluster keeps no taints; XIDs last until the GPU is reset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhook.host.health import Fault
from gpuhook.host.inventory import Gpu
from gpuhook.host.root import Root
from gpuhook.kubernetes.dra import loop as dra_loop
from gpuhook.kubernetes.dra.devices import slices
from gpuhook.kubernetes.dra.taints import Stamps, Watch, Xids, describe, kept, publishable, summary, taints_json
from gpuhook.testing import faults as sim_faults
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.contract import DraDevice
from gpuhook.vendors.discover import discover, identified

DRIVER = "gpu.gpuhook.dev"
LOST = Fault("gpu-lost", "node-missing", "NoExecute", "device node /dev/nvidia0 is missing")
APP_XID = Fault("xid", "31", "None", "the driver logged XID 31")


def _device(name: str, pci: str = "0000:10:00.0") -> DraDevice:
    return DraDevice(name=name, gpu=Gpu(vendor="nvidia", index=0, uuid="GPU-0", pci=pci, model="", nodes=()),
                     kind="gpu", domain="gpu.nvidia.com")


def test_taints_carry_the_drivers_domain_the_class_value_effect_and_the_time_first_seen() -> None:
    clock = iter([1000.0, 2000.0, 3000.0])
    since = Stamps(lambda: next(clock))
    first = taints_json("gpu-0", (LOST, APP_XID), DRIVER, since)
    assert first == [
        {"key": "gpu.gpuhook.dev/gpu-lost", "value": "node-missing", "effect": "NoExecute",
         "timeAdded": "1970-01-01T00:16:40Z"},
        {"key": "gpu.gpuhook.dev/xid", "value": "31", "effect": "None", "timeAdded": "1970-01-01T00:33:20Z"}]
    since.forget_unused()
    assert taints_json("gpu-0", (LOST,), DRIVER, since) == first[:1]  # republished: the same time
    since.forget_unused()
    since.forget_unused()  # the taint went: seen again, it is new
    assert taints_json("gpu-0", (LOST,), DRIVER, since)[0]["timeAdded"] == "1970-01-01T00:50:00Z"


@pytest.mark.parametrize(("keeps", "shown", "left"), [
    (True, {"gpu-0": (LOST,), "gpu-1": (APP_XID,), "gpu-2": ()}, {"gpu-0": LOST.why}),
    (False, {"gpu-1": (), "gpu-2": ()}, {"gpu-0": LOST.why}),
], ids=["taints-kept", "no-taints-in-the-cluster"])
def test_what_is_published_with_and_without_taints(keeps: bool, shown: dict[str, tuple[Fault, ...]],
                                                   left: dict[str, str]) -> None:
    described = [(_device("gpu-0"), (LOST,)), (_device("gpu-1"), (APP_XID,)), (_device("gpu-2"), ())]
    out, why = publishable(described, keeps)
    assert {d.name: f for d, f in out} == shown
    assert why == left


def test_an_xid_lasts_until_discovery_no_longer_sees_its_gpu() -> None:
    xids = Xids()
    gpu = _device("gpu-0", "0000:3b:00.0").gpu
    assert xids.add(["NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "eth0: link up",
                     "NVRM: Xid (PCI:0000:3b:00): 79, pid=2"]) == [("0000:3b:00", 79)]
    assert xids.of(gpu) == (79,) and xids.of(_device("gpu-1", "0000:3c:00.0").gpu) == ()
    assert not xids.keep([gpu])
    assert xids.keep([]) and xids.of(gpu) == () and xids.state() == ()


def test_the_publish_line_names_the_tainted_devices_and_those_left_out() -> None:
    wanted = [{"name": "gpu-0", "taints": [{"key": "gpu.gpuhook.dev/xid", "value": "79", "effect": "NoExecute"}]},
              {"name": "gpu-1"}]
    assert summary(wanted, {"gpu-0": "the driver logged XID 79", "gpu-2": "device node /dev/nvidia2 is missing"}) \
        == "; tainted: gpu-0 (gpu.gpuhook.dev/xid=79:NoExecute); left out: gpu-2 (device node /dev/nvidia2 is missing)"


class _Slices:
    def __init__(self, devices: list[dict[str, Any]]) -> None:
        self.devices = devices
        self.asked: list[Any] = []

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        self.asked.append((path, query))
        return {"items": [{"spec": {"devices": self.devices}}]}


@pytest.mark.parametrize(("stored", "expected", "line"), [
    ([{"name": "gpu-0", "taints": [{"key": "k", "effect": "NoExecute"}]}], True, "the cluster keeps device taints"),
    ([{"name": "gpu-0"}], False, "the API server dropped the devices' taints"),
], ids=["kept", "dropped"])
def test_the_slices_read_back_say_whether_the_cluster_keeps_taints(stored: list[dict[str, Any]], expected: bool,
                                                                   line: str) -> None:
    api, said = _Slices(stored), list[str]()
    assert kept(api, "node-1", DRIVER, said.append) is expected  # type: ignore[arg-type]
    assert api.asked == [("/apis/resource.k8s.io/v1/resourceslices",
                          {"fieldSelector": f"spec.nodeName=node-1,spec.driver={DRIVER}"})]
    assert len(said) == 1 and said[0].startswith(line)


def test_a_simulated_hosts_faults_taint_its_devices_in_the_slice(tmp_path: Path) -> None:
    """On a simulated host with two NVIDIA and two AMD GPUs: XID 79 on NVIDIA GPU 0, /dev/nvidia1 gone, AMD GPU 1's
    UMC with uncorrectable errors. Every device is in the slice; those three carry one taint each, the others
    none; an application XID on NVIDIA GPU 1 adds an informational taint. Clearing the counters and bringing the
    node back leaves only the XID, which the GPU's reset (gone from discovery) clears."""
    host = str(tmp_path / "host")
    build_host(host, HostSpec(nvidia=2, amd=2))
    root = Root(host)
    watch = Watch(root)
    watch.read(discover(root))  # the log opened at its end: what is logged from now on counts
    sim_faults.xid(host, 0, 79, "GPU has fallen off the bus.")
    sim_faults.xid(host, 1, 31)
    (tmp_path / "host/dev/nvidia1").unlink()
    sim_faults.ras(host, "amd", 1, "umc", uncorrectable=2, correctable=5)

    def taints() -> dict[str, list[tuple[str, str, str]]]:
        found = discover(root)
        watch.read(found)
        shown, _ = publishable(describe(identified(root, found), root, watch.xids, watch.ras), True)
        bodies = [dra_loop._body(d, root, set(), 1, taints_json(d.name, f, DRIVER, watch.stamps)) for d, f in shown]
        (pool,) = slices("node-1", DRIVER, bodies, 1)
        return {d["name"]: [(t["key"], t["value"], t["effect"]) for t in d.get("taints", [])]
                for d in pool["spec"]["devices"]}

    got = taints()
    assert got == {
        "gpu-0": [("gpu.gpuhook.dev/xid", "79", "NoExecute")],
        "gpu-1": [("gpu.gpuhook.dev/gpu-lost", "node-missing", "NoExecute"), ("gpu.gpuhook.dev/xid", "31", "None")],
        "amdgpu-128": [], "amdgpu-129": [("gpu.gpuhook.dev/ras", "umc", "NoExecute")]}, got
    sim_faults.ras(host, "amd", 1, "umc", uncorrectable=0)
    build_host(host, HostSpec(nvidia=2, amd=2))  # the node back (a new log: the XIDs stay until a reset)
    assert {n: t for n, t in taints().items() if t} == {"gpu-0": [("gpu.gpuhook.dev/xid", "79", "NoExecute")],
                                                        "gpu-1": [("gpu.gpuhook.dev/xid", "31", "None")]}
    gone = tmp_path / "host/proc/driver/nvidia/gpus"
    gone.rename(tmp_path / "gpus-away")  # the GPUs reset: discovery does not see them for a round
    taints()
    (tmp_path / "gpus-away").rename(gone)
    assert {n: t for n, t in taints().items() if t} == {}


def test_a_pool_with_a_tainted_device_goes_at_most_64_devices_a_slice() -> None:
    """resource.k8s.io/v1: a slice in which any device has taints holds at most 64 devices, not 128."""
    from gpuhook.kubernetes.dra.slices import pool

    devices = [{"name": f"gpu-{i}"} for i in range(100)]
    assert [len(s["spec"]["devices"]) for s in pool("node-1", DRIVER, devices, [], 1)] == [100]
    devices[70]["taints"] = [{"key": f"{DRIVER}/xid", "value": "79", "effect": "NoExecute"}]  # type: ignore[assignment]
    sliced = pool("node-1", DRIVER, devices, [], 1)
    assert [len(s["spec"]["devices"]) for s in sliced] == [64, 36]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in sliced} == {2}
