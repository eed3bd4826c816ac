"""The one check of asked settings against the GPUs' own ranges (tuning/backends.check_ranges over each vendor's
backend `check`), against the simulator's stub NVML, stub amd-smi and amdgpu sysfs files; and the backends' `set`
making it again, last, for a value asked but never for an original given back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.errors import TuningError
from gpuhook.host.root import Root
from gpuhook.tuning.backends import BackendSet, check_ranges
from gpuhook.vendors.contract import Setting
from gpuhook.vendors.discover import discover

FakeHost = Callable[..., str]


def _setting(host: str, vendor: str, name: str, value: str) -> Setting:
    inv = discover(Root(host)).vendor(vendor)
    assert inv is not None
    g = inv.gpus[0]
    return Setting(vendor=vendor, gpu=g.uuid or g.pci, index=g.index, pci=g.pci,
                   device=g.uuid if vendor == "nvidia" else g.sysfs, name=name, value=value)


def _log(host: str, stub: str) -> list[str]:
    path = Path(host) / f"var/lib/gpuhook-sim/{stub}.log"
    return path.read_text().split() if path.exists() else []


# (id, host, vendor, setting, value, refusal or "" for a value the GPU takes)
CASES = [
    ("nvidia clocks inside", {"nvidia": 1}, "nvidia", "clocks", "345-1980", ""),
    ("nvidia clocks above", {"nvidia": 1}, "nvidia", "clocks", "5000-5000",
     "locks its graphics clock within 345-1980 MHz: 5000 MHz refused"),
    ("nvidia clocks below", {"nvidia": 1}, "nvidia", "clocks", "200-1500", "345-1980 MHz: 200-1500 MHz refused"),
    ("nvidia power inside", {"nvidia": 1}, "nvidia", "power_limit", "100000", ""),
    ("nvidia power above", {"nvidia": 1}, "nvidia", "power_limit", "5000000",
     "takes a power limit of 100-700 W: 5000 W refused"),
    ("nvidia fan inside", {"nvidia": 1}, "nvidia", "fan", "30", ""),
    ("nvidia fan auto", {"nvidia": 1}, "nvidia", "fan", "auto", ""),
    ("nvidia fan below", {"nvidia": 1}, "nvidia", "fan", "20", "runs its fans at 30-100%: 20% refused"),
    ("nvidia fanless", {"nvidia": 1, "fans": 0}, "nvidia", "fan", "auto", "has no fan"),
    ("nvidia compute mode", {"nvidia": 1}, "nvidia", "compute_mode", "exclusive-process", ""),
    ("sysfs clocks inside", {"amd": 1, "amdsmi": False}, "amd", "sclk", "500-2100", ""),
    ("sysfs clocks above", {"amd": 1, "amdsmi": False}, "amd", "sclk", "5000-5000",
     "runs its graphics clock within 500-2100 MHz: 5000 MHz refused"),
    ("sysfs clocks between levels", {"amd": 1, "amdsmi": False}, "amd", "sclk", "1300-1600",
     "has sclk levels 500, 1200, 1700, 2100 MHz: none within 1300-1600 MHz"),
    ("sysfs power inside", {"amd": 1, "amdsmi": False}, "amd", "power_cap", "750000000", ""),
    ("sysfs power above", {"amd": 1, "amdsmi": False}, "amd", "power_cap", "5000000000",
     "takes a power cap of 100-750 W (power1_cap_min/power1_cap_max): 5000 W refused"),
    ("sysfs power below", {"amd": 1, "amdsmi": False}, "amd", "power_cap", "50000000", "50 W refused"),
    ("sysfs fan inside", {"amd": 1, "amdsmi": False}, "amd", "fan", "20", ""),
    ("sysfs fan below", {"amd": 1, "amdsmi": False}, "amd", "fan", "10",
     "runs its fan at 20-100% (pwm1_min/pwm1_max 51-255): 10% refused"),
    ("sysfs fanless", {"amd": 1, "amdsmi": False, "fans": 0}, "amd", "fan", "auto", "has no fan control"),
    ("sysfs perf level", {"amd": 1, "amdsmi": False}, "amd", "perf_level", "high", ""),
    ("amdsmi clocks above", {"amd": 1, "amdsmi": True}, "amd", "sclk", "1200-3000",
     "runs its graphics clock within 500-2100 MHz: 1200-3000 MHz refused"),
    ("amdsmi power above", {"amd": 1, "amdsmi": True}, "amd", "power_cap", "5000000000",
     "takes a power cap of 100-750 W (amd-smi): 5000 W refused"),
    ("amdsmi power inside", {"amd": 1, "amdsmi": True}, "amd", "power_cap", "100000000", ""),
    ("amdsmi fan below", {"amd": 1, "amdsmi": True}, "amd", "fan", "10", "runs its fan at 20-100%"),
    ("hygon clocks above", {"hygon": 1}, "hygon", "sclk", "5000-5000", "within 500-2100 MHz: 5000 MHz refused"),
    ("hygon power above", {"hygon": 1}, "hygon", "power_cap", "5000000000", "5000 W refused"),
]


@pytest.mark.parametrize(("host", "vendor", "name", "value", "said"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_check_ranges(fake_host: FakeHost, tmp_path: Path, host: dict[str, object], vendor: str, name: str,
                      value: str, said: str) -> None:
    root = fake_host(**host)
    before = {p: p.read_bytes() for p in Path(root, "sys/devices").rglob("*") if p.is_file()}
    s = _setting(root, vendor, name, value)
    if said:
        with pytest.raises(TuningError) as info:
            check_ranges(Root(root), str(tmp_path), [s])
        assert said in str(info.value) and "\n" not in str(info.value)
        assert f"GPU 0 ({s.gpu if vendor == 'nvidia' else s.pci})" in str(info.value) or "has no fan" in said
    else:
        check_ranges(Root(root), str(tmp_path), [s])
    assert {p: p.read_bytes() for p in Path(root, "sys/devices").rglob("*") if p.is_file()} == before  # no write
    assert not [c for c in _log(root, "nvml") + _log(root, "amdsmi") if c.startswith(("set-", "reset-", "auto-"))]


def test_nothing_asked_loads_no_backend(tmp_path: Path) -> None:
    check_ranges(Root(str(tmp_path)), str(tmp_path), [])  # a host without any driver: nothing loaded, no error


def test_the_first_setting_the_gpu_cannot_take_is_named(fake_host: FakeHost, tmp_path: Path) -> None:
    root = fake_host(nvidia=1)
    good, bad = _setting(root, "nvidia", "power_limit", "300000"), _setting(root, "nvidia", "fan", "20")
    with pytest.raises(TuningError, match="20% refused"):
        check_ranges(Root(root), str(tmp_path), [good, bad])


@pytest.mark.parametrize(("host", "vendor", "name", "value", "said"), [
    ({"nvidia": 1}, "nvidia", "clocks", "5000-5000", "5000 MHz refused"),
    ({"nvidia": 1}, "nvidia", "fan", "20", "20% refused"),
    ({"amd": 1, "amdsmi": True}, "amd", "power_cap", "5000000000", "5000 W refused"),
    ({"amd": 1, "amdsmi": False}, "amd", "sclk", "5000-5000", "5000 MHz refused"),
], ids=["nvml clocks", "nvml fan", "amdsmi power", "sysfs clocks"])
def test_set_checks_last(fake_host: FakeHost, tmp_path: Path, host: dict[str, object], vendor: str, name: str,
                         value: str, said: str) -> None:
    """The prestart hook's guard: a backend's set refuses the value asked before it writes anything."""
    root = fake_host(**host)
    s = _setting(root, vendor, name, value)
    with BackendSet(Root(root), str(tmp_path)) as backends, pytest.raises(TuningError, match=said):
        backends(vendor).set(s, value)
    assert not [c for c in _log(root, "nvml") + _log(root, "amdsmi") if c.startswith("set-")]


def test_an_original_given_back_is_not_checked(fake_host: FakeHost, tmp_path: Path) -> None:
    """A restore writes the GPU's own original, whatever the range says now (here an admin's cap below the
    board's minimum): only the value asked (Setting.value) is checked."""
    root = fake_host(amd=1, amdsmi=False)
    s = _setting(root, "amd", "power_cap", "300000000")
    cap = next(Path(root, "sys/devices").rglob("hwmon0/power1_cap"))
    with BackendSet(Root(root), str(tmp_path)) as backends:
        backends("amd").set(s, "90000000")
    assert cap.read_text().strip() == "90000000"
