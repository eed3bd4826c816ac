"""Hygon DCUs, the third vendor: discovery beside the other KFD driver's, identities, labels, DRA devices, the image's
DTK against the driver's window, and the simulator's rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.errors import PlanError, PolicyError, SimulatorError
from gpuhook.host.facts import HostFacts
from gpuhook.host.image import InRoot
from gpuhook.host.root import Root
from gpuhook.kubernetes.dra.devices import device_json
from gpuhook.plan.compat import check
from gpuhook.plan.select import select_all
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors import registry
from gpuhook.vendors.discover import discover
from gpuhook.vendors.hygon import dtk
from gpuhook.vendors.labels import labels
from tests.unit.parsing import parse_request


@pytest.fixture(scope="module")
def dcu_root(tmp_path_factory: pytest.TempPathFactory) -> Root:
    return Root(build_host(str(tmp_path_factory.mktemp("dcu") / "host"), HostSpec(nvidia=1, hygon=2)))


def test_dcus_are_hygons_and_not_amds(dcu_root: Root) -> None:
    inventory = discover(dcu_root)
    assert [v.vendor for v in inventory.vendors] == ["nvidia", "hygon"]  # KFD is there, amdgpu is not
    inv = inventory.vendor("hygon")
    assert inv is not None and inv.driver_version == "6.2.26"
    assert [(g.index, g.pci, g.model, g.arch, [n.path for n in g.nodes]) for g in inv.gpus] == [
        (0, "0000:40:00.0", "K100_AI", "gfx928", ["/dev/dri/renderD128", "/dev/dri/card1"]),
        (1, "0000:41:00.0", "K100_AI", "gfx928", ["/dev/dri/renderD129", "/dev/dri/card2"])]
    assert [n.path for n in inv.shared_nodes] == ["/dev/kfd", "/dev/mkfd"]
    assert [(f.kind, f.source, f.target) for f in inv.files] == [("dir", "/opt/hyhal", "/opt/hyhal")]


def test_a_kfd_gpu_of_another_pci_vendor_is_not_amds(tmp_path: Path) -> None:
    root = build_host(str(tmp_path / "host"), HostSpec(amd=2))
    Path(f"{root}/sys/devices/pci0000:00/0000:81:00.0/vendor").write_text("0x1d94\n")  # GPU 1 is a DCU now
    inv = discover(Root(root)).vendor("amd")
    assert inv is not None and [g.pci for g in inv.gpus] == ["0000:80:00.0"]


def test_a_unique_id_goes_to_the_vendor_whose_gpu_has_it(dcu_root: Root) -> None:
    inventory = discover(dcu_root)
    chosen = select_all(parse_request({"gpuhook.dev/gpus": "0xdc0000000001"}, {}), inventory)
    assert [(inv.vendor, g.index) for inv, gpus in chosen for g in gpus] == [("hygon", 1)]
    with pytest.raises(PlanError, match="no Hygon DCU GPU 0xdc0000000009 on this host"):
        select_all(parse_request({"gpuhook.dev/gpus": "0xdc0000000009"}, {}), inventory)


def test_the_env_request_is_hygons_own_and_hip_visible_devices_is_not(dcu_root: Root) -> None:
    inventory = discover(dcu_root)
    chosen = select_all(parse_request({}, {"HYGON_VISIBLE_DEVICES": "all"}), inventory)
    assert [(inv.vendor, g.index) for inv, gpus in chosen for g in gpus] == [("hygon", 0), ("hygon", 1)]
    assert not parse_request({}, {"HIP_VISIBLE_DEVICES": "0"}).wants_gpus


def test_labels_as_hygons_labeller_writes_them(dcu_root: Root) -> None:
    got = labels(discover(dcu_root), dcu_root, 1)
    assert {k: v for k, v in got.items() if "hygon" in k} == {
        "gpuhook-hygon.present": "true", "gpuhook-hygon.count": "2", "gpuhook-hygon.driver": "6.2.26",
        "gpuhook-hygon.gfx": "gfx928", "gpuhook-hygon.dtk-min": "24.04", "gpuhook-hygon.dtk-max": "25.04",
        "hygon.com/dcu": "true", "hygon.com/dcu.name": "K100_AI", "hygon.com/dcu.cu-count": "120",
        "hygon.com/dcu.vram": "64G", "gpuhook.feature.node.kubernetes.io/accelerator.hygon": "true"}
    assert got["gpuhook.feature.node.kubernetes.io/accelerator"] == "hygon"  # 2 DCUs against 1 NVIDIA GPU


def test_dra_devices_carry_no_other_drivers_domain(dcu_root: Root) -> None:
    inv = discover(dcu_root).vendor("hygon")
    assert inv is not None
    devices = registry.kubernetes("hygon").dra_devices(inv, dcu_root)
    assert [d.name for d in devices] == ["dcu-128", "dcu-129"]
    device, dropped = device_json(devices[0], -1, "")
    assert not dropped and all("/" not in k or k.startswith("resource.kubernetes.io/") for k in device["attributes"])
    assert device["attributes"]["productName"] == {"string": "K100_AI"}
    assert device["attributes"]["vendor"] == {"string": "hygon"}
    assert device["capacity"] == {"memory": {"value": str(65520 << 20)}, "computeUnits": {"value": "120"}}


@pytest.mark.parametrize(("name", "version"), [
    ("dtk-24.04.2", "24.04.2"), ("dtk-22.10", "22.10"), ("dtk-26.04-DCC2602-0317", "26.04"), ("24.04.3-rc1", "24.04.3"),
    ("dtk", None), ("dtk-latest", None), ("dtk-24", None), ("dtk-\u0662\u0664.04", None), ("dtk-" + "9" * 40, None),
])
def test_dtk_versions_in_names(name: str, version: str | None) -> None:
    assert dtk.version_in(name) == version


def test_the_images_dtk_is_read_inside_it(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "opt/dtk-23.10/.info").mkdir(parents=True)
    (rootfs / "opt/dtk-24.04.1").mkdir()
    with InRoot(str(rootfs)) as image:
        assert dtk.image_version(image) == "24.04.1"  # no /opt/dtk: the newest tree
    (rootfs / "opt/dtk").symlink_to("/opt/dtk-23.10")  # absolute: resolved inside the image, never on the host
    (rootfs / "opt/dtk-23.10/.info/version").write_text("23.10.1\n")
    with InRoot(str(rootfs)) as image:
        assert dtk.image_version(image) == "23.10.1"


@pytest.mark.parametrize(("driver", "image", "outcome"), [
    ("6.2.26", "24.04.2", None), ("6.2.26", "25.04", None), ("6.2.26", "22.10", "runs DTK 24.04 to 25.04"),
    ("5.16.18", "23.10", None), ("6.3.8", "24.04", "runs DTK 25.04 to 25.04"),
    ("7.0.1", "25.04", "does not know which DTK releases"),
])
def test_the_images_dtk_against_the_drivers_window(tmp_path: Path, driver: str, image: str,
                                                   outcome: str | None) -> None:
    root = Root(build_host(str(tmp_path / "host"), HostSpec(hygon=1, hygon_driver=driver)))
    inventory = discover(root)
    selected = select_all(parse_request({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "hygon"}, {}), inventory)
    facts = HostFacts(image_read=True, image_stacks=(("hygon", image),))
    verdict = check(selected, {}, {}, facts)
    if outcome is None:
        assert verdict.warnings == ()
    else:
        (warning,) = verdict.warnings
        assert outcome in warning and f"the image ships DTK {image}" in warning
    if outcome and "runs DTK" in outcome:
        with pytest.raises(PolicyError, match='rocm_compatibility = "strict"'):
            check(selected, {}, {}, facts, "strict")


def test_the_simulator_refuses_amd_and_hygon_on_one_host(tmp_path: Path) -> None:
    with pytest.raises(SimulatorError, match="not both"):
        build_host(str(tmp_path / "host"), HostSpec(amd=1, hygon=1))


def test_the_module_name_follows_the_driver(tmp_path: Path) -> None:
    old = build_host(str(tmp_path / "old"), HostSpec(hygon=1, hygon_driver="6.2.26"))
    new = build_host(str(tmp_path / "new"), HostSpec(hygon=1, hygon_driver="6.3.8"))
    assert Path(f"{old}/sys/module/hydcu/version").exists() and Path(f"{new}/sys/module/hycu/version").exists()
    assert discover(Root(new)).vendor("hygon").driver_version == "6.3.8"  # type: ignore[union-attr]
