"""What the device plugin advertises and prefers, from literal inventories."""

from __future__ import annotations

import pytest

from gpuhook.edits import DeviceNode
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.kubernetes.device_plugin.devices import Device, advertise, gpu_key, gpus_of, preferred

U = [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(4)]
PCI = [f"0000:{0x10 + i:02x}:00.0" for i in range(4)]


def _gpu(i: int, missing: tuple[str, ...] = (), uuid: str | None = None) -> Gpu:
    return Gpu(vendor="nvidia", index=i, uuid=U[i] if uuid is None else uuid, pci=PCI[i], model="H100",
               nodes=(DeviceNode(path=f"/dev/nvidia{i}", kind="c", major=195, minor=i, mode=0o666, uid=0, gid=0),),
               missing=missing)


def _inv(*gpus: Gpu) -> VendorInventory:
    return VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=gpus, shared_nodes=())


TWO = _inv(_gpu(0), _gpu(1))


def test_gpu_key() -> None:
    assert (gpu_key(U[0], PCI[0]), gpu_key("", PCI[0])) == (U[0], PCI[0])


ADVERTISED = [
    ("whole gpus", TWO, 1, {PCI[0]: 1}, (),
     (Device(id=U[0], gpu=U[0], index=0, numa=1, healthy=True), Device(id=U[1], gpu=U[1], index=1, numa=-1,
                                                                       healthy=True))),
    ("replicas", TWO, 2, {}, (),
     (Device(id=f"{U[0]}::0", gpu=U[0], index=0, numa=-1, healthy=True), Device(id=f"{U[0]}::1", gpu=U[0], index=0,
                                                                                numa=-1, healthy=True),
      Device(id=f"{U[1]}::0", gpu=U[1], index=1, numa=-1, healthy=True), Device(id=f"{U[1]}::1", gpu=U[1], index=1,
                                                                                numa=-1, healthy=True))),
    ("missing node", _inv(_gpu(0), _gpu(1, ("/dev/nvidia1", "/dev/nvidia-caps"))), 1, {}, (),
     (Device(id=U[0], gpu=U[0], index=0, numa=-1, healthy=True), Device(id=U[1], gpu=U[1], index=1, numa=-1,
                                                                        healthy=False,
                                                                        why="device node /dev/nvidia1 is missing"))),
    ("missing node, every share", _inv(_gpu(0, ("/dev/nvidia0",))), 2, {}, (),
     (Device(id=f"{U[0]}::0", gpu=U[0], index=0, numa=-1, healthy=False, why="device node /dev/nvidia0 is missing"),
      Device(id=f"{U[0]}::1", gpu=U[0], index=0, numa=-1, healthy=False, why="device node /dev/nvidia0 is missing"))),
    ("pci address without uuid", _inv(_gpu(0, uuid="")), 1, {PCI[0]: 0}, (),
     (Device(id=PCI[0], gpu=PCI[0], index=0, numa=0, healthy=True),)),
    ("vanished gpu stays, unhealthy", _inv(_gpu(0)), 1, {}, (Device(id=U[1], gpu=U[1], index=1, numa=0, healthy=True),),
     (Device(id=U[0], gpu=U[0], index=0, numa=-1, healthy=True), Device(id=U[1], gpu=U[1], index=1, numa=0,
                                                                        healthy=False,
                                                                        why="discovery no longer sees this GPU"))),
    ("known and present: as discovered now", TWO, 1, {},
     (Device(id=U[0], gpu=U[0], index=0, numa=1, healthy=False, why="device node /dev/nvidia0 is missing"),),
     (Device(id=U[0], gpu=U[0], index=0, numa=-1, healthy=True), Device(id=U[1], gpu=U[1], index=1, numa=-1,
                                                                        healthy=True))),
    ("vendor gone", None, 1, {}, (Device(id=U[0], gpu=U[0], index=0, numa=0, healthy=True), Device(id=U[1], gpu=U[1],
                                                                                                   index=1, numa=1,
                                                                                                   healthy=True)),
     (Device(id=U[0], gpu=U[0], index=0, numa=0, healthy=False, why="the driver is not loaded"),
      Device(id=U[1], gpu=U[1], index=1, numa=1, healthy=False, why="the driver is not loaded"))),
    ("vendor gone, nothing known", None, 2, {}, (), ()),
    ("sorted by index", _inv(_gpu(3), _gpu(1)), 1, {}, (Device(id=U[2], gpu=U[2], index=2, numa=-1, healthy=True),),
     (Device(id=U[1], gpu=U[1], index=1, numa=-1, healthy=True), Device(id=U[2], gpu=U[2], index=2, numa=-1,
                                                                        healthy=False,
                                                                        why="discovery no longer sees this GPU"),
      Device(id=U[3], gpu=U[3], index=3, numa=-1, healthy=True))),
]


@pytest.mark.parametrize(("inv", "replicas", "numa", "known", "devices"), [a[1:] for a in ADVERTISED],
                         ids=[a[0] for a in ADVERTISED])
def test_advertise(inv: VendorInventory | None, replicas: int, numa: dict[str, int], known: tuple[Device, ...],
                   devices: tuple[Device, ...]) -> None:
    assert advertise(inv, replicas, numa, known) == devices


def test_ten_shares_sort_by_id_within_a_gpu() -> None:
    ids = [d.id for d in advertise(_inv(_gpu(0)), 10, {})]
    assert ids == sorted(f"{U[0]}::{n}" for n in range(10))
    assert len(set(ids)) == 10


SHARED = advertise(TWO, 2, {})
GPUS_OF = [
    ("shares deduped", [f"{U[0]}::0", f"{U[0]}::1", f"{U[1]}::0"], (U[0], U[1])),
    ("in the order asked", [f"{U[1]}::1", f"{U[0]}::0"], (U[1], U[0])),
    ("nothing", [], ()),
]


@pytest.mark.parametrize(("ids", "gpus"), [g[1:] for g in GPUS_OF], ids=[g[0] for g in GPUS_OF])
def test_gpus_of(ids: list[str], gpus: tuple[str, ...]) -> None:
    assert gpus_of(ids, SHARED) == gpus


def test_gpus_of_unknown_id() -> None:
    with pytest.raises(KeyError) as e:
        gpus_of([f"{U[0]}::0", U[0]], SHARED)
    assert e.value.args == (U[0],)


def _d(i: int, numa: int = -1, share: int | None = None, healthy: bool = True) -> Device:
    return Device(id=U[i] if share is None else f"{U[i]}::{share}", gpu=U[i], index=i, numa=numa, healthy=healthy)


FOUR = (_d(0, 0), _d(1, 0), _d(2, 1), _d(3, 1))
ALL4 = [d.id for d in FOUR]
SHARES = (_d(0, 0, 0), _d(0, 0, 1), _d(1, 0, 0), _d(1, 0, 1))

PREFERRED = [
    ("one node", FOUR, ALL4, [], 2, (U[0], U[1])),
    ("must first, its node", FOUR, ALL4, [U[3]], 2, (U[3], U[2])),
    ("node with room", FOUR, [U[1], U[2], U[3]], [], 2, (U[2], U[3])),
    ("must not available ignored", FOUR, [U[1], U[2]], [U[0]], 1, (U[1],)),
    ("unhealthy not picked", (_d(0, healthy=False), _d(1), _d(2)), [U[0], U[1], U[2]], [], 2, (U[1], U[2])),
    ("unhealthy never fills up", (_d(0, healthy=False), _d(1)), [U[0], U[1]], [], 2, (U[1],)),
    ("unhealthy must-include picked", (_d(0, healthy=False), _d(1)), [U[0], U[1]], [U[0]], 2, (U[0], U[1])),
    ("least shared gpu", SHARES, [f"{U[0]}::1", f"{U[1]}::0", f"{U[1]}::1"], [], 1, (f"{U[1]}::0",)),
    ("spread, then least shared", SHARES, [f"{U[0]}::1", f"{U[1]}::0", f"{U[1]}::1"], [], 2,
     (f"{U[1]}::0", f"{U[0]}::1")),
    ("shares of both gpus", SHARES, [d.id for d in SHARES], [], 2, (f"{U[0]}::0", f"{U[1]}::0")),
]


@pytest.mark.parametrize(("advertised", "available", "must", "size", "picked"), [p[1:] for p in PREFERRED],
                         ids=[p[0] for p in PREFERRED])
def test_preferred(advertised: tuple[Device, ...], available: list[str], must: list[str], size: int,
                   picked: tuple[str, ...]) -> None:
    assert preferred(advertised, available, must, size) == picked


def _slice(mig: int, profile: str, uuid: str = "", missing: tuple[str, ...] = ()) -> Gpu:
    return Gpu(vendor="nvidia", index=0, uuid=uuid, pci=PCI[0], model="H100", nodes=_gpu(0).nodes, missing=missing,
               parent=U[0], slice=f"0:{mig}",
               profile=profile, place=f"gi{mig + 1}/ci0")


MIG = VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=(_gpu(0), _gpu(1)), shared_nodes=(),
                      slices=(_slice(0, "3g.40gb", "MIG-a"), _slice(1, "1g.10gb", "MIG-b"), _slice(2, "1g.10gb")))
STRATEGIES = [
    ("none: whole GPUs", "none", {"nvidia.com/gpu": [U[0], U[1]]}),
    ("single: slices in place of their GPU", "single", {"nvidia.com/gpu": [U[1], "MIG-a", "MIG-b", f"{U[0]}/0:2"]}),
    ("mixed: a resource per profile", "mixed", {"nvidia.com/gpu": [U[1]], "nvidia.com/mig-3g.40gb": ["MIG-a"],
                                                 "nvidia.com/mig-1g.10gb": ["MIG-b", f"{U[0]}/0:2"]}),
]


@pytest.mark.parametrize(("strategy", "expected"), [s[1:] for s in STRATEGIES], ids=[s[0] for s in STRATEGIES])
def test_mig_strategies(strategy: str, expected: dict[str, list[str]]) -> None:
    from gpuhook.kubernetes.device_plugin.devices import resources

    found = resources(MIG, "nvidia.com/gpu", strategy)
    assert {r: [g.key() for g in gpus] for r, gpus in found.items()} == expected


def test_a_slice_is_named_by_uuid_else_index_form_and_healthy_on_its_own() -> None:
    from gpuhook.frozen import replace

    sick = _slice(1, "1g.10gb", missing=("/dev/nvidia-caps/nvidia-cap22",))
    inv = replace(MIG, slices=(MIG.slices[0], sick))
    devices = advertise(inv, 1, {}, gpus=inv.slices)
    assert {d.id: (d.name, d.healthy) for d in devices} == {"MIG-a": ("MIG-a", True), f"{U[0]}/0:1": ("0:1", False)}
    assert "nvidia-cap22" in next(d.why for d in devices if not d.healthy)
