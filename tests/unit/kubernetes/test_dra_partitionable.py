"""Partitions made on demand (kubernetes/dra/partitionable.py, vendors/nvidia/mig_dynamic.py, dra/slices.pool): the
counters and devices published, and the decisions to make and remove a MIG device, on a simulated host whose stub
NVML makes and destroys instances at placements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuhook.errors import KubernetesError
from gpuhook.host.inventory import Gpu
from gpuhook.kubernetes.dra.devices import slices
from gpuhook.kubernetes.dra.partitionable import Maker, consuming, counter_sets, published
from gpuhook.kubernetes.dra.slices import pool
from gpuhook.plan.authority import ClaimedDevice, PreparedClaim
from gpuhook.vendors.contract import DraDevice
from gpuhook.vendors.nvidia.mig_dynamic import partitionable

DRIVER = "gpu.gpuhook.dev"
GPU = Gpu(vendor="nvidia", index=0, uuid="GPU-0", pci="0000:01:00.0", model="H100", nodes=())
# an H100's GPU instance profiles as NVML lists them: name, MiB, multiprocessors, placements (start, size)
H100 = [("1g.10gb", 9984, 16, [(s, 1) for s in range(7)]), ("1g.20gb", 20224, 16, [(0, 2), (2, 2), (4, 2), (6, 2)]),
        ("2g.20gb", 20224, 32, [(0, 2), (2, 2), (4, 2)]), ("3g.40gb", 40704, 48, [(0, 4), (4, 4)]),
        ("4g.40gb", 40704, 64, [(0, 4)]), ("7g.80gb", 81664, 112, [(0, 8)])]


def _whole(gpu: Gpu = GPU, name: str = "gpu-0") -> DraDevice:
    return DraDevice(name=name, gpu=gpu, kind="gpu", domain="gpu.nvidia.com",
                     attributes=(("type", "gpu"), ("uuid", gpu.uuid), ("productName", "H100")),
                     capacity=(("memory", 80 << 30),))


def test_a_gpu_is_offered_whole_and_as_every_profile_at_every_placement_over_its_memory_slices() -> None:
    offer = partitionable(_whole(), H100)
    assert offer.counter_set == "gpu-0-counters"
    assert offer.counters == tuple((f"memory-slice-{n}", 1) for n in range(8))
    by_name = {p.device.name: p for p in offer.partitions}
    assert len(by_name) == 1 + 7 + 4 + 3 + 2 + 1 + 1
    assert by_name["gpu-0"].consumes == offer.counters and by_name["gpu-0"].layout == ()
    three = by_name["gpu-0-mig-3g40gb-p4"]
    assert three.consumes == tuple((f"memory-slice-{n}", 1) for n in range(4, 8))
    assert three.layout == (("profile", "3g.40gb"), ("start", "4"), ("size", "4"))
    assert three.device.kind == "mig" and three.device.gpu == GPU
    assert dict(three.device.attributes) == {"type": "mig", "parentUUID": "GPU-0", "profile": "3g.40gb",
                                             "productName": "H100"}
    assert dict(three.device.capacity) == {"memory": 40704 << 20, "multiprocessors": 48}


@pytest.mark.parametrize(("a", "b", "overlap"), [
    ("gpu-0-mig-1g10gb-p3", "gpu-0-mig-1g10gb-p4", False),
    ("gpu-0-mig-3g40gb-p0", "gpu-0-mig-4g40gb-p0", True),
    ("gpu-0-mig-3g40gb-p4", "gpu-0-mig-1g20gb-p6", True),
    ("gpu-0-mig-4g40gb-p0", "gpu-0-mig-3g40gb-p4", False),
    ("gpu-0", "gpu-0-mig-1g10gb-p6", True),
], ids=["two-1g", "3g-4g-same-start", "3g-1g20gb-inside", "4g-beside-3g", "whole-and-any"])
def test_two_partitions_share_a_counter_exactly_when_they_overlap(a: str, b: str, overlap: bool) -> None:
    by_name = {p.device.name: p for p in partitionable(_whole(), H100).partitions}
    assert bool({k for k, _ in by_name[a].consumes} & {k for k, _ in by_name[b].consumes}) == overlap


def test_a_partitionable_gpus_own_devices_give_way_to_its_partitions_others_stay() -> None:
    other = Gpu(vendor="nvidia", index=1, uuid="GPU-1", pci="0000:02:00.0", model="", nodes=())
    mig = Gpu(vendor="nvidia", index=0, uuid="", pci="0000:01:00.0", model="", nodes=(), parent="GPU-0", slice="0:0",
              place="gi1/ci0")
    offer = partitionable(_whole(), H100)
    shown = [(DraDevice(name="gpu-0-mig-1g10gb-1-0", gpu=mig, kind="mig", domain=""), "x"),
             (_whole(other, "gpu-1"), "y")]
    out = published(shown, [offer])
    assert [d.name for d, _ in out][:1] == ["gpu-1"] and len(out) == 1 + len(offer.partitions)
    assert {x for d, x in out if d.gpu == GPU} == {"x"}  # what the GPU's device had beside it
    assert published([(_whole(other, "gpu-1"), "y")], [offer]) == [(_whole(other, "gpu-1"), "y")]  # unhealthy


def test_the_counter_sets_and_a_devices_consumption_as_the_api_takes_them() -> None:
    offer = partitionable(_whole(), H100[:1])
    assert counter_sets([offer]) == [{"name": "gpu-0-counters",
                                      "counters": {f"memory-slice-{n}": {"value": "1"} for n in range(7)}}]
    part = offer.partitions[3]
    body = consuming({"name": part.device.name}, part, offer.counter_set)
    assert body == {"name": "gpu-0-mig-1g10gb-p2", "consumesCounters": [
        {"counterSet": "gpu-0-counters", "counters": {"memory-slice-2": {"value": "1"}}}]}
    assert consuming({"name": "gpu-1"}, None, "") == {"name": "gpu-1"}


def test_counter_sets_go_in_slices_of_their_own_and_consuming_devices_64_a_slice() -> None:
    devices = [{"name": f"d{i}", "consumesCounters": []} for i in range(100)]
    sets = [{"name": f"gpu-{i}-counters", "counters": {}} for i in range(10)]
    made = pool("node-1", DRIVER, devices, sets, 3, None)
    assert [len(s["spec"].get("devices", [])) for s in made] == [64, 36, 0, 0]
    assert [len(s["spec"].get("sharedCounters", [])) for s in made] == [0, 0, 8, 2]
    assert all(not ("devices" in s["spec"] and "sharedCounters" in s["spec"]) for s in made)
    assert {(s["spec"]["pool"]["generation"], s["spec"]["pool"]["resourceSliceCount"]) for s in made} == {(3, 4)}
    assert len({s["metadata"]["name"] for s in made}) == 4
    plain = [{"name": "gpu-1"}]
    assert pool("node-1", DRIVER, plain, [], 2, None) == slices("node-1", DRIVER, plain, 2, None)


# Making and removing, on a simulated host (needs root for its device nodes)

def _maker(tmp_path: Path, **spec: Any) -> tuple[Maker, Any]:
    from gpuhook.config import from_table
    from gpuhook.host.root import Root
    from gpuhook.testing.simulate import HostSpec, build_host
    from gpuhook.vendors.discover import discover, identified
    from gpuhook.vendors.nvidia.kubernetes import partitionable as offer

    host = build_host(str(tmp_path / "host"), HostSpec(nvidia=2, amd=0, **spec))
    config = from_table({"host_root": host, "state_dir": str(tmp_path / "state"),
                         "kubernetes": {"partitions": "dynamic"}}, "/etc/gpuhook/config.toml")
    root = Root(host)
    inventory = identified(root, discover(root))
    maker = Maker(config)
    offers = offer(inventory.vendor("nvidia"), root)  # type: ignore[arg-type]
    maker.shown([(p.device, ()) for o in offers for p in o.partitions if p.layout == ()], inventory, root)
    return maker, inventory


def _claim(uid: str, device: str) -> PreparedClaim:
    return PreparedClaim(uid=uid, namespace="ns", name=f"claim-{uid}", devices=(
        ClaimedDevice(request="gpu", device=device, vendor="nvidia", gpu="GPU-00000000-5a1e-4000-8000-0000d00d0000"),))


@pytest.fixture
def dynamic(tmp_path: Path) -> tuple[Maker, Any]:
    return _maker(tmp_path, mig_capable=True)


def test_a_claim_for_a_profile_gets_the_mig_device_made_for_it_and_unprepare_removes_it(
        dynamic: tuple[Maker, Any]) -> None:
    maker, inventory = dynamic
    name = "gpu-0-mig-3g40gb-p4"
    record, devices, fresh = maker.make(_claim("u1", name), {}, inventory)
    (claimed,) = record.devices
    made = devices[name].gpu
    assert claimed.gpu == made.key() and made.key().startswith("MIG-") and made.profile == "3g.40gb"
    assert made.parent == "GPU-00000000-5a1e-4000-8000-0000d00d0000" and len(made.nodes) == 3  # GPU, GI, CI
    again, _, _ = maker.make(_claim("u1", name), {}, fresh)  # asked again: found, not made twice
    assert again.devices == record.devices
    maker.remove("u1")
    _, _, after = maker.view(_claim("u2", "gpu-0"), {}, maker._fresh())
    assert after.vendor("nvidia").slices == ()  # type: ignore[union-attr]


def test_a_profile_is_refused_in_one_line_while_a_claim_holds_the_gpu_whole(dynamic: tuple[Maker, Any],
                                                                            tmp_path: Path) -> None:
    from gpuhook.apply import claims

    maker, inventory = dynamic
    claims.save(str(tmp_path / "state"), _claim("whole", "gpu-0"))
    with pytest.raises(KubernetesError, match=r"in use by claim ns/claim-whole") as e:
        maker.make(_claim("u1", "gpu-0-mig-1g10gb-p0"), {}, inventory)
    assert "\n" not in str(e.value)
    assert maker._fresh().vendor("nvidia").slices == ()  # type: ignore[union-attr]


def test_the_whole_gpu_is_refused_while_a_mig_device_made_for_another_claim_is_there(
        dynamic: tuple[Maker, Any], tmp_path: Path) -> None:
    from gpuhook.apply import claims

    maker, inventory = dynamic
    record, _, _ = maker.make(_claim("u1", "gpu-0-mig-1g10gb-p0"), {}, inventory)
    claims.save(str(tmp_path / "state"), record)
    with pytest.raises(KubernetesError, match="in use by claim ns/claim-u1"):
        maker.make(_claim("u2", "gpu-0"), {}, inventory)


def test_an_overlapping_placement_is_refused_by_the_driver_too(dynamic: tuple[Maker, Any]) -> None:
    maker, inventory = dynamic
    maker.make(_claim("u1", "gpu-0-mig-3g40gb-p0"), {}, inventory)
    with pytest.raises(KubernetesError, match="cannot be made at placement 0:4"):
        maker.make(_claim("u2", "gpu-0-mig-4g40gb-p0"), {}, inventory)


def test_a_static_layout_is_published_as_laid_out_and_one_laid_out_after_publishing_is_refused(
        tmp_path: Path) -> None:
    from gpuhook.host.root import Root
    from gpuhook.kubernetes.dra.taints import Xids, describe
    from gpuhook.vendors.nvidia.kubernetes import partitionable as offer

    maker, inventory = _maker(tmp_path, mig=("1g.10gb",), mig_gpus=1)
    root = Root(str(tmp_path / "host"))
    devices = [d for d, _ in describe(inventory, root, Xids(), {})]
    names = [d.name for d, _ in maker.shown([(d, ()) for d in devices], inventory, root)]
    assert "gpu-0-mig-1g10gb-1-0" in names and "gpu-0" not in names and "gpu-1-mig-7g80gb-p0" in names
    maker.partitions = {p.device.name: p for o in offer(inventory.vendor("nvidia"), root)  # type: ignore[arg-type]
                        for p in o.partitions}  # as published before the layout was applied
    with pytest.raises(KubernetesError, match="static layout"):
        maker.make(_claim("u1", "gpu-0-mig-1g10gb-p3"), {}, inventory)


def test_a_record_whose_made_partition_is_gone_is_not_given_its_gpu_whole(dynamic: tuple[Maker, Any]) -> None:
    maker, inventory = dynamic
    with pytest.raises(KubernetesError, match="is gone from the node"):
        maker.view(_claim("u9", "gpu-0-mig-1g10gb-p0"), {}, inventory)  # a reboot took what was made


def test_without_the_switch_nothing_is_made(tmp_path: Path) -> None:
    from gpuhook.config import from_table
    from gpuhook.kubernetes.dra.state import Preparer

    config = from_table({"state_dir": str(tmp_path / "state")}, "/etc/gpuhook/config.toml")
    preparer = Preparer(config, None, DRIVER, "node-1", str(tmp_path / "cdi"), "h", "g")  # type: ignore[arg-type]
    assert preparer.partitions is None


# AMD: a mode applies to the whole GPU

AMD = Gpu(vendor="amd", index=0, uuid="0x5a1e", pci="0000:80:00.0", model="MI300X", nodes=())


def test_an_amd_gpu_is_offered_as_every_partition_of_every_mode_over_its_xcds() -> None:
    from gpuhook.vendors.amd.partition_dynamic import partitionable as amd_partitionable

    whole = DraDevice(name="amdgpu-128", gpu=AMD, kind="gpu", domain="gpu.amd.com",
                      attributes=(("type", "amdgpu"), ("productName", "MI300X"), ("partitionProfile", "spx_nps1")),
                      capacity=(("memory", 192 << 30), ("computeUnits", 304)))
    offer = amd_partitionable(AMD, [whole], ["SPX", "DPX", "QPX", "CPX"], ["NPS1", "NPS4"])
    assert offer.counter_set == "amdgpu-0000-80-00-0-counters"
    assert offer.counters == tuple((f"xcd-{n}", 1) for n in range(8))
    by_name = {p.device.name: p for p in offer.partitions}
    assert len(by_name) == 2 * (1 + 2 + 4 + 8)
    spx = by_name["amdgpu-0000-80-00-0-spx-nps1"]
    assert spx.consumes == offer.counters and spx.device.kind == "gpu" and spx.mode == "SPX NPS1"
    dpx = by_name["amdgpu-0000-80-00-0-dpx-nps1-1"]
    assert dpx.consumes == tuple((f"xcd-{n}", 1) for n in range(4, 8)) and dpx.device.kind == "partition"
    cpx = by_name["amdgpu-0000-80-00-0-cpx-nps4-5"]
    assert cpx.consumes == (("xcd-5", 1),) and cpx.mode == "CPX NPS4"
    assert cpx.layout == (("compute", "CPX"), ("memory", "NPS4"), ("index", "5"))
    assert dict(cpx.device.attributes) == {"type": "amdgpu-partition", "partitionProfile": "cpx_nps4",
                                           "productName": "MI300X"}
    assert dict(cpx.device.capacity) == {"memory": 24 << 30, "computeUnits": 38}


def _amd_claim(uid: str, device: str) -> PreparedClaim:
    return PreparedClaim(uid=uid, namespace="ns", name=uid, devices=(
        ClaimedDevice(request="gpu", device=device, vendor="amd", gpu="x"),))


def test_amd_partitions_of_the_mode_made_share_the_gpu_another_mode_waits_and_the_last_going_makes_it_whole(
        tmp_path: Path) -> None:
    from gpuhook.apply import claims
    from gpuhook.config import from_table
    from gpuhook.host.root import Root
    from gpuhook.kubernetes.dra.taints import Xids, describe
    from gpuhook.testing.simulate import HostSpec, build_host
    from gpuhook.vendors.discover import discover, identified

    host = build_host(str(tmp_path / "host"), HostSpec(nvidia=0, amd=2))
    state = str(tmp_path / "state")
    config = from_table({"host_root": host, "state_dir": state, "kubernetes": {"partitions": "dynamic"}}, "/x")
    root = Root(host)
    inventory = identified(root, discover(root))
    maker = Maker(config)
    devices = [d for d, _ in describe(inventory, root, Xids(), {})]
    shown = maker.shown([(d, ()) for d in devices], inventory, root)
    assert len(shown) == 2 * 2 * 15  # two GPUs, each every partition of 4 compute and 2 memory modes
    base = "amdgpu-0000-80-00-0"
    first, _, fresh = maker.make(_amd_claim("a", f"{base}-cpx-nps1-3"), {}, inventory)
    assert first.devices[0].gpu == "0x5a1e000000000000/3"
    claims.save(state, first)
    second, _, _ = maker.make(_amd_claim("b", f"{base}-cpx-nps1-5"), {}, fresh)  # the mode is there: no change
    assert second.devices[0].gpu == "0x5a1e000000000000/5"
    claims.save(state, second)
    for other in (f"{base}-dpx-nps1-0", f"{base}-spx-nps1"):
        with pytest.raises(KubernetesError, match="is in CPX NPS1 for other claims"):
            maker.make(_amd_claim("c", other), {}, fresh)
    claims.remove(state, "a")
    maker.remove("a")
    assert len(maker._fresh().vendor("amd").gpus) == 9  # type: ignore[union-attr]  # b keeps the mode
    claims.remove(state, "b")
    maker.remove("b")
    assert [g.place for g in maker._fresh().vendor("amd").gpus] == ["", ""]  # type: ignore[union-attr]


def test_an_amd_gpu_in_a_mode_set_before_is_published_as_laid_out(tmp_path: Path) -> None:
    from gpuhook.config import from_table
    from gpuhook.host.root import Root
    from gpuhook.kubernetes.dra.taints import Xids, describe
    from gpuhook.testing.simulate import HostSpec, build_host
    from gpuhook.vendors.discover import discover, identified

    host = build_host(str(tmp_path / "host"), HostSpec(nvidia=0, amd=1, amd_partitions="DPX"))
    config = from_table({"host_root": host, "state_dir": str(tmp_path / "state"),
                         "kubernetes": {"partitions": "dynamic"}}, "/x")
    root = Root(host)
    inventory = identified(root, discover(root))
    maker = Maker(config)
    devices = [d for d, _ in describe(inventory, root, Xids(), {})]
    shown = maker.shown([(d, ()) for d in devices], inventory, root)
    assert [d.name for d, _ in shown] == ["amdgpu-128", "amdgpu-129"] and maker.counter_sets() == []


class _Api:
    """An API server that keeps the slices it is given, without their sharedCounters when `gate_off`."""

    def __init__(self, gate_off: bool) -> None:
        self.gate_off, self.slices, self.writes = gate_off, {}, 0  # type: dict[str, Any]

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if method in ("POST", "PUT") and body is not None:
            self.writes += 1
            stored = json.loads(json.dumps(body))
            if self.gate_off:
                stored["spec"].pop("sharedCounters", None)
            stored["metadata"]["resourceVersion"] = str(self.writes)
            self.slices[stored["metadata"]["name"]] = stored
            return stored
        self.slices.pop(path.rpartition("/")[2], None)
        return {}

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        return {"items": list(self.slices.values())} if path.endswith("resourceslices") else {"metadata": {"uid": "u"}}


@pytest.mark.parametrize("gate_off", [False, True], ids=["gate-on", "gate-off"])
def test_counters_are_published_once_and_a_cluster_that_drops_them_is_told_in_one_line(gate_off: bool) -> None:
    from gpuhook.kubernetes.dra.slices import Publisher

    api = _Api(gate_off)
    publisher = Publisher(api, DRIVER, "node-1")  # type: ignore[arg-type]
    offer = partitionable(_whole(), H100[:1])
    devices = [consuming({"name": p.device.name}, p, offer.counter_set) for p in offer.partitions]
    if gate_off:
        with pytest.raises(KubernetesError, match="DRAPartitionableDevices feature gate off") as e:
            publisher.publish(devices, counter_sets([offer]))
        assert "\n" not in str(e.value)
        publisher.forget()
        assert publisher.publish(devices, counter_sets([offer])) is False  # not rewritten at once
    else:
        assert publisher.publish(devices, counter_sets([offer])) is True
        publisher.forget()
        assert publisher.publish(devices, counter_sets([offer])) is False  # the API server has it as it is
    assert api.writes == 2  # the devices' slice and the counters'


def test_an_admin_access_claim_never_makes_a_partition(dynamic: tuple[Maker, Any]) -> None:
    from gpuhook.frozen import replace

    maker, inventory = dynamic
    claim = _claim("u1", "gpu-0-mig-1g10gb-p0")
    admin = replace(claim, devices=tuple(replace(c, admin=True) for c in claim.devices))
    with pytest.raises(KubernetesError, match="never with adminAccess"):
        maker.make(admin, {}, inventory)
    assert maker._fresh().vendor("nvidia").slices == ()  # type: ignore[union-attr]
    whole = _claim("u2", "gpu-0")
    watched, _, _ = maker.make(replace(whole, devices=tuple(replace(c, admin=True) for c in whole.devices)), {},
                               inventory)
    assert watched.devices[0].gpu == whole.devices[0].gpu  # the GPU as it is: nothing made
