"""The allocator tested with literal units and inventories: NUMA first, least used, stable ties."""

from __future__ import annotations

import itertools

import pytest

from gpuhook.edits import DeviceNode
from gpuhook.errors import PlanError
from gpuhook.host.inventory import Gpu, VendorInventory
from gpuhook.plan.allocate import Unit, pick, resolve_count
from gpuhook.request.container import Selection
from tests.unit.parsing import parse_request


def _u(id_: str, numa: int = -1, order: int = 0, gpu: str | None = None) -> Unit:
    return Unit(id_, gpu or id_.split("::")[0], numa, order)


# Four whole GPUs: g0, g1 on NUMA node 0, g2, g3 on node 1.
FOUR = (_u("g0", 0, 0), _u("g1", 0, 1), _u("g2", 1, 2), _u("g3", 1, 3))
# Two GPUs with two shares each, on one node.
SHARES = (_u("A::0", 0, 0), _u("A::1", 0, 0), _u("B::0", 0, 1), _u("B::1", 0, 1))

PICKS = [
    ("first node that fits", FOUR, 2, (), None, ("g0", "g1")),
    ("node with all wanted beats a lower one", (_u("g0", 0, 0), _u("g1", 1, 1), _u("g2", 1, 2)), 2, (), None,
     ("g1", "g2")),
    ("least used fitting node", FOUR, 2, (), {"g0": 1}, ("g2", "g3")),
    ("least used gpu within a node", (_u("a", -1, 0), _u("b", -1, 1), _u("c", -1, 2)), 1, (), {"a": 2, "b": 1},
     ("c",)),
    ("must first, then its own node", FOUR, 2, ("g3",), None, ("g3", "g2")),
    ("must kept even on a busy node", FOUR, 2, ("g1",), {"g0": 5}, ("g1", "g0")),
    ("must cut to size", FOUR, 2, ("g2", "g1", "g0"), None, ("g2", "g1")),
    ("must repeated counts once", FOUR, 2, ("g2", "g2"), None, ("g2", "g3")),
    ("must not available ignored", FOUR, 1, ("zz",), None, ("g0",)),
    ("shares spread over gpus", SHARES, 2, (), None, ("A::0", "B::0")),
    ("shares spread after a must", SHARES, 2, ("A::1",), None, ("A::1", "B::0")),
    ("shares of one gpu when they must", SHARES, 3, (), None, ("A::0", "B::0", "A::1")),
    ("shares: least used gpu first", SHARES, 1, (), {"A": 1}, ("B::0",)),
    ("no node fits: largest first", (_u("g0", 0, 0), _u("g1", 1, 1), _u("g2", 1, 2), _u("g3", 2, 3)), 4, (), None,
     ("g1", "g2", "g0", "g3")),
    ("fewer when not enough", FOUR[:3], 5, (), None, ("g0", "g1", "g2")),
    ("nothing available", (), 2, (), None, ()),
    ("size zero", FOUR, 0, (), None, ()),
    ("ties by gpu index, not id", (_u("b", -1, 0), _u("a", -1, 1)), 1, (), None, ("b",)),
    ("ties on one index by id", (_u("y", -1, 0), _u("x", -1, 0)), 1, (), None, ("x",)),
]


@pytest.mark.parametrize(("available", "size", "must", "in_use", "expected"), [p[1:] for p in PICKS],
                         ids=[p[0] for p in PICKS])
def test_pick(available: tuple[Unit, ...], size: int, must: tuple[str, ...], in_use: dict[str, int] | None,
              expected: tuple[str, ...]) -> None:
    assert pick(available, size, must, in_use) == expected


@pytest.mark.parametrize("size", [1, 2, 3, 4], ids=["one", "two", "three", "four"])
def test_pick_is_stable_whatever_the_input_order(size: int) -> None:
    units = (*FOUR, _u("g4", -1, 4))
    answers = {pick(list(p), size) for p in itertools.permutations(units)}
    assert answers == {pick(units, size)}


def test_pick_does_not_change_in_use() -> None:
    in_use = {"A": 1}
    pick(SHARES, 2, (), in_use)
    assert in_use == {"A": 1}


def _node(path: str, minor: int) -> DeviceNode:
    return DeviceNode(path=path, kind="c", major=195, minor=minor, mode=0o666, uid=0, gid=0)


def _gpu(i: int, missing: tuple[str, ...] = (), uuid: str | None = None) -> Gpu:
    return Gpu(vendor="nvidia", index=i, uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000" if uuid is None else uuid,
               pci=f"0000:{0x10 + i:02x}:00.0", model="H100", nodes=(_node(f"/dev/nvidia{i}", i),), missing=missing)


def _inv(*gpus: Gpu) -> VendorInventory:
    return VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=gpus, shared_nodes=(_node("/dev/nvidiactl",
                                                                                                       255),))


U = [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(4)]
NUMA = {"0000:10:00.0": 0, "0000:11:00.0": 0, "0000:12:00.0": 1, "0000:13:00.0": 1}
HOST = _inv(*(_gpu(i) for i in range(4)))
C1 = "abcdef0123456789" * 4
C2 = "0123456789abcdef" * 4


def _count(n: int) -> Selection:
    (sel,) = parse_request({"gpuhook.dev/gpus": f"count:{n}"}, {}).selections
    return sel


RESOLVES = [
    ("one node", HOST, 2, {}, NUMA, (U[0], U[1])),
    ("busy gpu moves it to the other node", HOST, 2, {U[0]: C1}, NUMA, (U[2], U[3])),
    ("missing node skipped", _inv(_gpu(0), _gpu(1, ("/dev/nvidia1",)), _gpu(2), _gpu(3)), 3, {}, NUMA,
     (U[2], U[3], U[0])),
    ("unknown numa: by index", HOST, 3, {U[1]: C1}, {}, (U[0], U[2], U[3])),
    ("all of them", HOST, 4, {}, NUMA, (U[0], U[1], U[2], U[3])),
    ("pci address without uuid", _inv(_gpu(0, uuid=""), _gpu(1)), 1, {U[1]: C1}, {}, ("0000:10:00.0",)),
]


@pytest.mark.parametrize(("inv", "n", "users", "numa", "devices"), [r[1:] for r in RESOLVES],
                         ids=[r[0] for r in RESOLVES])
def test_resolve_count(inv: VendorInventory, n: int, users: dict[str, str], numa: dict[str, int],
                       devices: tuple[str, ...]) -> None:
    assert resolve_count(_count(n), inv, "NVIDIA", users, numa) == Selection(
        vendor="nvidia", devices=devices, source="gpuhook.dev/gpus", raw=f"count:{n}", count=0)


def test_resolve_count_names_busy_and_broken_gpus() -> None:
    inv = _inv(_gpu(0), _gpu(1), _gpu(2), _gpu(3, ("/dev/nvidia3",)))
    with pytest.raises(PlanError) as e:
        resolve_count(_count(3), inv, "NVIDIA", {U[0]: C1, U[1]: C2}, NUMA)
    assert str(e.value) == (
        "gpuhook.dev/gpus='count:3': only 1 of this host's 4 NVIDIA GPUs are free (GPU 0 by container "
        "abcdef012345; GPU 1 by container 0123456789ab; GPU 3 lacks /dev/nvidia3): stop a GPU container, ask for "
        "fewer, or name GPUs")


def test_resolve_count_on_a_host_without_gpus() -> None:
    with pytest.raises(PlanError, match=r"only 0 of this host's 0 NVIDIA GPUs are free \(the host has no more\)"):
        resolve_count(_count(1), _inv(), "NVIDIA", {}, {})


def test_resolve_count_refuses_rather_than_giving_fewer() -> None:
    with pytest.raises(PlanError, match=r"count:4'.*only 3 of this host's 4 .*GPU 2 by container abcdef012345\)"):
        resolve_count(_count(4), HOST, "NVIDIA", {U[2]: C1}, NUMA)
