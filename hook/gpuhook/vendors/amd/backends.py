"""AMD tuning: through amd-smi where the host's libamd_smi loads (host/amd_smi_lib.py), else amdgpu's sysfs files;
fans always through amdgpu's hwmon files (amd-smi cannot say whether a fan follows the driver's curve, so it could
not give back a fan an admin had fixed). Values are text: perf_level by name, sclk 'MIN-MAX' or 'default', power_cap
in microwatts, fan 'auto' or a percent (and, as an original, 'manual <pwm>' or 'full'). Each backend's `check` knows
the GPU's own ranges (amd-smi's, else the sysfs files': pp_dpm_sclk's levels, power1_cap_min/max, pwm1_min/max);
`set` asks it of a value asked, last."""

from __future__ import annotations

import os

from gpuhook.errors import TuningError
from gpuhook.host.amd_smi_lib import PERF_LEVELS
from gpuhook.vendors.amd import ranges
from gpuhook.vendors.contract import Setting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from ctypes import c_void_p

    from gpuhook.host.amd_smi_lib import AmdSmi
    from gpuhook.host.inventory import VendorInventory
    from gpuhook.host.root import Root

    _Pair = tuple[Callable[[Setting], str], Callable[[Setting, str], None]]  # a setting's (get, set)


_LEVEL = "power_dpm_force_performance_level"


def _pair(pairs: dict[str, _Pair], s: Setting, backend: str) -> _Pair:
    """The (get, set) pair of setting `s` in a backend's `pairs`; TuningError naming a setting it lacks."""
    if s.name not in pairs:
        raise TuningError(f"{backend} has no setting {s.name} (GPU {s.index}, {s.pci})")
    return pairs[s.name]


class AmdSmiBackend:
    """amd-smi on the host root's libamd_smi.so (called through host/amd_smi_lib.py: no amdsmi package in the
    hooks); holds one session until close()."""

    def __init__(self, library: str, files: SysfsBackend) -> None:
        from gpuhook.host import amd_smi_lib

        self._files = files
        self._error = amd_smi_lib.AmdSmiError
        self._session = amd_smi_lib.session(library)
        self._smi: AmdSmi = self._session.__enter__()
        try:
            self._handles = self._smi.processors()
        except (self._error, AttributeError) as e:  # AttributeError: a library without one of these calls
            self.close()
            raise TuningError(f"amd-smi cannot list the host's GPUs: {e}") from e
        # setting -> (get, set); fans through amdgpu's files (the module's docstring says why)
        self._pairs: dict[str, _Pair] = {
            "perf_level": (self._perf_level, lambda s, v: self._smi.set_perf_level(self._handle(s), PERF_LEVELS[v])),
            "power_cap": (lambda s: str(self._smi.power_cap(self._handle(s))),
                          lambda s, v: self._smi.set_power_cap(self._handle(s), int(v))),
            "sclk": (self._default, lambda s, v: self._smi.set_sclk_range(self._handle(s), *ranges.mhz_range(v))
                     if v != "default" else None),
            "fan": (files.get, files.set),
        }
        # setting -> the check of a value asked (fans: amdgpu's files, as they are set)
        self._checks: dict[str, Callable[[Setting], None]] = {
            "perf_level": self._known, "power_cap": self._check_power_cap, "sclk": self._check_sclk,
            "fan": files.check,
        }

    def close(self) -> None:
        """End the amd-smi session."""
        self._session.__exit__(None, None, None)

    def get(self, s: Setting) -> str:
        """The current value (a clock range cannot be read back: its original is 'default')."""
        getter, _ = _pair(self._pairs, s, "amd-smi")
        try:
            return getter(s)
        except self._error as e:
            raise TuningError(f"amd-smi cannot read {s.name} of GPU {s.index} ({s.pci}): {e}") from e

    def set(self, s: Setting, value: str) -> None:
        """Apply a value (a value asked checked first, by the caller: tuning/backends.BackendSet.check); the clock
        range's 'default' comes back with the performance level's restore."""
        _, setter = _pair(self._pairs, s, "amd-smi")
        try:
            setter(s, value)
        except self._error as e:
            raise TuningError(f"amd-smi cannot set {s.name}={value} on GPU {s.index} ({s.pci}): {e}") from e

    def check(self, s: Setting) -> None:
        """TuningError where the GPU cannot take `s.value`: outside amd-smi's sclk or power-cap range, a fan
        amdgpu's files cannot drive (SysfsBackend.check). Reads the GPU; writes nothing."""
        _pair(self._pairs, s, "amd-smi")
        try:
            self._checks[s.name](s)
        except self._error as e:
            raise TuningError(f"amd-smi cannot tell what {s.name} GPU {s.index} ({s.pci}) takes: {e}") from e

    def _known(self, s: Setting) -> None:
        self._handle(s)  # a GPU amd-smi does not know is refused by name

    def _check_power_cap(self, s: Setting) -> None:
        ranges.power_cap(s, *self._smi.power_cap_range(self._handle(s)), "amd-smi")

    def _check_sclk(self, s: Setting) -> None:
        if s.value != "default":
            ranges.clocks(s, *self._smi.sclk_range(self._handle(s)))

    def _perf_level(self, s: Setting) -> str:
        level = self._smi.perf_level(self._handle(s))
        return next((k for k, v in PERF_LEVELS.items() if v == level), f"unknown ({level})")

    def _default(self, s: Setting) -> str:
        self._handle(s)  # a GPU amd-smi does not know is refused by name
        return "default"

    def _handle(self, s: Setting) -> c_void_p:
        if s.pci not in self._handles:
            raise TuningError(f"amd-smi does not know GPU {s.pci}; it has {', '.join(self._handles) or 'none'}")
        return self._handles[s.pci]


class SysfsBackend:
    """amdgpu's files in the GPU's PCI device directory under host_root: the directory comes from discovery
    (by PCI address), never from the text of a ledger entry, and every file is opened without following a
    link. A clock range's original is the list of all its levels, so that restoring it is real even while
    another container holds the manual performance level. `discover` is the AMD vendor's discovery."""

    def __init__(self, root: Root, discover: Callable[[Root], VendorInventory | None]) -> None:
        self._root = root
        self._find = discover
        self._devices: dict[str, str] | None = None
        # setting -> (get, set)
        self._pairs: dict[str, _Pair] = {
            "perf_level": (lambda s: self._read(s, _LEVEL), lambda s, v: self._write(s, _LEVEL, v)),
            "power_cap": (lambda s: self._read(s, self._hwmon(s, "power1_cap")),
                          lambda s, v: self._write(s, self._hwmon(s, "power1_cap"), v)),
            "fan": (self._fan, self._set_fan),
            "sclk": (lambda s: "levels " + " ".join(str(i) for i, _ in self._sclk_levels(s)), self._set_sclk),
        }
        # setting -> the check of a value asked against the GPU's own files
        self._checks: dict[str, Callable[[Setting], None]] = {
            "perf_level": self._check_level, "power_cap": self._check_power_cap,
            "fan": self._check_fan, "sclk": self._check_sclk,
        }

    def close(self) -> None:
        """Nothing to close."""

    def get(self, s: Setting) -> str:
        """The current value (a clock range: every level, forced or not)."""
        getter, _ = _pair(self._pairs, s, "amdgpu's sysfs")
        return getter(s)

    def set(self, s: Setting, value: str) -> None:
        """Write a value (a value asked checked first, by the caller: tuning/backends.BackendSet.check); sclk writes
        the indices of the DPM levels inside the range (manual level needed)."""
        _, setter = _pair(self._pairs, s, "amdgpu's sysfs")
        setter(s, value)

    def check(self, s: Setting) -> None:
        """TuningError where the GPU cannot take `s.value`: no performance level file, a clock range outside its
        pp_dpm_sclk levels or holding none, a power cap outside power1_cap_min/power1_cap_max, no fan, a speed
        outside pwm1_min/pwm1_max. Reads the GPU's files; writes nothing."""
        _pair(self._pairs, s, "amdgpu's sysfs")
        self._checks[s.name](s)

    def _check_level(self, s: Setting) -> None:
        if not os.path.isfile(f"{self._device(s)}/{_LEVEL}"):  # a GPU discovery does not know: said by _device
            raise TuningError(f"GPU {s.index} ({s.pci}) has no {_LEVEL} (amdgpu sets no performance level on it): "
                              "remove gpuhook.dev/perf-level and gpuhook.dev/clocks")

    def _check_power_cap(self, s: Setting) -> None:
        cap = self._hwmon(s, "power1_cap")
        least, most = (self._read_optional(s, cap + end) for end in ("_min", "_max"))
        ranges.power_cap(s, ranges.number(least, 0), ranges.number(most, 0), "power1_cap_min/power1_cap_max")

    def _check_sclk(self, s: Setting) -> None:
        if s.value == "default" or s.value.startswith("levels "):
            return
        levels = [mhz for _, mhz in self._sclk_levels(s)]
        ranges.clocks(s, min(levels), max(levels), levels)

    def _check_fan(self, s: Setting) -> None:
        enable = self._fan_file(s, "pwm1_enable")
        if s.value not in ("auto", "full"):
            least, most = (self._read_optional(s, enable.replace("enable", m)) for m in ("min", "max"))
            ranges.fan(s, ranges.number(least, 0), ranges.number(most, 255))

    def _fan(self, s: Setting) -> str:
        mode = self._read(s, self._fan_file(s, "pwm1_enable"))
        if mode == "1":
            return "manual " + self._read(s, self._fan_file(s, "pwm1"))
        return "full" if mode == "0" else "auto"

    def _set_sclk(self, s: Setting, value: str) -> None:
        if value.startswith("levels "):  # a restore: every level the GPU had
            self._write(s, "pp_dpm_sclk", value.removeprefix("levels "))
        elif value != "default":  # the kernel drops forced levels when the performance level leaves manual
            lo, hi = ranges.mhz_range(value)
            self._write(s, "pp_dpm_sclk", " ".join(str(i) for i, mhz in self._sclk_levels(s) if lo <= mhz <= hi))

    def _set_fan(self, s: Setting, value: str) -> None:
        """pwm1_enable 2 (automatic), 1 with pwm1 (manual, 0-255 within pwm1_min/pwm1_max), or 0 (full speed)."""
        enable = self._fan_file(s, "pwm1_enable")
        if value in ("auto", "full"):
            self._write(s, enable, "2" if value == "auto" else "0")
            return
        pwm = int(value.removeprefix("manual ")) if value.startswith("manual ") else ranges.pwm(value)
        self._write(s, enable, "1")
        self._write(s, enable.replace("_enable", ""), str(pwm))

    def _fan_file(self, s: Setting, name: str) -> str:
        try:
            return self._hwmon(s, name)
        except TuningError:
            raise TuningError(f"GPU {s.index} ({s.pci}) has no fan control (no hwmon {name}: a passively cooled "
                              "board is cooled by its chassis): remove gpuhook.dev/fan") from None

    def _sclk_levels(self, s: Setting) -> list[tuple[int, int]]:
        levels = []
        for line in self._read(s, "pp_dpm_sclk").splitlines():
            index, _, rest = line.partition(":")
            mhz = rest.strip().lower().split("mhz")[0].strip()
            if index.strip().isdigit() and mhz.isdigit():
                levels.append((int(index), int(mhz)))
        if not levels:
            raise TuningError(f"cannot read the sclk levels of GPU {s.index} ({s.pci}) from pp_dpm_sclk")
        return levels

    def _device(self, s: Setting) -> str:
        """The GPU's PCI device directory, as discovery finds it under the host root."""
        if self._devices is None:
            inv = self._find(self._root)
            self._devices = {g.pci: g.sysfs for g in (inv.gpus if inv else ()) if g.sysfs}
        if s.pci not in self._devices:
            raise TuningError(f"GPU {s.pci} is not among the host's AMD GPUs with amdgpu sysfs files")
        return self._root.lexical(self._devices[s.pci])

    def _hwmon(self, s: Setting, name: str) -> str:
        """The GPU's hwmon file `name`, relative to its device directory."""
        device = self._device(s)
        hwmon = [n for n in self._root.listdir(f"{self._root.to_host(device)}/hwmon")
                 if n.startswith("hwmon") and n[5:].isdigit()]
        found = [f"hwmon/{n}/{name}" for n in hwmon if os.path.isfile(f"{device}/hwmon/{n}/{name}")]
        if not found:
            raise TuningError(f"GPU {s.index} ({s.pci}) has no hwmon {name}")
        return found[0]

    def _read(self, s: Setting, name: str) -> str:
        try:
            fd = os.open(f"{self._device(s)}/{name}", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd) as f:
                return f.read(4096).strip()
        except OSError as e:
            raise TuningError(f"cannot read {name} of GPU {s.index} ({s.pci}): {e.strerror}") from e

    def _read_optional(self, s: Setting, name: str) -> str:
        try:
            return self._read(s, name)
        except TuningError:
            return ""

    def _write(self, s: Setting, name: str, value: str) -> None:
        try:
            fd = os.open(f"{self._device(s)}/{name}", os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "w") as f:
                f.write(value + "\n")
        except OSError as e:
            raise TuningError(f"cannot write {value} to {name} of GPU {s.index} ({s.pci}): {e.strerror}") from e
