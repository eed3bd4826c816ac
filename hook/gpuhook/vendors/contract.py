"""What a vendor's modules hand the rooms that call them, and the protocols those rooms hold them to: a tuning
Setting and the Backend that reads and writes it, a telemetry Reading and the Source that reads it. Here, in the
vendors' room, so that a vendor's modules never import tuning/ or metrics/ (the rooms above them)."""

from __future__ import annotations

from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    from gpuhook.host.inventory import Gpu
else:
    Protocol = object


@frozen
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


class Backend(Protocol):
    """Reads and writes one vendor's GPU settings (values as text; the original is restored with set)."""

    def get(self, s: Setting) -> str:
        """The setting's current value."""
        ...

    def set(self, s: Setting, value: str) -> None:
        """Change the setting. Writes to the host."""
        ...

    def close(self) -> None:
        """End the backend's session."""
        ...


@frozen
class Reading:
    """What one GPU reports now; None where it does not report it (not supported, not readable)."""

    utilization: float | None = None  # the share of the last sample period a kernel ran (0..1)
    memory_used: float | None = None  # bytes of the GPU's own memory in use
    memory_total: float | None = None  # bytes
    power: float | None = None  # watts drawn now
    temperature: float | None = None  # degrees Celsius (NVIDIA: the GPU core; AMD: the junction, else edge)
    sm_clock: float | None = None  # hertz (NVIDIA: SM clock; AMD: sclk/gfx clock)
    power_limit: float | None = None  # watts (NVIDIA: the power management limit; AMD: the power cap)
    error: str = ""  # why the GPU's telemetry cannot be read at all ("" when something was read)


class Source(Protocol):
    """An open telemetry session for one vendor's GPUs."""

    broken: bool  # the session is lost (the driver went away under it): close it and open a new one

    def read(self, gpus: Sequence[Gpu]) -> dict[str, Reading]:
        """A reading per GPU, keyed by its UUID (else PCI address). Reads the driver."""
        ...

    def close(self) -> None:
        """End the session."""
        ...


def values_or_error(values: dict[str, float], errors: list[str]) -> Reading:
    """A Reading from what a source could read; its error when it could read nothing."""
    if not values:
        return Reading(error="; ".join(errors) or "no telemetry is supported")
    v = values.get
    return Reading(v("utilization"), v("memory_used"), v("memory_total"), v("power"), v("temperature"),
                   v("sm_clock"), v("power_limit"))


@frozen
class DraDevice:
    """One device a vendor offers to Kubernetes' DRA (kubernetes/dra_devices.py publishes it): a whole GPU, or a
    slice of one (an NVIDIA MIG device, an AMD compute partition). Its attributes and capacities carry the names
    the vendor's own DRA driver publishes (bare: gpuhook's driver's domain) and are published again under that
    driver's domain (`domain`, e.g. gpu.nvidia.com), so that a claim's CEL written for it reads ours unchanged."""

    name: str  # the device's name in the ResourceSlice (a DNS label)
    gpu: Gpu
    kind: str  # gpu | mig | partition
    domain: str  # the vendor's own DRA driver's name ("" where it has none: no copies)
    attributes: tuple[tuple[str, str | int | bool], ...] = ()
    versions: tuple[str, ...] = ()  # which attributes are versions (semver)
    capacity: tuple[tuple[str, int], ...] = ()  # bytes for memory, counts otherwise
