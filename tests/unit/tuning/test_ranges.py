"""The one check of asked settings against the GPUs' own ranges (tuning/backends.check_ranges over each vendor's
backend `check`), against the simulator's stub NVML, stub amd-smi and amdgpu sysfs files; the prestart hook's
acquire making it again, last, for a value asked but never for an original given back; and the memo of what a GPU
took under its driver (tuning/backends.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.errors import TuningError
from gpuhook.host.processes import start_time
from gpuhook.host.root import Root
from gpuhook.tuning import ledger, session
from gpuhook.tuning.backends import MEMO, BackendSet, check_ranges
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
def test_acquire_checks_last(fake_host: FakeHost, tmp_path: Path, host: dict[str, object], vendor: str, name: str,
                             value: str, said: str) -> None:
    """The prestart hook's guard: acquire checks the value asked right before it writes, and writes nothing (the
    ledger holds nothing after) where the GPU cannot take it."""
    root = fake_host(**host)
    s = _setting(root, vendor, name, value)
    me = session.Holder("me", os.getpid(), start_time(os.getpid()))
    with BackendSet(Root(root), str(tmp_path), {vendor: "1.0"}) as backends, pytest.raises(TuningError, match=said):
        session.acquire(str(tmp_path), me, [s], [], backends)
    assert not [c for c in _log(root, "nvml") + _log(root, "amdsmi") if c.startswith("set-")]
    assert ledger.load(str(tmp_path / ledger.NAME))["settings"] == {}
    assert not (tmp_path / MEMO).exists()  # a refusal is never remembered


def _inits(host: str) -> int:
    path = Path(host) / "var/lib/gpuhook-sim/nvml.inits"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_value_a_gpu_took_is_not_checked_again_under_its_driver(fake_host: FakeHost, tmp_path: Path) -> None:
    """The shim's check remembers what the GPU took (in this process and in state_dir/ranges.json): the same value
    on the same GPU under the same driver opens no NVML session, in this process or another; another value, another
    driver version or no version known (nothing to key it by) is checked through NVML again."""
    root = fake_host(nvidia=1)
    s = _setting(root, "nvidia", "clocks", "345-1980")
    check_ranges(Root(root), str(tmp_path), [s], {"nvidia": "550.1"})
    assert _inits(root) == 1
    check_ranges(Root(root), str(tmp_path), [s], {"nvidia": "550.1"})
    assert _inits(root) == 1
    code = ("import sys; from gpuhook.host.root import Root; from gpuhook.tuning.backends import check_ranges; "
            "from gpuhook.vendors.contract import Setting; a = sys.argv[1:]; "
            "s = Setting(vendor=a[2], gpu=a[3], index=int(a[4]), pci=a[5], device=a[6], name=a[7], value=a[8]); "
            "check_ranges(Root(a[0]), a[1], [s], {'nvidia': '550.1'})")
    subprocess.run([sys.executable, "-c", code, root, str(tmp_path), s.vendor, s.gpu, str(s.index), s.pci, s.device,
                    s.name, s.value], check=True)
    assert _inits(root) == 1  # another process: from ranges.json
    other = _setting(root, "nvidia", "clocks", "400-1500")
    for again, drivers in [(other, {"nvidia": "550.1"}), (s, {"nvidia": "560.2"}), (s, None)]:
        check_ranges(Root(root), str(tmp_path), [again], drivers)
    assert _inits(root) == 4


def test_a_remembered_value_is_refused_where_it_is_not_remembered(fake_host: FakeHost, tmp_path: Path) -> None:
    """ranges.json that is not a list of strings, a link, or too large is no memo: the value is checked."""
    root = fake_host(nvidia=1)
    s = _setting(root, "nvidia", "clocks", "5000-5000")
    memo = tmp_path / MEMO
    for bad in ("{}", "[1, 2]", "not json"):
        memo.write_text(bad)
        with pytest.raises(TuningError, match="5000 MHz refused"):
            check_ranges(Root(root), str(tmp_path), [s], {"nvidia": "x"})
    memo.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(f'["nvidia\\t{s.gpu}\\tx\\tclocks\\t5000-5000"]')
    memo.symlink_to(target)
    with pytest.raises(TuningError, match="5000 MHz refused"):
        check_ranges(Root(root), str(tmp_path), [s], {"nvidia": "x"})


def test_an_original_given_back_is_not_checked(fake_host: FakeHost, tmp_path: Path) -> None:
    """A restore writes the GPU's own original, whatever the range says now (here an admin's cap below the
    board's minimum): only the value asked (Setting.value) is checked."""
    root = fake_host(amd=1, amdsmi=False)
    s = _setting(root, "amd", "power_cap", "300000000")
    cap = next(Path(root, "sys/devices").rglob("hwmon0/power1_cap"))
    with BackendSet(Root(root), str(tmp_path)) as backends:
        backends("amd").set(s, "90000000")
    assert cap.read_text().strip() == "90000000"
