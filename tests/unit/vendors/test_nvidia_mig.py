"""MIG discovery on fake procfs trees (MIG off, MIG on with mixed profiles, a node missing), the procfs parsers
with literals, the procfs copy of a MIG device's capabilities, and UUIDs and profiles from the stub NVML."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from gpuhook.config import Policy
from gpuhook.host.root import Root
from gpuhook.vendors import registry
from gpuhook.vendors.discover import discover, identified
from gpuhook.vendors.nvidia import mig as nvidia_mig
from gpuhook.vendors.nvidia import sim_mig
from gpuhook.vendors.nvidia import vendor as nvidia

FakeHost = Callable[..., str]
PROFILES = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")

ACCESS = [
    ("a gi", "DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n", 12),
    ("spaces", "DeviceFileMode: 292\n DeviceFileMinor :  13 \n", 13),
    ("no minor", "DeviceFileMode: 292\n", None),
    ("not a number", "DeviceFileMinor: x\n", None),
]


@pytest.mark.parametrize(("text", "minor"), [a[1:] for a in ACCESS], ids=[a[0] for a in ACCESS])
def test_parse_access(text: str, minor: int | None) -> None:
    assert nvidia_mig.parse_access(text) == minor


def test_parse_devices_reads_character_devices_only() -> None:
    text = "Character devices:\n  1 mem\n195 nvidia\n237 nvidia-caps\n\nBlock devices:\n238 nvidia-caps\n"
    assert nvidia_mig.parse_devices(text, "nvidia-caps") == 237
    assert nvidia_mig.parse_devices(text, "nvidia-uvm") is None


IDS = [
    ("index", "0:1", "0:1"), ("leading zeros", "01:002", None), ("two digits", "3:12", "3:12"),
    ("uuid", "MIG-ABCDEF01-0000-4000-8000-00000000000F", "MIG-abcdef01-0000-4000-8000-00000000000f"),
    ("uuid, short group", "MIG-abcdef01-000-4000-8000-00000000000f", None), ("legacy slash form", "MIG-1/2", None),
    ("pci", "3b:00.0", None), ("gpu uuid", "GPU-abcdef01-0000-4000-8000-00000000000f", None), ("no mig", "0:", None),
]


@pytest.mark.parametrize(("item", "parsed"), [i[1:] for i in IDS], ids=[i[0] for i in IDS])
def test_parse_id(item: str, parsed: str | None) -> None:
    assert nvidia_mig.parse_id(item) == parsed


def test_mig_off_has_no_slices(fake_host: FakeHost) -> None:
    nv = discover(Root(fake_host(nvidia=2))).vendor("nvidia")
    assert nv is not None and nv.slices == () and nv.notes == ()


def test_mig_on_with_mixed_profiles(fake_host: FakeHost) -> None:
    nv = discover(Root(fake_host(nvidia=2, mig=PROFILES, mig_gpus=1))).vendor("nvidia")
    assert nv is not None and len(nv.gpus) == 2  # whole GPUs stay GPUs; MIG devices are slices of GPU 0
    assert [(s.slice, s.place, s.parent, s.uuid) for s in nv.slices] == [
        (f"0:{m}", f"gi{m + 1}/ci0", nv.gpus[0].uuid, "") for m in range(4)]  # no NVML: no MIG UUIDs
    for m, s in enumerate(nv.slices):
        gpu, gi, ci = s.nodes
        assert gpu == nv.gpus[0].nodes[0] and s.missing == ()
        assert [(n.path, n.major, n.minor, n.mode) for n in (gi, ci)] == [
            (f"/dev/nvidia-caps/nvidia-cap{sim_mig.minor(0, m + 1)}", 237, sim_mig.minor(0, m + 1), 0o444),
            (f"/dev/nvidia-caps/nvidia-cap{sim_mig.minor(0, m + 1, 0)}", 237, sim_mig.minor(0, m + 1, 0), 0o444)]
    assert nv.siblings(nv.slices[2]) == nv.slices and nv.siblings(nv.gpus[1]) == ()


def test_a_missing_caps_node_is_recorded(fake_host: FakeHost) -> None:
    root = fake_host(nvidia=1, mig=("1g.10gb",))
    os.unlink(f"{root}/dev/nvidia-caps/nvidia-cap{sim_mig.minor(0, 1, 0)}")
    nv = discover(Root(root)).vendor("nvidia")
    assert nv is not None
    (s,) = nv.slices
    assert s.missing == (f"/dev/nvidia-caps/nvidia-cap{sim_mig.minor(0, 1, 0)}",) and len(s.nodes) == 2


def test_procfs_copy_holds_its_own_capabilities_only(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=2, mig=PROFILES, mig_gpus=1))
    nv = discover(root).vendor("nvidia")
    assert nv is not None
    found = nvidia.procfs_files(root, (nv.slices[1],), Policy())
    assert found is not None
    caps = sorted(k for k in found[1] if k.startswith("capabilities/"))
    assert caps == ["capabilities/gpu0/mig/gi2/access", "capabilities/gpu0/mig/gi2/ci0/access"]
    assert "DeviceFileMinor: 22" in found[1]["capabilities/gpu0/mig/gi2/ci0/access"]
    assert "gpus/0000:10:00.0/information" in found[1]  # the parent's information


def test_uuids_and_profiles_from_nvml_only_when_asked(fake_host: FakeHost) -> None:
    root = Root(fake_host(nvidia=2, mig=PROFILES, mig_gpus=1))
    inv = discover(root)
    assert identified(root, inv, ("0", "0:1")) is inv  # no MIG UUID asked: NVML is not loaded
    nv = identified(root, inv, (sim_mig.uuid(0, 3),)).vendor("nvidia")
    assert nv is not None
    assert [(s.uuid, s.profile) for s in nv.slices] == [(sim_mig.uuid(0, m), p) for m, p in enumerate(PROFILES)]


def test_doctor_names_a_mig_device_without_its_caps_node(fake_host: FakeHost) -> None:
    root = fake_host(nvidia=1, mig=("1g.10gb", "1g.10gb"))
    assert registry.doctor("nvidia").checks(discover(Root(root)).vendor("nvidia"))[1][:2] == (  # type: ignore[arg-type]
        "ok", "2 MIG devices, each with its caps nodes")
    os.unlink(f"{root}/dev/nvidia-caps/nvidia-cap{sim_mig.minor(0, 2)}")
    level, what, fix = registry.doctor("nvidia").checks(discover(Root(root)).vendor("nvidia"))[1]  # type: ignore[arg-type]
    assert (level, what) == ("warn", f"MIG devices without their caps nodes: 0:1 (/dev/nvidia-caps/nvidia-cap"
                                     f"{sim_mig.minor(0, 2)})") and "nvidia-modprobe -f" in fix
