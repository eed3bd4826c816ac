"""The metric families from literal views: what each family holds, read back through prometheus_client's own
exposition and parser (the text Prometheus scrapes)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuhook.apply.containers import ContainerRecord
from gpuhook.edits import DeviceNode
from gpuhook.host.inventory import Gpu, Inventory, VendorInventory
from gpuhook.metrics.catalog import FAMILIES
from gpuhook.metrics.families import TuningRow, View, families, health
from gpuhook.vendors.contract import Reading

NV = [f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(2)]
AMD = "0x5a1e000000000000"


def _nv(i: int, missing: tuple[str, ...] = ()) -> Gpu:
    return Gpu(vendor="nvidia", index=i, uuid=NV[i], pci=f"0000:{0x10 + i:02x}:00.0", model="NVIDIA H100 80GB HBM3",
               nodes=(DeviceNode(path=f"/dev/nvidia{i}", kind="c", major=195, minor=i, mode=0o666, uid=0, gid=0),),
               missing=missing)


AMD_GPU = Gpu(vendor="amd", index=0, uuid=AMD, pci="0000:80:00.0", model="gfx942", nodes=(), missing=(), arch="gfx942",
              sysfs="/sys/devices/pci0000:00/0000:80:00.0")
INV = Inventory("/", (VendorInventory(vendor="nvidia", driver_version="550.54.15", gpus=(_nv(0), _nv(1)),
                                      shared_nodes=()),
                      VendorInventory(vendor="amd", driver_version="6.7.0", gpus=(AMD_GPU,), shared_nodes=())))
RUNNING = ContainerRecord(id="c1", drivers=(("nvidia", "550.54.15"),), runtime_root="/run/runc", gpus=(NV[0],),
                          pod="trainer-0",
                          namespace="ml", container="main")


def _samples(view: View) -> dict[str, list[tuple[dict[str, str], float]]]:
    """{sample name: [(labels, value)]} as a scrape of these families parses."""
    class Fixed:
        def collect(self):  # type: ignore[no-untyped-def]
            return iter(families(view))

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())  # type: ignore[arg-type]
    text = generate_latest(registry).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        out.setdefault(fam.name, [])
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_every_family_is_served_even_when_empty_and_in_catalog_order() -> None:
    fams = families(View(inventory=Inventory("/", ())))
    assert [f.name for f in fams] == [f.name.removesuffix("_total") for f in FAMILIES]
    assert [f.type for f in fams] == [f.kind for f in FAMILIES]
    served = _samples(View(inventory=Inventory("/", ())))
    assert served["gpuhook_ledger_ok"] == [({}, 1.0)] and served["gpuhook_gpu_info"] == []


def test_gpu_info_and_telemetry_per_gpu() -> None:
    reading = Reading(utilization=0.42, memory_used=2e9, memory_total=85520809984, power=250.5, temperature=61,
                      sm_clock=1.5e9, power_limit=400)
    got = _samples(View(inventory=INV, readings=((NV[0], reading), (NV[1], Reading(power=70)),
                                       (AMD, Reading(temperature=40.0)))))
    assert got["gpuhook_gpu_info"] == [
        ({"vendor": "nvidia", "index": "0", "uuid": NV[0], "pci": "0000:10:00.0", "model": "NVIDIA H100 80GB HBM3",
          "driver": "550.54.15"}, 1.0),
        ({"vendor": "nvidia", "index": "1", "uuid": NV[1], "pci": "0000:11:00.0", "model": "NVIDIA H100 80GB HBM3",
          "driver": "550.54.15"}, 1.0),
        ({"vendor": "amd", "index": "0", "uuid": AMD, "pci": "0000:80:00.0", "model": "gfx942", "driver": "6.7.0"},
         1.0)]
    gpu0 = {"vendor": "nvidia", "uuid": NV[0]}
    assert got["gpuhook_gpu_utilization_ratio"] == [(gpu0, 0.42)]
    assert got["gpuhook_gpu_memory_used_bytes"] == [(gpu0, 2e9)]
    assert got["gpuhook_gpu_memory_total_bytes"] == [(gpu0, 85520809984)]
    assert got["gpuhook_gpu_power_watts"] == [(gpu0, 250.5), ({"vendor": "nvidia", "uuid": NV[1]}, 70)]
    assert got["gpuhook_gpu_temperature_celsius"] == [(gpu0, 61), ({"vendor": "amd", "uuid": AMD}, 40)]
    assert got["gpuhook_gpu_sm_clock_hertz"] == [(gpu0, 1.5e9)]
    assert got["gpuhook_gpu_power_limit_watts"] == [(gpu0, 400)]


HEALTH = [
    ("all well, telemetry off", INV, None, (), {("nvidia", NV[0]): "", ("nvidia", NV[1]): "", ("amd", AMD): ""}),
    ("unreadable telemetry", INV, ((NV[0], Reading(utilization=1.0)), (NV[1], Reading(error="NVML: GPU is lost")),
                                   (AMD, Reading(power=1))),
     (), {("nvidia", NV[0]): "", ("nvidia", NV[1]): "its telemetry cannot be read (NVML: GPU is lost)",
          ("amd", AMD): ""}),
    ("no reading at all", Inventory("/", (VendorInventory(vendor="amd", driver_version=None, gpus=(AMD_GPU,),
                                                          shared_nodes=()),)), (), (),
     {("amd", AMD): "its telemetry cannot be read (the GPU gave no reading)"}),
    ("missing node", Inventory("/", (VendorInventory(vendor="nvidia", driver_version="550", gpus=(_nv(0,
                                                                                                      ("/dev/nvidia0",
                                                                                                       )),),
                                                     shared_nodes=()),)), None,
     (), {("nvidia", NV[0]): "device node /dev/nvidia0 is missing"}),
    ("vanished gpu, driver loaded", Inventory("/", (VendorInventory(vendor="nvidia", driver_version="550", gpus=(_nv(0),
                                                                                                                 ),
                                                                    shared_nodes=()),)), None,
     (_nv(0), _nv(1)), {("nvidia", NV[0]): "", ("nvidia", NV[1]): "discovery no longer sees this GPU"}),
    ("driver unloaded", Inventory("/", ()), None, (_nv(0), AMD_GPU),
     {("nvidia", NV[0]): "the driver is not loaded", ("amd", AMD): "the driver is not loaded"}),
]


@pytest.mark.parametrize(("inv", "readings", "known", "expected"), [h[1:] for h in HEALTH], ids=[h[0] for h in HEALTH])
def test_health_is_the_device_plugins_rule_plus_telemetry(inv: Inventory, readings: tuple[tuple[str, Reading], ...]
                                                          | None, known: tuple[Gpu, ...],
                                                          expected: dict[tuple[str, str], str]) -> None:
    view = View(inventory=inv, known=known, readings=readings)
    assert health(view) == expected
    assert sorted(_samples(view)["gpuhook_gpu_healthy"], key=str) == sorted(
        (({"vendor": v, "uuid": u}, 0.0 if why else 1.0) for (v, u), why in expected.items()), key=str)


def test_allocation_carries_the_container_and_its_pod_once_per_gpu() -> None:
    two = ContainerRecord(id="c2", drivers=(("nvidia", "550.54.15"), ("amd", "6.7.0")), runtime_root="/run/runc",
                          gpus=(NV[1], AMD))
    hooked = ContainerRecord(id="c1", drivers=(("nvidia", "550.54.15"),), runtime_root="", pid=42, start_time="99",
                             gpus=(NV[0],), pod="trainer-0",
                             namespace="ml", container="main")  # the prestart hook's record of the same container
    gone_gpu = ContainerRecord(id="c3", drivers=(("amd", "6.7.0"),), runtime_root="/run/runc", gpus=("0000:99:00.0",))
    got = _samples(View(inventory=INV, records=(RUNNING, two, hooked, gone_gpu)))["gpuhook_gpu_allocated"]
    assert got == [
        ({"vendor": "nvidia", "uuid": NV[0], "container_id": "c1", "pod": "trainer-0", "namespace": "ml",
          "container": "main"}, 1.0),
        ({"vendor": "nvidia", "uuid": NV[1], "container_id": "c2", "pod": "", "namespace": "", "container": ""}, 1.0),
        ({"vendor": "amd", "uuid": AMD, "container_id": "c2", "pod": "", "namespace": "", "container": ""}, 1.0),
        ({"vendor": "amd", "uuid": "0000:99:00.0", "container_id": "c3", "pod": "", "namespace": "",
          "container": ""}, 1.0)]


def test_tuning_leases_and_counters() -> None:
    rows = (TuningRow(vendor="nvidia", gpu=NV[0], setting="power_limit", current="400000", original="700000",
                      holders=2),
            TuningRow(vendor="amd", gpu=AMD, setting="perf_level", current="high", original="auto", holders=0))
    counters = ((("prepared", "nvidia"), 7), (("prepared", "amd"), 2), (("refused", "PolicyError"), 3),
                (("someday", "x"), 1))
    got = _samples(View(inventory=INV, settings=rows, leases=((NV[1], "c9"),), counters=counters))
    assert got["gpuhook_tuning_setting"] == [
        ({"vendor": "nvidia", "uuid": NV[0], "setting": "power_limit", "current": "400000", "original": "700000"},
         1.0),
        ({"vendor": "amd", "uuid": AMD, "setting": "perf_level", "current": "high", "original": "auto"}, 1.0)]
    assert got["gpuhook_tuning_holders"] == [({"vendor": "nvidia", "uuid": NV[0], "setting": "power_limit"}, 2.0),
                                             ({"vendor": "amd", "uuid": AMD, "setting": "perf_level"}, 0.0)]
    assert got["gpuhook_gpu_exclusive"] == [({"vendor": "nvidia", "uuid": NV[1], "container_id": "c9"}, 1.0)]
    assert got["gpuhook_containers_prepared_total"] == [({"vendor": "amd"}, 2.0), ({"vendor": "nvidia"}, 7.0)]
    assert got["gpuhook_containers_refused_total"] == [({"reason": "PolicyError"}, 3.0)]


def test_ledger_stale_drivers_build_and_duration() -> None:
    old = ContainerRecord(id="old", drivers=(("nvidia", "535.104.05"),), runtime_root="/run/runc", gpus=(NV[1],))
    old_hooked = ContainerRecord(id="old", drivers=(("nvidia", "535.104.05"),), runtime_root="", pid=7, start_time="1",
                                 gpus=(NV[1],))
    in_tree = ContainerRecord(id="rocm", drivers=(("amd", ""),), runtime_root="/run/runc",
                              gpus=(AMD,))  # in-kernel amdgpu: no version
    got = _samples(View(inventory=INV, records=(RUNNING, old, old_hooked, in_tree), ledger_ok=False, duration=0.0125))
    assert got["gpuhook_stale_driver_containers"] == [({}, 1.0)]  # one container, however many records
    assert got["gpuhook_ledger_ok"] == [({}, 0.0)]
    assert got["gpuhook_exporter_scrape_duration_seconds"] == [({}, 0.0125)]
    assert got["gpuhook_build_info"] == [({"version": "0.1.0"}, 1.0)]
