"""AMD compute partitions on fake sysfs trees: SPX (whole GPUs, as before) and CPX (each partition a GPU of its
own, as ROCm counts them, knowing the physical GPU it shares), and the planning that follows."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuhook.errors import PolicyError
from gpuhook.host.inventory import Inventory
from gpuhook.host.root import Root
from gpuhook.plan.select import plan_edits, select_all
from gpuhook.plan.tuning import settings_for
from gpuhook.request.tuning import Tuning
from gpuhook.vendors.discover import discover
from tests.unit.parsing import parse_request

FakeHost = Callable[..., str]


def test_spx_gpus_are_whole(fake_host: FakeHost) -> None:
    amd = discover(Root(fake_host(amd=2))).vendor("amd")
    assert amd is not None and [(g.parent, g.slice, len(g.nodes)) for g in amd.gpus] == [("", "", 2), ("", "", 2)]


@pytest.mark.parametrize(("mode", "per"), [("DPX", 2), ("CPX", 8)], ids=["dpx", "cpx"])
def test_partitions_are_gpus_of_their_own_on_one_physical_gpu(fake_host: FakeHost, mode: str, per: int) -> None:
    root = fake_host(amd=2, amd_partitions=mode)
    amd = discover(Root(root)).vendor("amd")
    assert amd is not None and len(amd.gpus) == 2 * per
    for g in amd.gpus:
        physical = g.index // per
        assert g.pci == f"0000:{0x80 + physical:02x}:00.0" and g.slice == str(g.index % per)
        assert g.parent == hex(0x5A1E000000000000 + physical) and g.profile == mode and g.uuid == ""
        assert [n.path for n in g.nodes] == [f"/dev/dri/renderD{128 + g.index}"]  # never the device's card node
        assert g.sysfs == f"/sys/devices/pci0000:00/{g.pci}"  # the physical device's tunables (host path)
    assert len(amd.siblings(amd.gpus[1])) == per and amd.gpus[per] not in amd.siblings(amd.gpus[1])


def test_one_cpx_partition_by_index_gets_its_render_node_only(fake_host: FakeHost) -> None:
    inv = discover(Root(fake_host(amd=1, amd_partitions="CPX")))
    e = plan_edits(parse_request({}, {"AMD_VISIBLE_DEVICES": "3"}), inv)
    assert [n.path for n in e.device_nodes] == ["/dev/kfd", "/dev/dri/renderD131"]


def test_tuning_a_partition_is_refused_unless_every_sibling_is_held(fake_host: FakeHost) -> None:
    inv: Inventory = discover(Root(fake_host(amd=2, amd_partitions="DPX")))
    one = select_all(parse_request({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "amd"}, {}), inv)
    with pytest.raises(PolicyError, match=r"whole GPU 1 \(0x5a1e000000000000\).*not 0\)"):
        settings_for(Tuning(perf_level="high"), one)
    both = select_all(parse_request({"gpuhook.dev/gpus": "0,1", "gpuhook.dev/vendor": "amd"}, {}), inv)
    (s,) = settings_for(Tuning(perf_level="high"), both)  # one setting on the physical GPU
    assert (s.gpu, s.name) == ("0000:80:00.0", "perf_level")


def test_the_device_plugin_names_a_partition_by_its_rocm_index_and_the_runtime_finds_its_record(
        fake_host: FakeHost) -> None:
    from gpuhook.kubernetes.device_plugin.devices import advertise
    from gpuhook.request.container import Selection

    inv = discover(Root(fake_host(amd=1, amd_partitions="QPX")))
    amd = inv.vendor("amd")
    assert amd is not None
    devices = advertise(amd, 1, {})
    assert [(d.id, d.name) for d in devices] == [(f"0x5a1e000000000000/{i}", str(i)) for i in range(4)]
    from gpuhook.plan.select import select
    from gpuhook.vendors.registry import all_vendors

    sel = Selection(vendor="amd", devices=(devices[2].gpu,), source="gpuhook.dev/allocation",
                    raw="x")  # as authority.authorize builds it
    _, gpus = select(sel, inv, {v.NAME: v for v in all_vendors()})
    assert [g.index for g in gpus] == [2]
