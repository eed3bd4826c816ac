"""The part a vendor lacks (vendors/contract.PARTS), as the registry hands it out: each says by the vendor's label
what its GPUs do not have, or offers nothing where nothing is the right answer.

- tuning: a request that sets anything on the GPU, or asks MPS, is refused by name; `partition apply` and the
  tuning backend refuse; a request without settings passes.
- telemetry: no session (DiscoveryError): the exporter publishes the GPUs without readings.
- kubernetes: no labels beyond presence, count and driver; time-slicing only; no slices; no DRA devices; no
  partitions made on demand.
- stack: none (STACK is ""): nothing of the image is checked against the driver.
- sim: `gpuhook simulate` cannot make its GPUs.
- doctor: no findings beyond the device nodes.
"""

from __future__ import annotations

from gpuhook.edits import Edits
from gpuhook.errors import DiscoveryError, GpuhookError, RequestError, SimulatorError, TuningError
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.simulator.host import HostSpec
    from gpuhook.vendors.contract import Backend, DraDevice, Partitionable, Setting, Source


class _Default:
    """What every default part is made with: the vendor's label (in messages) and name."""

    def __init__(self, label: str, name: str) -> None:
        self._label = label


class NoTuning(_Default):
    """Tuning of a vendor whose GPUs take none."""

    def settings(self, tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
        """Nothing for a request without settings; RequestError for one with."""
        if tuning.sets_gpu():
            raise RequestError(f"{self._label} GPU {gpu.index} takes no gpuhook.dev/ tuning (clocks, power, fans, "
                               "modes): gpuhook has no tuning for this vendor; drop the tuning annotations")
        return ()

    def sharing(self, tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
        """No daemon shares these GPUs; RequestError where MPS is asked."""
        if tuning.mps:
            raise RequestError(f"gpuhook.dev/mps is NVIDIA's MPS, but these are {self._label} GPUs: drop it")
        return (), Edits()

    def repartition(self, root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
        """GpuhookError: no layouts."""
        raise GpuhookError(f"{self._label} GPU {gpu.index}: gpuhook applies no partition layouts to this vendor's "
                           "GPUs; drop it from the layout file")

    def backend(self, root: Root, state_dir: str) -> Backend:
        """TuningError: no backend."""
        raise TuningError(f"gpuhook has no tuning backend for {self._label} GPUs")


class NoTelemetry(_Default):
    """Telemetry of a vendor gpuhook cannot read."""

    def telemetry(self, root: Root, inv: VendorInventory) -> Source:
        """DiscoveryError: no session."""
        raise DiscoveryError(f"gpuhook reads no telemetry of {self._label} GPUs")


class NoKubernetes(_Default):
    """Kubernetes facts of a vendor with nothing beyond presence, count and driver."""

    SHARING: tuple[str, ...] = ("time-slicing",)
    SLICE_RESOURCE = ""

    def __init__(self, label: str, name: str) -> None:
        super().__init__(label, name)
        self.RESOURCE = f"{name}.com/gpu"  # an extended resource under the vendor's name, as the others are

    def labels(self, inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
               sharing: str = "time-slicing") -> dict[str, str]:
        """No labels of its own."""
        return {}

    def dra_devices(self, inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
        """No DRA devices."""
        return ()

    def partitionable(self, inv: VendorInventory, root: Root) -> tuple[Partitionable, ...]:
        """Nothing partitioned on demand."""
        return ()

    def make_partition(self, root: Root, gpu: Gpu, layout: tuple[tuple[str, str], ...]) -> str:
        """GpuhookError: nothing to make."""
        raise GpuhookError(f"gpuhook makes no partitions of {self._label} GPUs")

    def remove_partition(self, root: Root, gpu: Gpu, place: str) -> None:
        """Nothing was made."""


class NoStack(_Default):
    """A vendor whose images' user space gpuhook does not check."""

    STACK = ""
    IMAGE = False


    def image_stack(self, image: InRoot, notes: list[str]) -> str | None:
        """None: nothing to read."""
        return None

    def stack_window(self, inv: VendorInventory) -> tuple[str, str] | None:
        """None: no window."""
        return None

    def release_of_driver(self, driver: str) -> str | None:
        """None: no releases."""
        return None

    def min_driver(self, release: str) -> str | None:
        """None: no releases."""
        return None

    def check_release(self, inv: VendorInventory, release: str, strict: bool) -> str | None:
        """None: nothing to check."""
        return None


@frozen
class _NoOptions:
    """No settings."""


class NoSim(_Default):
    """A vendor `gpuhook simulate` cannot make."""

    OPTIONS: type = _NoOptions


    STATE = ""
    REACTIONS: tuple[str, ...] = ()
    DEMO = "ls -l /dev; id"

    def build(self, root: str, spec: HostSpec, count: int) -> None:
        """SimulatorError naming the vendor."""
        raise SimulatorError(f"gpuhook simulate cannot make {self._label} GPUs: the vendor has no simulator")

    def react(self, root: str, spec: HostSpec, what: str, index: int, value: str) -> HostSpec | None:
        """SimulatorError: no reactions."""
        raise SimulatorError(f"{self._label}: no simulated driver reacts to {what!r}")

    def settle(self, root: str) -> None:
        """Nothing to follow."""


class NoDoctor(_Default):
    """A vendor with nothing to check beyond its device nodes."""

    def checks(self, inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
        """No findings."""
        return ()


DEFAULTS = {"tuning": NoTuning, "telemetry": NoTelemetry, "kubernetes": NoKubernetes, "stack": NoStack,
            "sim": NoSim, "doctor": NoDoctor}
