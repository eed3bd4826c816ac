"""The GPU's own ranges checked where the request is made (#45 item 2), through the real shim and real runc on a
simulated host: a value the GPU cannot take (NVML's fan speeds, supported clocks and power-limit constraints; amdgpu's
pwm1_min/max, pp_dpm_sclk levels and power1_cap_min/max, or amd-smi's ranges) is refused by the shim before runc,
with gpuhook's one line, config.json byte-identical, nothing applied, no runc container; a value at the edge of the
range is applied and restored; in hook mode the prestart hook's own check is the last guard."""

from __future__ import annotations

import hashlib
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .tuned import Tuned


def _sysfs(t: Tuned) -> dict[str, str]:
    """Every file of the simulated GPUs' PCI devices and the stubs' state, by its digest: what a write would change."""
    out = {}
    for top in ("sys/devices", "var/lib/gpuhook-sim"):
        for path in sorted(Path(t.host, top).rglob("*")):
            if path.is_file() and not path.is_symlink() and path.suffix != ".inits":  # NVML's sessions, counted
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


SHIM_REFUSES = [
    ("nvidia fan", HostSpec(nvidia=1), "nvidia", {"gpuhook.dev/fan": "20"}, "runs its fans at 30-100%: 20% refused"),
    ("nvidia clocks", HostSpec(nvidia=1), "nvidia", {"gpuhook.dev/clocks": "5000"},
     "GPU 0 (GPU-00000000-5a1e-4000-8000-0000d00d0000) locks its graphics clock within 345-1980 MHz: 5000 MHz refused"),
    ("nvidia power", HostSpec(nvidia=1), "nvidia", {"gpuhook.dev/power-limit": "5000"},
     "takes a power limit of 100-700 W: 5000 W refused"),
    ("nvidia fanless", HostSpec(nvidia=1, fans=0), "nvidia", {"gpuhook.dev/fan": "50"},
     "has no fan (a passively cooled board is cooled by its chassis): remove gpuhook.dev/fan"),
    ("amd fan", HostSpec(amd=1, amdsmi=False), "amd", {"gpuhook.dev/fan": "10"},
     "runs its fan at 20-100% (pwm1_min/pwm1_max 51-255): 10% refused"),
    ("amd clocks", HostSpec(amd=1, amdsmi=False), "amd", {"gpuhook.dev/clocks": "5000"},
     "GPU 0 (0000:80:00.0) runs its graphics clock within 500-2100 MHz: 5000 MHz refused"),
    ("amd clocks between levels", HostSpec(amd=1, amdsmi=False), "amd", {"gpuhook.dev/clocks": "1300-1600"},
     "has sclk levels 500, 1200, 1700, 2100 MHz: none within 1300-1600 MHz"),
    ("amd power", HostSpec(amd=1, amdsmi=False), "amd", {"gpuhook.dev/power-limit": "5000"},
     "takes a power cap of 100-750 W (power1_cap_min/power1_cap_max): 5000 W refused"),
    ("amd power below", HostSpec(amd=1, amdsmi=False), "amd", {"gpuhook.dev/power-limit": "50"},
     "takes a power cap of 100-750 W (power1_cap_min/power1_cap_max): 50 W refused"),
    ("amdsmi clocks", HostSpec(amd=1, amdsmi=True), "amd", {"gpuhook.dev/clocks": "5000"},
     "runs its graphics clock within 500-2100 MHz: 5000 MHz refused"),
    ("amdsmi power", HostSpec(amd=1, amdsmi=True), "amd", {"gpuhook.dev/power-limit": "5000"},
     "takes a power cap of 100-750 W (amd-smi): 5000 W refused"),
    ("amdsmi fan", HostSpec(amd=1, amdsmi=True), "amd", {"gpuhook.dev/fan": "10"}, "runs its fan at 20-100%"),
    ("hygon clocks", HostSpec(hygon=1), "hygon", {"gpuhook.dev/clocks": "5000"},
     "runs its graphics clock within 500-2100 MHz: 5000 MHz refused"),
    ("hygon power", HostSpec(hygon=1), "hygon", {"gpuhook.dev/power-limit": "5000"}, "5000 W refused"),
]


@pytest.mark.parametrize(("spec", "vendor", "asked", "said"), [c[1:] for c in SHIM_REFUSES],
                         ids=[c[0] for c in SHIM_REFUSES])
def test_the_shim_refuses_what_the_gpu_cannot_take_before_runc(tuned, spec: HostSpec, vendor: str,  # type: ignore[no-untyped-def]
                                                               asked: dict[str, str], said: str) -> None:
    t = tuned(spec)
    b = t.bundle({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor, **asked}, ["true"])
    before, host = (b / "config.json").read_bytes(), _sysfs(t)
    cid = "r-" + uuid.uuid4().hex[:8]
    r = subprocess.run([conftest.SHIM, "create", "--bundle", str(b), cid], env=t.env, capture_output=True, text=True,
                       timeout=60, check=False)
    (line,) = r.stderr.strip().splitlines()  # gpuhook's one line, not runc's "error running hook #0"
    assert r.returncode != 0 and line.startswith("gpuhook-runtime: ") and said in line, line
    assert (b / "config.json").read_bytes() == before  # refused by the shim: the spec is byte-identical
    assert subprocess.run(["runc", "state", cid], capture_output=True, check=False).returncode != 0  # no container
    assert _sysfs(t) == host  # nothing applied, nothing written on the simulated GPU
    assert not t.log("nvml") and not t.log("amdsmi")
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_nvidia_values_at_the_edges_of_the_range_are_applied_and_restored(tuned) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(nvidia=1, fans=1))
    cid, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/clocks": "345-1980",
                      "gpuhook.dev/power-limit": "100", "gpuhook.dev/fan": "30"})
    assert r.returncode == 0, r.stderr
    assert t.nvml()[0][:3] == [345, 1980, 100000]
    assert Path(f"{t.host}/var/lib/gpuhook-sim/nvml.fans").read_text().split() == ["0", "0", "1", "30"]
    t.stop(cid)
    assert t.nvml()[0][:3] == [0, 0, 700000]
    assert "no GPU tuning is held" in t.gpuhook("status").stdout
    assert t.log("nvml") == ["set-clocks", "set-power", "set-fan", "auto-fan", "set-power", "reset-clocks"]


@pytest.mark.parametrize("amdsmi", [True, False], ids=["amdsmi", "sysfs"])
def test_amd_values_at_the_edges_of_the_range_are_applied_and_restored(tuned, amdsmi: bool) -> None:  # type: ignore[no-untyped-def]
    t = tuned(HostSpec(amd=1, amdsmi=amdsmi))
    dev = Path(f"{t.host}/sys/devices/pci0000:00/0000:80:00.0")
    cid, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd", "gpuhook.dev/clocks": "500-2100",
                      "gpuhook.dev/power-limit": "100", "gpuhook.dev/fan": "20"})
    assert r.returncode == 0, r.stderr
    if amdsmi:
        assert Path(f"{t.host}/var/lib/gpuhook-sim/amdsmi").read_text().splitlines()[0].split()[:3] == [
            "0", "3", "100000000"]  # the manual level, 100 W
    else:
        assert (dev / "pp_dpm_sclk").read_text().split() == ["0", "1", "2", "3"]
        assert (dev / "hwmon/hwmon0/power1_cap").read_text().strip() == "100000000"
    assert (dev / "hwmon/hwmon0/pwm1").read_text().strip() == "51"  # 20% of 255: pwm1_min
    t.stop(cid)
    assert (dev / "hwmon/hwmon0/pwm1_enable").read_text().strip() == "2"
    assert "no GPU tuning is held" in t.gpuhook("status").stdout
    if not amdsmi:
        assert (dev / "power_dpm_force_performance_level").read_text().strip() == "auto"
        assert (dev / "hwmon/hwmon0/power1_cap").read_text().strip() == "300000000"


def test_in_hook_mode_the_prestart_hook_is_the_last_guard(tuned) -> None:  # type: ignore[no-untyped-def]
    """Without the shim (gpuhook's hooks registered for both stages) the prestart hook refuses the value (its plan
    checks the ranges before it gives the container anything; the backend's set would, last), NVML's setters are
    never called, and nothing is left applied."""
    t = tuned(HostSpec(nvidia=1))

    def hooks(spec: dict[str, Any]) -> None:
        hook = {"path": conftest.GPUHOOK, "env": [f"GPUHOOK_CONFIG={t.config}"]}
        spec["hooks"] = {"prestart": [{**hook, "args": ["gpuhook", "hook", "prestart"]}],
                         "poststop": [{**hook, "args": ["gpuhook", "hook", "poststop"]}]}

    cid = "h-" + uuid.uuid4().hex[:8]
    b = t.bundle({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/clocks": "5000"}, ["true"],
                 hooks)
    r = subprocess.run(["runc", "run", "--bundle", str(b), cid], capture_output=True, text=True, timeout=60,
                       check=False, env={"PATH": os.environ["PATH"]})
    t.started.append(cid)
    assert r.returncode != 0 and "locks its graphics clock within 345-1980 MHz: 5000 MHz refused" in r.stderr, r.stderr
    assert "set-clocks" not in t.log("nvml")
    assert "no GPU tuning is held" in t.gpuhook("status").stdout
