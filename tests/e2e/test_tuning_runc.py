"""Host tuning in front of real runc: applied for the container's life, restored after, even when it dies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .tuned import Tuned

DEVNULL = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}


NV0 = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}


def test_nvidia_settings_live_with_the_container(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    cid, r = t.start({**NV0, "gpuhook.dev/clocks": "1500", "gpuhook.dev/power-limit": "400",
                      "gpuhook.dev/compute-mode": "exclusive-process"})
    assert r.returncode == 0, r.stderr
    assert t.nvml()[0] == [1500, 1500, 400000, 3] and t.nvml()[1] == [0, 0, 700000, 0]
    status = t.gpuhook("status")
    assert "clocks       unlocked     1500-1500    " + cid in status.stdout
    t.stop(cid)
    assert t.nvml()[0] == [0, 0, 700000, 0]
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_the_prestart_hook_applies_the_shims_plan(tuned) -> None:  # type: ignore[no-untyped-def]
    """The shim plans the tuning when it edits config.json, and its prestart hook applies that plan without reading
    the host again. Here a prestart hook of the container's own, run before gpuhook's, hides the host's NVIDIA
    GPUs from procfs (the driver's version, which finds NVML, stays): a hook that discovered the host again would
    find no GPU 0 and refuse the container."""
    t = tuned(HostSpec(nvidia=2))
    driver = Path(f"{t.host}/proc/driver/nvidia/gpus")

    def hide(spec: dict[str, Any]) -> None:
        spec["hooks"] = {"prestart": [{"path": "/bin/sh", "args": ["sh", "-c", f"mv {driver} {driver}.away"],
                                       "env": [f"PATH={os.environ['PATH']}"]}]}

    cid, r = t.start({**NV0, "gpuhook.dev/clocks": "1500"}, hide)
    try:
        assert r.returncode == 0, r.stderr
        assert not driver.exists()  # the own hook ran first
        assert t.nvml()[0][:2] == [1500, 1500], t.nvml()
    finally:
        if not driver.exists():
            os.rename(f"{driver}.away", driver)
        t.stop(cid)
    assert t.nvml()[0][:2] == [0, 0]


@pytest.mark.parametrize("amdsmi", [True, False], ids=["amdsmi", "sysfs"])
def test_amd_settings_live_with_the_container(tuned, amdsmi: bool) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(amd=2, amdsmi=amdsmi))
    dev = Path(f"{t.host}/sys/devices/pci0000:00/0000:81:00.0")
    cid, r = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/perf-level": "high", "gpuhook.dev/power-limit": "250"})
    assert r.returncode == 0, r.stderr
    if amdsmi:
        state = Path(f"{t.host}/var/lib/gpuhook-sim/amdsmi").read_text().splitlines()
        assert state[1].split()[:3] == ["1", "2", "250000000"]  # AMDSMI_DEV_PERF_LEVEL_HIGH, 250 W
    else:
        assert (dev / "power_dpm_force_performance_level").read_text().strip() == "high"
        assert (dev / "hwmon/hwmon0/power1_cap").read_text().strip() == "250000000"
    t.stop(cid)
    if amdsmi:
        assert Path(f"{t.host}/var/lib/gpuhook-sim/amdsmi").read_text().splitlines()[1].split()[:3] == [
            "1", "0", "300000000"]
    else:
        assert (dev / "power_dpm_force_performance_level").read_text().strip() == "auto"
        assert (dev / "hwmon/hwmon0/power1_cap").read_text().strip() == "300000000"


def test_twenty_containers_one_gpu_same_setting(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    bundles = [t.bundle({**NV0, "gpuhook.dev/clocks": "1500"}, ["sleep", "1"]) for _ in range(20)]

    def run(b: Path) -> int:
        return subprocess.run([conftest.SHIM, "run", "--bundle", str(b), f"c-{b.name}"], env=t.env, **DEVNULL,
                              timeout=120, check=False).returncode

    with ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(run, bundles))
    assert codes == [0] * 20
    assert t.log("nvml") == ["set-clocks", "reset-clocks"]  # applied once, restored once
    assert t.nvml()[0][:2] == [0, 0]


def test_conflicting_request_is_refused_and_the_holder_undisturbed(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    holder, r = t.start({**NV0, "gpuhook.dev/clocks": "1500"})
    assert r.returncode == 0, r.stderr
    _, refused = t.start({**NV0, "gpuhook.dev/clocks": "900"})
    assert refused.returncode != 0
    assert f"has clocks 1500-1500 set for container {holder}" in refused.stderr
    assert t.nvml()[0][:2] == [1500, 1500]
    assert '"status": "running"' in subprocess.run(["runc", "state", holder], capture_output=True, text=True).stdout


def test_killed_container_with_lost_runtime_state_is_restored_by_gc(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    cid, r = t.start({**NV0, "gpuhook.dev/clocks": "1500"})
    assert r.returncode == 0, r.stderr
    pid = int(subprocess.run(["runc", "state", cid], capture_output=True, text=True).stdout.split('"pid": ')[1]
              .split(",")[0])
    os.kill(pid, signal.SIGKILL)
    shutil.rmtree(f"/run/runc/{cid}")  # the runtime lost its state: no poststop will ever run
    t.started.remove(cid)
    for _ in range(50):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.05)
    assert t.nvml()[0][:2] == [1500, 1500]
    gc = t.gpuhook("gc")
    assert gc.returncode == 0, gc.stderr
    assert t.nvml()[0][:2] == [0, 0]
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_nvml_failing_on_the_second_gpu_rolls_back_the_first(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    Path(f"{t.host}/var/lib/gpuhook-sim/nvml.fail").write_text("1 clocks\n")
    _, r = t.start({"gpuhook.dev/gpus": "0,1", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/clocks": "1500"})
    assert r.returncode != 0 and "rolled back" in r.stderr
    assert t.nvml()[0][:2] == [0, 0] and t.nvml()[1][:2] == [0, 0]
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_amd_smi_failing_on_the_second_gpu_rolls_back_the_first(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(amd=2))
    fail = Path(f"{t.host}/var/lib/gpuhook-sim/amdsmi.fail")
    fail.write_text("1 power_cap\n")  # every power-cap write to GPU 1 fails, its restore too
    _, r = t.start({"gpuhook.dev/gpus": "0,1", "gpuhook.dev/vendor": "amd", "gpuhook.dev/power-limit": "250"})
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "AMDSMI_STATUS_INVAL; what this container had applied was rolled back" in r.stderr, r.stderr
    assert "restoring power_cap of GPU" in r.stderr  # GPU 1's write may have half-happened: it stays to restore
    state = [line.split()[:3] for line in Path(f"{t.host}/var/lib/gpuhook-sim/amdsmi").read_text().splitlines()]
    assert state == [["0", "0", "300000000"], ["1", "0", "300000000"]]  # GPU 0's cap was set, then restored
    calls = Path(f"{t.host}/var/lib/gpuhook-sim/amdsmi.log").read_text().splitlines()
    assert [c.split()[:3] for c in calls] == [["set-power-cap", "0", "250000000"], ["set-power-cap", "0", "300000000"]]
    assert "power_cap" in t.gpuhook("status").stdout  # held by nobody, still to restore
    fail.unlink()
    assert t.gpuhook("gc").returncode == 0
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_corrupt_ledger_refuses_clearly_and_is_never_reset(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    holder, r = t.start({**NV0, "gpuhook.dev/clocks": "1500"})
    assert r.returncode == 0, r.stderr
    ledger = Path(t.tmp / "state/ledger.json")
    good = ledger.read_text()
    ledger.write_text(good[: len(good) // 2])
    _, refused = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/clocks": "1500"})
    assert refused.returncode != 0 and "ledger" in refused.stderr and "ledger.json.prev" in refused.stderr
    gc = t.gpuhook("gc")
    assert gc.returncode != 0 and "is corrupt" in gc.stderr
    assert ledger.read_text() == good[: len(good) // 2]  # nobody's holdings were silently dropped
    shutil.copy(str(ledger) + ".prev", ledger)  # the documented recovery
    t.stop(holder)
    t.started.remove(holder)
    assert t.gpuhook("gc").returncode == 0
    assert t.nvml()[0][:2] == [0, 0]


def test_exclusive_gpu(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    owner, r = t.start({**NV0, "gpuhook.dev/exclusive": "true"})
    assert r.returncode == 0, r.stderr
    _, refused = t.start(NV0)  # no tuning at all: still refused while the lease is held
    assert refused.returncode != 0 and f"held exclusively by container {owner}" in refused.stderr
    other, r2 = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"})
    assert r2.returncode == 0, r2.stderr
    _, refused2 = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/exclusive": "true"})
    assert refused2.returncode != 0 and f"in use by container {other}" in refused2.stderr
    t.stop(owner)
    _, r3 = t.start(NV0)
    assert r3.returncode == 0, r3.stderr


def test_tuning_applies_to_gpus_a_device_plugin_put_in_the_spec(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()

    def device_plugin(spec: dict[str, Any]) -> None:
        spec["linux"]["devices"] = [{"path": "/dev/nvidia1", "type": "c", "major": 195, "minor": 1, "fileMode": 438,
                                     "uid": 0, "gid": 0}]

    _, r = t.start({"gpuhook.dev/clocks": "1200"}, edit=device_plugin)
    assert r.returncode == 0, r.stderr
    assert t.nvml()[1][:2] == [1200, 1200] and t.nvml()[0][:2] == [0, 0]


def test_policy_range_refused(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(policy="[tuning]\nclocks_mhz = [500, 2000]\n")
    _, r = t.start({**NV0, "gpuhook.dev/clocks": "2500"})
    assert r.returncode != 0 and "outside what this host allows: 500-2000 MHz" in r.stderr


@pytest.mark.parametrize(("vendor", "amdsmi", "clocks", "said"), [
    ("nvidia", False, "5000", "locks its graphics clock within 345-1980 MHz: 5000 MHz refused"),
    ("nvidia", False, "200-1500", "within 345-1980 MHz: 200-1500 MHz refused"),
    ("amd", True, "1200-3000", "runs its graphics clock within 500-2100 MHz: 1200-3000 MHz refused"),
    ("amd", False, "2500", "runs its graphics clock within 500-2100 MHz: 2500 MHz refused"),
], ids=["nvidia above", "nvidia below", "amdsmi above", "sysfs above"])
def test_clocks_outside_the_gpus_range_are_refused(tuned, vendor: str, amdsmi: bool, clocks: str,  # type: ignore[no-untyped-def]
                                                   said: str) -> None:
    t = tuned(HostSpec(nvidia=1, amd=1, amdsmi=amdsmi))
    _, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor, "gpuhook.dev/clocks": clocks})
    assert r.returncode != 0 and said in r.stderr, r.stderr
    assert "set-clocks" not in t.log("nvml") and not [c for c in t.log("amdsmi") if "clk" in c]
    assert "no GPU tuning is held" in t.gpuhook("status").stdout  # nothing left applied
    if vendor == "amd" and not amdsmi:
        (sclk,) = Path(t.host).glob("sys/devices/**/pp_dpm_sclk")
        text = sclk.read_text()  # as it was, or every level written back by the restore: no level left forced
        assert text.startswith("0: 500Mhz *\n") or text == "0 1 2 3\n", text


@pytest.mark.parametrize("clocks", ["0", "99999999", "fast"])
def test_clocks_no_gpu_has_are_refused_before_anything(tuned, clocks: str) -> None:  # type: ignore[no-untyped-def]
    t = tuned()
    _, r = t.start({**NV0, "gpuhook.dev/clocks": clocks})
    (line,) = r.stderr.strip().splitlines()
    assert r.returncode != 0 and f"gpuhook.dev/clocks='{clocks}': expected" in line and "MHz" in line


def test_hook_mode_tuning(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned()

    def hooks(spec: dict[str, Any]) -> None:
        hook = {"path": conftest.GPUHOOK, "env": [f"GPUHOOK_CONFIG={t.config}"]}
        spec["hooks"] = {"prestart": [{**hook, "args": ["gpuhook", "hook", "prestart"]}],
                         "poststop": [{**hook, "args": ["gpuhook", "hook", "poststop"]}]}

    cid = "h-" + uuid.uuid4().hex[:8]
    b = t.bundle({**NV0, "gpuhook.dev/clocks": "1400"}, ["sleep", "60"], hooks)
    assert subprocess.run(["runc", "run", "-d", "--bundle", str(b), cid], **DEVNULL, check=False).returncode == 0
    t.started.append(cid)
    assert t.nvml()[0][:2] == [1400, 1400]
    t.stop(cid)
    assert t.nvml()[0][:2] == [0, 0]


def test_a_clock_range_is_restored_while_another_holds_the_manual_level(tuned) -> None:  # type: ignore[no-untyped-def]
    """Each restore is real: the range goes when its container goes, whatever others still hold on the GPU."""
    t = tuned(HostSpec(amd=1, amdsmi=False))
    dev = Path(f"{t.host}/sys/devices/pci0000:00/0000:80:00.0")
    a, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "1200-1800"})
    assert r.returncode == 0, r.stderr
    b, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/perf-level": "manual"})
    assert r.returncode == 0, r.stderr
    assert (dev / "pp_dpm_sclk").read_text().split() == ["1", "2"]  # levels within 1200-1800 MHz forced
    t.stop(a)
    assert (dev / "pp_dpm_sclk").read_text().split() == ["0", "1", "2", "3"]  # every level again
    assert (dev / "power_dpm_force_performance_level").read_text().strip() == "manual"  # b still holds it
    t.stop(b)
    assert (dev / "power_dpm_force_performance_level").read_text().strip() == "auto"


@pytest.mark.parametrize(("first", "second", "says"), [
    ({"gpuhook.dev/clocks": "1500"}, {"gpuhook.dev/clocks": "1200"}, "has clocks 1500-1500 set for container"),
    ({"gpuhook.dev/exclusive": "true"}, {}, "is held exclusively by container"),
    ({}, {"gpuhook.dev/exclusive": "true"}, "gpuhook.dev/exclusive: GPU"),
], ids=["setting-conflict", "leased-gpu", "exclusive-on-a-used-gpu"])
def test_the_shim_refuses_a_conflict_before_it_edits_the_spec(tuned, first: dict[str, str],  # type: ignore[no-untyped-def]
                                                              second: dict[str, str], says: str) -> None:
    t = tuned()
    _, r = t.start({**NV0, **first})
    assert r.returncode == 0, r.stderr
    b = t.bundle({**NV0, **second}, ["true"])
    before = (b / "config.json").read_bytes()
    refused = subprocess.run([conftest.SHIM, "create", "--bundle", str(b), "t-second"], env=t.env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 1 and says in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert (b / "config.json").read_bytes() == before  # refused by the shim itself: the spec is byte-identical
    assert subprocess.run(["runc", "state", "t-second"], capture_output=True, check=False).returncode != 0


MIG = HostSpec(nvidia=2, mig=("3g.40gb", "2g.20gb", "1g.10gb"), mig_gpus=1)  # GPU 0's MIG devices 0:0-0:2


def test_a_container_with_every_slice_tunes_the_physical_gpu_once(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(MIG)
    cid, r = t.start({"gpuhook.dev/gpus": "0:0,0:1,0:2", "gpuhook.dev/clocks": "1500"})
    assert r.returncode == 0, r.stderr
    assert t.nvml()[0][:2] == [1500, 1500] and t.nvml()[1][:2] == [0, 0]
    assert t.log("nvml").count("set-clocks") == 1
    t.stop(cid)
    assert t.nvml()[0][:2] == [0, 0]


def test_a_lease_on_a_mig_gpu_holds_against_its_slices_and_back(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(MIG)
    owner, r = t.start({**NV0, "gpuhook.dev/exclusive": "true"})
    assert r.returncode == 0, r.stderr
    _, refused = t.start({"gpuhook.dev/gpus": "0:1"})
    assert refused.returncode != 0 and f"held exclusively by container {owner}" in refused.stderr
    t.stop(owner)
    user, r2 = t.start({"gpuhook.dev/gpus": "0:1"})
    assert r2.returncode == 0, r2.stderr
    _, refused2 = t.start({**NV0, "gpuhook.dev/exclusive": "true"})
    assert refused2.returncode != 0 and f"in use by container {user}" in refused2.stderr
    _, sibling = t.start({"gpuhook.dev/gpus": "0:2", "gpuhook.dev/exclusive": "true"})  # a slice alone: its own
    assert sibling.returncode == 0, sibling.stderr


def _nvml_fans(t: Tuned) -> dict[tuple[int, int], tuple[int, int]]:
    """(GPU, fan) -> (policy, target %) as the stub NVML holds them (absent: the driver's curve at 35%)."""
    path = Path(f"{t.host}/var/lib/gpuhook-sim/nvml.fans")
    rows = [[int(x) for x in ln.split()] for ln in path.read_text().splitlines()] if path.exists() else []
    return {(g, f): (p, s) for g, f, p, s in rows}


def _amd_fan(t: Tuned, index: int) -> tuple[str, str]:
    hwmon = Path(f"{t.host}/sys/devices/pci0000:00/0000:{0x80 + index:02x}:00.0/hwmon/hwmon0")
    return (hwmon / "pwm1_enable").read_text().strip(), (hwmon / "pwm1").read_text().strip()


def test_nvidia_fans_live_with_the_container(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(nvidia=2, fans=2))
    cid, r = t.start({**NV0, "gpuhook.dev/fan": "80%"})
    assert r.returncode == 0, r.stderr
    fans = _nvml_fans(t)
    assert fans[0, 0] == fans[0, 1] == (1, 80) and fans.get((1, 0), (0, 35)) == (0, 35)  # both fans, GPU 0 only
    assert "fan          auto         80           " + cid in t.gpuhook("status").stdout
    metrics = t.gpuhook("exporter", "--once").stdout
    assert ('gpuhook_tuning_setting{current="80",original="auto",setting="fan",'
            'uuid="GPU-00000000-5a1e-4000-8000-0000d00d0000",vendor="nvidia"} 1.0') in metrics, \
        [m for m in metrics.splitlines() if "tuning" in m]
    t.stop(cid)
    assert _nvml_fans(t)[0, 0] == _nvml_fans(t)[0, 1] == (0, 35)
    assert t.log("nvml") == ["set-fan", "set-fan", "auto-fan", "auto-fan"]


def test_an_admins_fixed_fan_comes_back_fan_by_fan(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(nvidia=1, fans=2))
    Path(f"{t.host}/var/lib/gpuhook-sim/nvml.fans").write_text("0 0 0 35\n0 1 1 60\n")  # fan 1 fixed at 60%
    cid, r = t.start({**NV0, "gpuhook.dev/fan": "90"})
    assert r.returncode == 0, r.stderr
    assert _nvml_fans(t)[0, 1] == (1, 90)
    t.stop(cid)
    assert _nvml_fans(t) == {(0, 0): (0, 35), (0, 1): (1, 60)}


@pytest.mark.parametrize("amdsmi", [True, False], ids=["amdsmi", "sysfs"])
def test_amd_fan_lives_with_the_container(tuned, amdsmi: bool) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(amd=2, amdsmi=amdsmi))
    hwmon = Path(f"{t.host}/sys/devices/pci0000:00/0000:80:00.0/hwmon/hwmon0")
    (hwmon / "pwm1_enable").write_text("1\n")  # the admin fixed GPU 0's fan at half speed
    (hwmon / "pwm1").write_text("128\n")
    first, r = t.start({"gpuhook.dev/gpus": "0,1", "gpuhook.dev/vendor": "amd", "gpuhook.dev/fan": "80"})
    assert r.returncode == 0, r.stderr
    assert _amd_fan(t, 0) == _amd_fan(t, 1) == ("1", "204")  # 80% of 255
    second, r = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "amd", "gpuhook.dev/fan": "80"})
    assert r.returncode == 0, r.stderr  # the same value joins
    t.stop(first)
    assert _amd_fan(t, 0) == ("1", "128") and _amd_fan(t, 1) == ("1", "204")  # GPU 1 still held by `second`
    t.stop(second)
    assert _amd_fan(t, 1)[0] == "2"  # back to the driver's curve


def test_fan_auto_holds_the_curve_against_a_fixed_speed(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(amd=1))
    holder, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/fan": "auto"})
    assert r.returncode == 0, r.stderr
    _, refused = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/fan": "60"})
    (line,) = refused.stderr.strip().splitlines()
    assert refused.returncode != 0 and f"has fan auto set for container {holder}; this container asks 60" in line
    assert _amd_fan(t, 0)[0] == "2"


@pytest.mark.parametrize(("spec", "vendor", "fan", "said"), [
    (HostSpec(nvidia=1), "nvidia", "20", "runs its fans at 30-100%: 20% refused"),
    (HostSpec(nvidia=1, fans=0), "nvidia", "50", "has no fan (a passively cooled board"),
    (HostSpec(amd=1), "amd", "10", "runs its fan at 20-100% (pwm1_min/pwm1_max 51-255): 10% refused"),
    (HostSpec(amd=1, fans=0), "amd", "50", "has no fan control (no hwmon pwm1_enable"),
], ids=["nvidia below", "nvidia fanless", "amd below", "amd fanless"])
def test_a_fan_the_gpu_cannot_take_is_refused(tuned, spec: HostSpec, vendor: str, fan: str,  # type: ignore[no-untyped-def]
                                               said: str) -> None:
    t = tuned(spec)
    _, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor, "gpuhook.dev/fan": fan})
    (line,) = r.stderr.strip().splitlines()
    assert r.returncode != 0 and said in line, line
    assert "set-fan" not in t.log("nvml")
    assert "no GPU tuning is held" in t.gpuhook("status").stdout
    if vendor == "amd" and spec.fans:
        assert _amd_fan(t, 0) == ("2", "89")  # untouched


@pytest.mark.parametrize(("policy", "fan", "said"), [
    ("[tuning]\nfan_percent = [40, 100]\n", "30", "gpuhook.dev/fan=30 is outside what this host allows: 40-100%"),
    ("[tuning]\nfan = false\n", "60", "does not let containers set fans ([tuning] fan = false)"),
    ("", "101", "gpuhook.dev/fan='101': expected a fan speed in percent (0-100) or auto"),
    ("", "quiet", "gpuhook.dev/fan='quiet': expected"),
])
def test_a_fan_outside_policy_is_refused_before_the_spec_changes(tuned, policy: str, fan: str,  # type: ignore[no-untyped-def]
                                                                 said: str) -> None:
    t = tuned(HostSpec(nvidia=1), policy)
    b = t.bundle({**NV0, "gpuhook.dev/fan": fan}, ["true"])
    before = (b / "config.json").read_bytes()
    r = subprocess.run([conftest.SHIM, "run", "--bundle", str(b), "f-" + uuid.uuid4().hex[:8]], env=t.env,
                       capture_output=True, text=True, timeout=60, check=False)
    (line,) = r.stderr.strip().splitlines()
    assert r.returncode != 0 and said in line, line
    assert (b / "config.json").read_bytes() == before
    assert not _nvml_fans(t)


def test_fan_auto_is_allowed_where_fixed_fans_are_not(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(nvidia=1), "[tuning]\nfan = false\n")
    _, r = t.start({**NV0, "gpuhook.dev/fan": "auto"})
    assert r.returncode == 0, r.stderr
    assert "fan          auto         auto" in t.gpuhook("status").stdout


def test_hygon_dcu_settings_live_with_the_container(tuned) -> None:  # type: ignore[no-untyped-def]
    """A Hygon DCU is tuned through the files its driver keeps from amdgpu, under the same ledger."""
    t = tuned(HostSpec(hygon=2))
    dev = Path(f"{t.host}/sys/devices/pci0000:00/0000:41:00.0")
    cid, r = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "hygon", "gpuhook.dev/clocks": "1200-1700",
                      "gpuhook.dev/power-limit": "250", "gpuhook.dev/fan": "60"})
    assert r.returncode == 0, r.stderr
    assert (dev / "power_dpm_force_performance_level").read_text().strip() == "manual"
    assert (dev / "pp_dpm_sclk").read_text().strip() == "1 2"  # the levels within 1200-1700 MHz
    assert (dev / "hwmon/hwmon0/power1_cap").read_text().strip() == "250000000"
    assert (dev / "hwmon/hwmon0/pwm1").read_text().strip() == "153"
    assert "0xdc0000000001                               fan          auto         60           " + cid in \
        t.gpuhook("status").stdout
    t.stop(cid)
    assert (dev / "power_dpm_force_performance_level").read_text().strip() == "auto"
    assert (dev / "hwmon/hwmon0/power1_cap").read_text().strip() == "300000000"
    assert (dev / "hwmon/hwmon0/pwm1_enable").read_text().strip() == "2"
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def _mps(t: Tuned, uuid: str = "GPU-00000000-5a1e-4000-8000-0000d00d0000") -> Path:
    return t.tmp / "mps" / uuid


def _daemon(home: Path) -> int:
    """The MPS control daemon's pid, from its pid file, when it lives; 0 otherwise."""
    try:
        pid = int((home / "pipe/nvidia-cuda-mps-control.pid").read_text())
    except (OSError, ValueError):
        return 0
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return 0
    return pid if state != "Z" else 0


MPS = "[tuning]\nmps_dir = \"{tmp}/mps\"\n"


def test_an_mps_daemon_lives_while_containers_use_it(tuned) -> None:  # type: ignore[no-untyped-def]
    """The first MPS container starts the GPU's control daemon (the host's nvidia-cuda-mps-control, the GPU alone
    visible to it), a second joins it, the last one leaving makes it quit; each container reaches its pipes at
    /tmp/nvidia-mps with its limits in env (the layout itself: test_mps_layout.py)."""
    t = tuned(HostSpec(nvidia=2))
    t.config.write_text(t.config.read_text() + MPS.format(tmp=t.tmp))
    look = {**NV0, "gpuhook.dev/mps": "true", "gpuhook.dev/mps-threads": "50", "gpuhook.dev/mps-memory": "8G"}

    def probe(spec: dict[str, Any]) -> None:
        spec["process"]["args"] = ["sh", "-c", "env | grep ^CUDA_MPS | sort > /tmp/nvidia-mps/seen-$$; "
                                   "ls /tmp/nvidia-mps >> /tmp/nvidia-mps/seen-$$; sleep 60"]

    first, r = t.start(look, probe)
    assert r.returncode == 0, r.stderr
    home = _mps(t)
    pid = _daemon(home)
    assert pid, list(home.rglob("*"))
    assert Path(f"/proc/{pid}/environ").read_bytes().split(b"\0").count(
        b"CUDA_VISIBLE_DEVICES=GPU-00000000-5a1e-4000-8000-0000d00d0000") == 1
    for _ in range(100):
        seen = list((home / "pipe").glob("seen-*"))
        if seen and "control" in seen[0].read_text():
            break
        time.sleep(0.05)
    text = seen[0].read_text().splitlines()
    assert text[:4] == ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_LOG_DIRECTORY=/var/log/nvidia-mps",
                        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M", "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"], text
    assert "control" in text and "nvidia-cuda-mps-control.pid" in text  # the daemon's pipes, seen from inside
    second, r2 = t.start({**NV0, "gpuhook.dev/mps": "true"})
    assert r2.returncode == 0, r2.stderr
    assert _daemon(home) == pid  # joined, not a second daemon
    assert "mps          off" in t.gpuhook("status").stdout
    t.stop(first)
    assert _daemon(home) == pid
    t.stop(second)
    assert not _daemon(home) and not home.exists()
    assert (Path(f"/proc/{pid}").exists() is False) or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_a_killed_mps_containers_daemon_is_stopped_by_gc(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(nvidia=1))
    t.config.write_text(t.config.read_text() + MPS.format(tmp=t.tmp))
    cid, r = t.start({**NV0, "gpuhook.dev/mps": "true"})
    assert r.returncode == 0, r.stderr
    assert _daemon(_mps(t))
    pid = int(subprocess.run(["runc", "state", cid], capture_output=True, text=True).stdout.split('"pid": ')[1]
              .split(",")[0])
    os.kill(pid, signal.SIGKILL)
    shutil.rmtree(f"/run/runc/{cid}")  # no poststop will run
    t.started.remove(cid)
    for _ in range(50):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.05)
    assert t.gpuhook("gc").returncode == 0
    assert not _daemon(_mps(t)) and not _mps(t).exists()


def _recorded(t: Tuned, gpu: str = "GPU-00000000-5a1e-4000-8000-0000d00d0000") -> int:
    """The daemon's pid as gpuhook recorded it in state_dir (root's alone); 0 without a record."""
    path = t.tmp / "state" / "mps" / f"{gpu}.json"
    return int(json.loads(path.read_text())["pid"]) if path.exists() else 0


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.parametrize("attack", ["rm", "another pid"])
def test_an_mps_client_rewriting_the_pipe_directory_neither_orphans_nor_hangs_the_daemon(tuned, attack: str) -> None:  # type: ignore[no-untyped-def]
    """Issue 43, 2: an MPS client removes the daemon's pid file, or writes another live process's pid into it, from
    inside the container (the pipe directory is its, read-write). The last container's stop still ends the daemon,
    by the pid and start time gpuhook recorded (not 10 s and a failure), leaves the other process alone and the
    ledger empty, and the next MPS container on the GPU starts its own daemon."""
    t = tuned(HostSpec(nvidia=1))
    t.config.write_text(t.config.read_text() + MPS.format(tmp=t.tmp))
    bystander = subprocess.Popen(["sleep", "60"])
    planted = ("rm /tmp/nvidia-mps/nvidia-cuda-mps-control.pid" if attack == "rm"
               else f"echo {bystander.pid} > /tmp/nvidia-mps/nvidia-cuda-mps-control.pid")

    def tamper(spec: dict[str, Any]) -> None:
        spec["process"]["args"] = ["sh", "-c", f"{planted}; touch /tmp/nvidia-mps/done; sleep 60"]

    try:
        cid, r = t.start({**NV0, "gpuhook.dev/mps": "true"}, tamper)
        assert r.returncode == 0, r.stderr
        daemon = _recorded(t)
        assert daemon and not _ended(daemon)
        assert os.readlink(f"/proc/{daemon}/cwd") == "/"  # not the first container's bundle
        for _ in range(100):
            if (_mps(t) / "pipe/done").exists():
                break
            time.sleep(0.05)
        began = time.monotonic()
        t.stop(cid)
        assert time.monotonic() - began < 8.0
        assert _ended(daemon) and not _mps(t).exists() and not _recorded(t)
        assert bystander.poll() is None  # the pid the file named was not signalled
        assert "no GPU tuning is held" in t.gpuhook("status").stdout
        again, r2 = t.start({**NV0, "gpuhook.dev/mps": "true"})
        assert r2.returncode == 0, r2.stderr
        assert _recorded(t) not in (0, daemon)
        t.stop(again)
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize(("spec", "asked", "said"), [
    (HostSpec(amd=1), {"gpuhook.dev/gpus": "0", "gpuhook.dev/mps": "true"},
     "gpuhook.dev/mps is NVIDIA's Multi-Process Service, but GPU 0 is AMD"),
    (HostSpec(nvidia=2), {"gpuhook.dev/gpus": "0,1", "gpuhook.dev/mps": "true"},
     "gpuhook.dev/mps shares one GPU a container"),
    (HostSpec(nvidia=1), {"gpuhook.dev/gpus": "0", "gpuhook.dev/mps-threads": "30"},
     "gpuhook.dev/mps-threads limits an MPS client: it needs gpuhook.dev/mps=true"),
    (HostSpec(nvidia=1), {"gpuhook.dev/gpus": "0", "gpuhook.dev/mps": "true", "gpuhook.dev/mps-memory": "8 apples"},
     "gpuhook.dev/mps-memory='8 apples': expected"),
    (HostSpec(nvidia=1, mig=("3g.40gb",)), {"gpuhook.dev/gpus": "0:0", "gpuhook.dev/mps": "true"},
     "gpuhook runs MPS on whole GPUs only"),
], ids=["amd", "two gpus", "threads alone", "bad memory", "mig"])
def test_mps_refusals_leave_the_spec_and_the_host_alone(tuned, spec: HostSpec, asked: dict[str, str],  # type: ignore[no-untyped-def]
                                                        said: str) -> None:
    t = tuned(spec)
    t.config.write_text(t.config.read_text() + MPS.format(tmp=t.tmp))
    b = t.bundle(asked, ["true"])
    before = (b / "config.json").read_bytes()
    r = subprocess.run([conftest.SHIM, "run", "--bundle", str(b), "m-" + uuid.uuid4().hex[:8]], env=t.env,
                       capture_output=True, text=True, timeout=60, check=False)
    (line,) = r.stderr.strip().splitlines()
    assert r.returncode != 0 and said in line, line
    assert (b / "config.json").read_bytes() == before and not (t.tmp / "mps").exists()


def test_mps_off_by_policy(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(nvidia=1), "[tuning]\nmps = false\n")
    _, r = t.start({**NV0, "gpuhook.dev/mps": "true"})
    (line,) = r.stderr.strip().splitlines()
    assert r.returncode != 0 and "does not share GPUs through MPS ([tuning] mps = false)" in line
