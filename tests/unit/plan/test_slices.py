"""Partitioned GPUs in planning, with literal inventories: MIG devices selected by every form, their nodes, and
tuning on a slice (the physical GPU's settings, refused while siblings are missing)."""

from __future__ import annotations

import pytest

from gpuhook.errors import PlanError, PolicyError
from gpuhook.host.inventory import DeviceNode, Gpu, Inventory, VendorInventory
from gpuhook.plan.select import plan_edits, select_all
from gpuhook.plan.tuning import settings_for
from gpuhook.request.tuning import Tuning
from tests.unit.parsing import parse_request


def _node(path: str, major: int, minor: int) -> DeviceNode:
    return DeviceNode(path=path, kind="c", major=major, minor=minor, mode=0o444, uid=0, gid=0)


GPU0 = Gpu(vendor="nvidia", index=0, uuid="GPU-00000000-0000-0000-0000-000000000000", pci="0000:10:00.0", model="H100",
           nodes=(_node("/dev/nvidia0", 195, 0),))
GPU1 = Gpu(vendor="nvidia", index=1, uuid="GPU-00000001-0000-0000-0000-000000000000", pci="0000:11:00.0", model="H100",
           nodes=(_node("/dev/nvidia1", 195, 1),))


def _mig(mig: int, gi: int, uuid: str = "") -> Gpu:
    gi_minor, ci_minor = 3 + gi * 9, 4 + gi * 9
    nodes = (GPU0.nodes[0], _node(f"/dev/nvidia-caps/nvidia-cap{gi_minor}", 237, gi_minor),
             _node(f"/dev/nvidia-caps/nvidia-cap{ci_minor}", 237, ci_minor))
    return Gpu(vendor="nvidia", index=0, uuid=uuid, pci=GPU0.pci, model="H100", nodes=nodes, parent=GPU0.uuid,
               slice=f"0:{mig}",
               profile="1g.10gb" if uuid else "", place=f"gi{gi}/ci0")


MIGS = (_mig(0, 1, "MIG-00000000-0000-4000-8000-c0ffee000000"), _mig(1, 2, "MIG-00000000-0001-4000-8000-c0ffee000001"))
NV = VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=(GPU0, GPU1),
                     shared_nodes=(_node("/dev/nvidiactl", 195, 255), _node("/dev/nvidia-uvm", 509, 0)), slices=MIGS)
HOST = Inventory("/", (NV,))


def _selected(annotations: dict[str, str], env: dict[str, str] | None = None) -> tuple[Gpu, ...]:
    ((_, gpus),) = select_all(parse_request(annotations, env or {}), HOST)
    return gpus


SELECTS = [
    ("index form", {"gpuhook.dev/gpus": "0:1"}, {}, ("0:1",)),
    ("index form, leading zeros", {"gpuhook.dev/gpus": "00:01"}, {}, ("0:1",)),
    ("uuid", {"gpuhook.dev/gpus": "MIG-00000000-0000-4000-8000-C0FFEE000000"}, {}, ("0:0",)),
    ("env, uuid and index", {}, {"NVIDIA_VISIBLE_DEVICES": "MIG-00000000-0001-4000-8000-c0ffee000001,0:0"},
     ("0:1", "0:0")),
    ("a whole GPU beside a slice", {"gpuhook.dev/gpus": "1,0:0", "gpuhook.dev/vendor": "nvidia"}, {}, ("", "0:0")),
    ("all: every GPU and every MIG device", {"gpuhook.dev/gpus": "all"}, {}, ("", "", "0:0", "0:1")),
]


@pytest.mark.parametrize(("annotations", "env", "slices"), [s[1:] for s in SELECTS], ids=[s[0] for s in SELECTS])
def test_mig_forms_select(annotations: dict[str, str], env: dict[str, str], slices: tuple[str, ...]) -> None:
    assert tuple(g.slice for g in _selected(annotations, env)) == slices


def test_a_mig_device_gets_its_gpu_node_and_its_caps_nodes_only() -> None:
    e = plan_edits(parse_request({"gpuhook.dev/gpus": "0:1"}, {}), HOST)
    assert [n.path for n in e.device_nodes] == ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21",
                                                "/dev/nvidia-caps/nvidia-cap22", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    assert [(r.major, r.minor) for r in e.device_rules][:3] == [(195, 0), (237, 21), (237, 22)]


def test_two_mig_devices_share_their_gpu_node_once() -> None:
    e = plan_edits(parse_request({"gpuhook.dev/gpus": "0:0,0:1"}, {}), HOST)
    assert [n.path for n in e.device_nodes].count("/dev/nvidia0") == 1


@pytest.mark.parametrize("ask", ["0:7", "MIG-00000000-0009-4000-8000-c0ffee000009"], ids=["index", "uuid"])
def test_an_unknown_mig_device_names_the_slices(ask: str) -> None:
    with pytest.raises(PlanError, match=r"slices 0:0 \(MIG-00000000-0000-4000-8000-c0ffee000000\), 0:1"):
        _selected({"gpuhook.dev/gpus": ask})


def test_a_missing_caps_node_is_refused() -> None:
    broken = Gpu(vendor="nvidia", index=0, uuid="", pci=GPU0.pci, model="H100", nodes=(GPU0.nodes[0],),
                 missing=("/dev/nvidia-caps/nvidia-cap12",),
                 parent=GPU0.uuid, slice="0:0", place="gi1/ci0")
    inv = Inventory("/", (VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=(GPU0,), shared_nodes=(),
                                          slices=(broken,)),))
    with pytest.raises(PlanError, match="no device node /dev/nvidia-caps/nvidia-cap12"):
        plan_edits(parse_request({"gpuhook.dev/gpus": "0:0"}, {}), inv)


def test_tuning_one_slice_is_refused_naming_its_siblings() -> None:
    with pytest.raises(PolicyError, match=r"whole GPU 0 .*not 0:1 \(MIG-00000000-0001"):
        settings_for(Tuning(clocks=(1500, 1500)), ((NV, (MIGS[0],)),))


def test_tuning_every_slice_tunes_the_physical_gpu_once() -> None:
    (s,) = settings_for(Tuning(clocks=(1500, 1500)), ((NV, MIGS),))
    assert (s.gpu, s.device, s.index, s.name) == (GPU0.uuid, GPU0.uuid, 0, "clocks")


def test_tuning_a_slice_when_the_policy_shares_slices() -> None:
    (s,) = settings_for(Tuning(power_limit=300), ((NV, (MIGS[1],)),), shared_slices=True)
    assert (s.gpu, s.value) == (GPU0.uuid, "300000")


@pytest.mark.parametrize("shared_slices", [False, True], ids=["default", "shared_slices"])
def test_a_slices_compute_mode_is_refused_while_others_may_hold_its_siblings(shared_slices: bool) -> None:
    """The compute mode is the whole GPU's: exclusive-process on one MIG device ends its siblings' CUDA, so not
    even [tuning] shared_slices lets a slice's holder set it."""
    with pytest.raises(PolicyError) as e:
        settings_for(Tuning(compute_mode="exclusive-process"), ((NV, (MIGS[0],)),), shared_slices=shared_slices)
    assert str(e.value).startswith("gpuhook.dev/compute-mode on a shared GPU (slice 0:0 of the whole GPU 0")
    assert "not 0:1 (MIG-00000000-0001" in str(e.value)
    (s,) = settings_for(Tuning(compute_mode="exclusive-process"), ((NV, MIGS),))  # every slice: the GPU is its own
    assert (s.gpu, s.name) == (GPU0.uuid, "compute_mode")


def test_a_slice_without_tuning_needs_no_siblings() -> None:
    assert settings_for(Tuning(exclusive=True), ((NV, (MIGS[0],)),)) == ()


def test_slice_keys_are_distinct_without_uuids() -> None:
    assert _mig(0, 1).key() == f"{GPU0.uuid}/0:0" and MIGS[0].key() == MIGS[0].uuid and GPU1.key() == GPU1.uuid


def test_a_spec_holding_a_mig_devices_nodes_holds_that_device_not_its_gpu() -> None:
    from gpuhook.plan.tuning import gpus_in_spec

    spec = [{"major": n.major, "minor": n.minor} for n in MIGS[1].nodes]
    ((_, gpus),) = gpus_in_spec(spec, HOST)
    assert gpus == (MIGS[1],)  # so tuning on it meets the siblings rule
    whole = [{"major": 195, "minor": 1}]
    ((_, gpus),) = gpus_in_spec(whole, HOST)
    assert gpus == (GPU1,)
