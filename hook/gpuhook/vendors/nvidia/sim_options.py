"""The simulated NVIDIA driver's settings (HostSpec takes them by these names): the sim part's OPTIONS, apart so that
sim.py and sim_mig.py both read them without importing each other."""

from __future__ import annotations

from gpuhook.frozen import frozen
from gpuhook.simulator.host import settings_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.simulator.host import HostSpec


@frozen
class Options:
    """The simulated NVIDIA driver's settings, by the names HostSpec takes them."""

    nvidia_driver: str = "550.54.15"
    cuda_version: int = 12040  # what the stub libcuda's cuDriverGetVersion reports
    nvidia_arch: str = "9.0"  # compute capability the stub NVML reports for every GPU
    nvidia_brand: int = 2  # nvmlBrandType_t the stub NVML reports (2: Tesla)
    mig: tuple[str, ...] = ()  # MIG profiles (1g.10gb, 3g.40gb, ...) made on each MIG GPU, in order
    mig_capable: bool = False  # GPUs MIG capable (MIG mode off) though `mig` makes none
    mig_gpus: int | None = None  # how many GPUs (the first ones) are in MIG mode; None: all, when `mig`



def options(spec: HostSpec) -> Options:
    """This driver's settings in `spec`."""
    return settings_of(spec, Options)
