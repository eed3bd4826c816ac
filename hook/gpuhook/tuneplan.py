"""Tuning requests -> per-GPU settings, checked against policy. Pure."""

from __future__ import annotations

from gpuhook.errors import PolicyError, RequestError
from gpuhook.inventory import Gpu, Inventory, VendorInventory
from gpuhook.plan import Selected
from gpuhook.record import record
from gpuhook.tuningreq import Tuning

TYPE_CHECKING = False  # typing costs milliseconds to import: the GPU path sits in front of a container start
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any


@record
class Setting:
    """One host setting on one GPU. `device` is how a backend finds the GPU (NVIDIA: UUID; AMD: sysfs dir)."""

    vendor: str
    gpu: str  # UUID, else PCI address: the ledger's name for the GPU
    index: int
    pci: str
    device: str
    name: str  # clocks, power_limit, compute_mode (NVIDIA); perf_level, sclk, power_cap (AMD)
    value: str

    @property
    def key(self) -> str:
        """The ledger key: one entry per GPU and setting."""
        return f"{self.vendor}:{self.gpu}:{self.name}"


@record
class TuningPolicy:
    """What the admin allows ([policy] allow_tuning and the [tuning] table)."""

    allow: bool = True
    clocks_mhz: tuple[int, int] | None = None
    power_watts: tuple[int, int] | None = None
    perf_levels: tuple[str, ...] | None = None
    compute_modes: tuple[str, ...] | None = None
    exclusive: bool = True


def settings_for(tuning: Tuning, selected: Iterable[tuple[VendorInventory, Sequence[Gpu]]]) -> tuple[Setting, ...]:
    """The host settings that give `selected` GPUs what `tuning` asks; RequestError for the wrong vendor."""
    out: list[Setting] = []
    for inv, gpus in selected:
        for gpu in gpus:
            def setting(name: str, value: str, gpu: Gpu = gpu) -> Setting:
                return _setting(gpu, name, value)

            if inv.vendor == "nvidia":
                if tuning.perf_level:
                    raise RequestError(f"gpuhook.dev/perf-level={tuning.perf_level!r} is an AMD setting but GPU "
                                       f"{gpu.index} is NVIDIA: use gpuhook.dev/clocks or gpuhook.dev/power-limit")
                if tuning.clocks:
                    out.append(setting("clocks", f"{tuning.clocks[0]}-{tuning.clocks[1]}"))
                if tuning.power_limit:
                    out.append(setting("power_limit", str(tuning.power_limit * 1000)))  # NVML speaks milliwatts
                if tuning.compute_mode:
                    out.append(setting("compute_mode", tuning.compute_mode))
            else:
                if tuning.compute_mode:
                    raise RequestError(f"gpuhook.dev/compute-mode={tuning.compute_mode!r} is an NVIDIA setting but "
                                       f"GPU {gpu.index} is AMD: use gpuhook.dev/perf-level")
                if tuning.clocks and tuning.perf_level not in (None, "manual"):
                    raise RequestError(f"gpuhook.dev/clocks needs the manual performance level, but "
                                       f"gpuhook.dev/perf-level={tuning.perf_level!r}: drop one of them")
                if tuning.perf_level or tuning.clocks:
                    out.append(setting("perf_level", tuning.perf_level or "manual"))
                if tuning.clocks:
                    out.append(setting("sclk", f"{tuning.clocks[0]}-{tuning.clocks[1]}"))
                if tuning.power_limit:
                    out.append(setting("power_cap", str(tuning.power_limit * 1_000_000)))  # hwmon: microwatts
    return tuple(out)


def _setting(gpu: Gpu, name: str, value: str) -> Setting:
    device = gpu.uuid if gpu.vendor == "nvidia" else gpu.sysfs
    return Setting(gpu.vendor, gpu.uuid or gpu.pci, gpu.index, gpu.pci, device, name, value)


def check_policy(tuning: Tuning, policy: TuningPolicy) -> None:
    """PolicyError saying what the policy allows when the request is outside it."""
    if tuning.touches_host() and not policy.allow:
        raise PolicyError("this host does not allow GPU tuning ([policy] allow_tuning = false): remove the "
                          "gpuhook.dev/ tuning annotations")
    if tuning.clocks and policy.clocks_mhz and not (
            policy.clocks_mhz[0] <= tuning.clocks[0] and tuning.clocks[1] <= policy.clocks_mhz[1]):
        lo, hi = policy.clocks_mhz
        raise PolicyError(f"gpuhook.dev/clocks={tuning.clocks[0]}-{tuning.clocks[1]} is outside what this host allows: "
                          f"{lo}-{hi} MHz ([tuning] clocks_mhz)")
    if tuning.power_limit and policy.power_watts and not (
            policy.power_watts[0] <= tuning.power_limit <= policy.power_watts[1]):
        lo, hi = policy.power_watts
        raise PolicyError(f"gpuhook.dev/power-limit={tuning.power_limit} is outside what this host allows: "
                          f"{lo}-{hi} W ([tuning] power_watts)")
    for key, asked, allowed in (("perf-level", tuning.perf_level, policy.perf_levels),
                                ("compute-mode", tuning.compute_mode, policy.compute_modes)):
        if asked and allowed is not None and asked not in allowed:
            raise PolicyError(f"gpuhook.dev/{key}={asked!r} is not allowed on this host; allowed: "
                              f"{', '.join(allowed) or 'none'} ([tuning] {key.replace('-', '_')}s)")
    if tuning.exclusive and not policy.exclusive:
        raise PolicyError("this host does not grant exclusive GPUs ([tuning] exclusive = false): remove "
                          "gpuhook.dev/exclusive")


def gpus_in_spec(devices: Iterable[Mapping[str, Any]], inventory: Inventory) -> Selected:
    """GPUs whose nodes the spec already has (a device plugin or --device put them there)."""
    numbers = {(d.get("major"), d.get("minor")) for d in devices}
    out = []
    for inv in inventory.vendors:
        gpus = tuple(g for g in inv.gpus if any((n.major, n.minor) in numbers for n in g.nodes
                                                 if "card" not in n.path))
        if gpus:
            out.append((inv, gpus))
    return tuple(out)
