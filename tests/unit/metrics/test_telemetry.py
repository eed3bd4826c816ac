"""Telemetry through the real pynvml and amdsmi on the simulator's stub libraries (and amdgpu's sysfs files): the
values the stubs are told to report, one session across scrapes, a new one after a driver reload, an error (and
an unhealthy GPU) where nothing can be read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from gpuhook.host.inventory import Gpu, Inventory, VendorInventory
from gpuhook.host.root import Root
from gpuhook.metrics.telemetry import Sessions
from gpuhook.simulator import telemetry as sim_telemetry
from gpuhook.vendors import registry
from gpuhook.vendors.amd import sim as sim_amd
from gpuhook.vendors.contract import Reading, Setting
from gpuhook.vendors.discover import discover
from gpuhook.vendors.nvidia import sim as sim_nvidia

from ...conftest import FakeHost

HOOK_DIR = str(Path(__file__).parents[3] / "hook")


def _inits(host: str) -> int:
    path = Path(host + "/var/lib/gpuhook-sim/nvml.inits")
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_nvml_reports_what_the_stub_is_told_and_locked_clocks(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=2)
    sim_nvidia.set_telemetry(host, 1, utilization=87, memory_used=40 << 30, power_mw=612250, temperature=71,
                             clock_mhz=1755)
    root = Root(host)
    backend = registry.tuning("nvidia").backend(root, "/nonexistent")  # it locks GPU 0's clocks, as a container would
    try:
        gpu0 = discover(root).vendors[0].gpus[0]
        backend.set(Setting(vendor="nvidia", gpu=gpu0.uuid, index=0, pci=gpu0.pci, device=gpu0.uuid, name="clocks",
                            value="1500-1500"), "1500-1500")
    finally:
        backend.close()
    sessions = Sessions(root)
    try:
        inv = discover(root)
        got = sessions.read(inv)
    finally:
        sessions.close()
    uuids = [g.uuid for g in inv.vendors[0].gpus]
    assert got[uuids[0]] == Reading(utilization=0.0, memory_used=567017472, memory_total=85520809984, power=72.0,
                                    temperature=33, sm_clock=1500e6, power_limit=700.0)
    assert got[uuids[1]] == Reading(utilization=0.87, memory_used=40 << 30, memory_total=85520809984, power=612.25,
                                    temperature=71, sm_clock=1755e6, power_limit=700.0)


def test_one_nvml_session_across_scrapes_and_a_new_one_after_a_driver_reload(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=1)
    root = Root(host)
    sessions = Sessions(root)
    try:
        before = _inits(host)
        for _ in range(5):
            assert not sessions.read(discover(root))[discover(root).vendors[0].gpus[0].uuid].error
        assert _inits(host) == before + 1
        version = Path(host + "/proc/driver/nvidia/version")
        version.write_text(version.read_text().replace("550.54.15", "550.90.07"))  # the module was reloaded
        sessions.read(discover(root))
        sessions.read(discover(root))
        assert _inits(host) == before + 2
    finally:
        sessions.close()
    assert not Path(host + "/var/lib/gpuhook-sim/nvml.log").exists()  # nothing was ever set


def test_without_nvml_every_gpu_gets_the_error(fake_host: FakeHost) -> None:
    host = fake_host(nvidia=2)
    for lib in Path(host + "/usr/lib/x86_64-linux-gnu").glob("libnvidia-ml.so*"):
        lib.unlink()
    inv = discover(Root(host))
    got = Sessions(Root(host)).read(inv)
    assert {u: r.error for u, r in got.items()} == {
        g.uuid: f"no libnvidia-ml under {host}: NVIDIA telemetry needs the driver's NVML" for g in inv.vendors[0].gpus}


def test_amdgpu_sysfs_files(fake_host: FakeHost) -> None:
    host = fake_host(amd=2, amdsmi=False)
    sim_amd.set_telemetry(host, 1, utilization=33, memory_used=1 << 34, power_mw=455000, temperature=83,
                          clock_mhz=1900)
    root = Root(host)
    inv = discover(root)
    before = {p: p.read_bytes() for p in Path(host + "/sys/devices").rglob("*") if p.is_file()}
    got = Sessions(root).read(inv)
    assert {p: p.read_bytes() for p in before} == before  # read, never written
    gpus = inv.vendors[0].gpus
    assert got[gpus[0].uuid] == Reading(utilization=0.0, memory_used=296747008, memory_total=205822885888, power=140.0,
                                        temperature=40.0, sm_clock=2100e6, power_limit=300.0)
    assert got[gpus[1].uuid] == Reading(utilization=0.33, memory_used=1 << 34, memory_total=205822885888, power=455.0,
                                        temperature=83.0, sm_clock=1900e6, power_limit=300.0)  # the junction


def test_amdsmi_and_sysfs_report_the_same_through_the_exporter(fake_host: FakeHost, tmp_path: Path) -> None:
    """amdsmi binds one library per process: each run is its own `gpuhook exporter --once`, as in production."""
    seen = []
    for amdsmi in (True, False):
        host = fake_host(amd=2, amdsmi=amdsmi)
        sim_amd.set_telemetry(host, 0, utilization=50, power_mw=321000, temperature=66, clock_mhz=1400)
        config = tmp_path / f"{amdsmi}.toml"
        config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\n')
        done = subprocess.run([sys.executable, "-c", "from gpuhook.cli.admin import main; raise SystemExit(main())",
                               "exporter", "--once"], capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "GPUHOOK_CONFIG": str(config), "PYTHONPATH": HOOK_DIR})
        assert done.returncode == 0, done.stderr
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("gpuhook_gpu_") and 'uuid="0x5a1e000000000000"'
                 in ln and not ln.startswith("gpuhook_gpu_info")]
        seen.append(sorted(lines))
    assert seen[0] == seen[1]
    assert 'gpuhook_gpu_power_watts{uuid="0x5a1e000000000000",vendor="amd"} 321.0' in seen[0]
    assert 'gpuhook_gpu_healthy{uuid="0x5a1e000000000000",vendor="amd"} 1.0' in seen[0]
    assert len(seen[0]) == 8  # healthy and the seven telemetry families


class _FlakyTelemetry:
    """A telemetry part whose session is lost after each read, for the reopening rule."""

    def telemetry(self, root: Root, inv: VendorInventory) -> object:
        _Flaky.opened.append(inv.driver_version or "")

        class Source:
            broken = False

            def read(self, gpus: list[Gpu]) -> dict[str, Reading]:
                self.broken = inv.driver_version == "lost"
                return {g.uuid: Reading(power=1.0) for g in gpus}

            def close(self) -> None:
                _Flaky.opened.append("closed")

        return Source()


class _Flaky:
    """A vendor whose telemetry session is lost after each read."""

    NAME = "flaky"
    LABEL = "Flaky"
    ENV_KEY = "FLAKY_VISIBLE_DEVICES"
    opened: ClassVar[list[str]] = []
    telemetry = _FlakyTelemetry()


@pytest.fixture
def flaky() -> Iterator[None]:
    registry.register(_Flaky())  # type: ignore[arg-type]
    _Flaky.opened.clear()
    yield
    registry.unregister("flaky")


def _inv(version: str, *uuids: str) -> Inventory:
    return Inventory("/", (VendorInventory(vendor="flaky", driver_version=version, gpus=tuple(Gpu(vendor="flaky",
                                                                                                  index=i, uuid=u,
                                                                                                  pci="", model="",
                                                                                                  nodes=())
                                                                   for i, u in enumerate(uuids)), shared_nodes=()),))


@pytest.mark.usefixtures("flaky")
def test_sessions_reopen_on_a_new_driver_new_gpus_or_a_lost_session_and_close_when_the_driver_goes() -> None:
    sessions = Sessions(Root("/"))
    for inv in (_inv("1", "A"), _inv("1", "A"), _inv("2", "A"), _inv("2", "A", "B"), _inv("lost", "A"),
                _inv("lost", "A")):
        assert sessions.read(inv) == {g.uuid: Reading(power=1.0) for v in inv.vendors for g in v.gpus}
    sessions.read(Inventory("/", ()))
    assert _Flaky.opened == ["1", "closed", "2", "closed", "2", "closed", "lost", "closed", "lost", "closed"]
    assert json.dumps(sessions.read(Inventory("/", ()))) == "{}"


def test_hygon_dcus_through_the_exporter(fake_host: FakeHost, tmp_path: Path) -> None:
    """A Hygon DCU's telemetry: the files its driver keeps from amdgpu, under the hygon vendor."""
    host = fake_host(hygon=1)
    busy = sim_telemetry.Telemetry(71, 40 << 30, 65520 << 20, 222000, 64, 1600)
    sim_amd.telemetry_files(host, "/sys/devices/pci0000:00/0000:40:00.0", busy)
    config = tmp_path / "c.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp_path}/state"\n')
    done = subprocess.run([sys.executable, "-c", "from gpuhook.cli.admin import main; raise SystemExit(main())",
                           "exporter", "--once"], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "GPUHOOK_CONFIG": str(config), "PYTHONPATH": HOOK_DIR})
    assert done.returncode == 0, done.stderr
    assert 'gpuhook_gpu_healthy{uuid="0xdc0000000000",vendor="hygon"} 1.0' in done.stdout
    for family, value in (("power_watts", "222.0"), ("utilization_ratio", "0.71"),
                          ("memory_used_bytes", "4.294967296e+10"), ("memory_total_bytes", "6.870269952e+10"),
                          ("temperature_celsius", "64.0")):
        assert f'gpuhook_gpu_{family}{{uuid="0xdc0000000000",vendor="hygon"}} {value}' in done.stdout, family
