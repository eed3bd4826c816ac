"""What a vendor's modules hand the rooms that call them, and the protocols those rooms hold them to: a tuning
Setting and the Backend that reads and writes it, a telemetry Reading and the Source that reads it, a DRA device;
and the vendor's parts beyond the hot path (tuning, telemetry, Kubernetes, the user-space stack, the simulator,
doctor), each a small protocol. Here, in the vendors' room, so that a vendor's modules never import tuning/,
metrics/ or kubernetes/ (the rooms above them)."""

from __future__ import annotations

from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    from gpuhook.edits import Edits
    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.simulator.host import HostSpec
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
        """Change the setting; its caller asks `check` of a value asked first (never of an original, which is given
        back as it was: tuning/backends.BackendSet.check). Writes to the host."""
        ...

    def check(self, s: Setting) -> None:
        """TuningError naming the GPU's own range (its clocks, power limits, fan speeds) or what it lacks (a fan, a
        performance level) where it cannot take `s.value`: the shim and the DRA driver ask it before anything
        changes, the prestart hook last, before `set` (tuning/backends.BackendSet.check, which remembers what a GPU
        took). Reads the GPU; writes nothing."""
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
    return Reading(utilization=v("utilization"), memory_used=v("memory_used"), memory_total=v("memory_total"),
                   power=v("power"), temperature=v("temperature"),
                   sm_clock=v("sm_clock"), power_limit=v("power_limit"))


@frozen
class DraDevice:
    """One device a vendor offers to Kubernetes' DRA (kubernetes/dra/devices.py publishes it): a whole GPU, or a
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
    numa_in_domain: bool = False  # the vendor's driver publishes the NUMA node under its domain too (AMD's)
    # What the vendor's driver publishes that gpuhook's own domain never carried: under `domain` only, once (NVIDIA's
    # addressingMode; a MIG device's multiprocessors, engines and memorySlice<N>), within the 32-field budget
    domain_attributes: tuple[tuple[str, str | int | bool], ...] = ()
    domain_capacity: tuple[tuple[str, int], ...] = ()


@frozen
class Partition:
    """A device a vendor makes when a claim is prepared (KEP-4815's partitionable devices, [kubernetes] partitions =
    "dynamic"): published as `device` (its `gpu` the physical GPU), taking `consumes` of its GPU's counters, so
    that the scheduler never allocates two that overlap. `layout` says what to make, in the vendor's words (NVIDIA:
    profile and placement; AMD: compute and memory modes and the partition's number); () for the whole GPU as it
    is."""

    device: DraDevice
    consumes: tuple[tuple[str, int], ...]
    layout: tuple[tuple[str, str], ...] = ()
    mode: str = ""  # the mode the whole GPU takes for it (AMD: "CPX NPS1"), shared by its sibling partitions; ""
    # where each is made alone (a MIG device)


@frozen
class Partitionable:
    """A physical GPU offered as partitions made on demand: its counters (a CounterSet named `counter_set`) and
    every partition it can take, the whole GPU among them."""

    gpu: Gpu
    counter_set: str  # a DNS label, unique in the node's pool
    counters: tuple[tuple[str, int], ...]
    partitions: tuple[Partition, ...]


# The parts of a vendor beyond the hot path's (registry.Vendor). Each is a module of the vendor's package named
# after it (vendors/<name>/tuning.py, telemetry.py, kubernetes.py, stack.py, sim.py, doctor.py), which the registry
# finds by that name (registry.part); a vendor without one gets vendors/defaults.py's, which says what it lacks.
PARTS = ("tuning", "telemetry", "kubernetes", "stack", "sim", "doctor")
CUDA, ROCM = "CUDA", "ROCm"  # the stacks requirements and host ROCm speak of; the vendors whose stack parts they are
# answer for them (plan/compat.py, plan/prepare.py)


class TuningPart(Protocol):
    """Host settings on a vendor's GPUs: what a request asks, the daemons that share a GPU, partition layouts, and
    the backend that reads and writes them. Pure, except `repartition` and `backend`."""

    def settings(self, tuning: Tuning, gpu: Gpu) -> tuple[Setting, ...]:
        """The host settings that give `gpu` what `tuning` asks; RequestError for another vendor's keys."""
        ...

    def sharing(self, tuning: Tuning, gpus: Sequence[Gpu], directory: str) -> tuple[tuple[Setting, ...], Edits]:
        """What shares `gpus` through a daemon on the host when `tuning` asks (NVIDIA: MPS): the settings that start
        it (their value its directory under `directory`; restored to 'off', which stops it) and what the container
        gets to reach it; RequestError where the vendor has no such sharing or not for these GPUs."""
        ...

    def repartition(self, root: Root, gpu: Gpu, layout: dict[str, object], dry_run: bool = False) -> str:
        """Put the physical GPU `gpu` in `layout` (the vendor's keys of a `gpuhook partition apply` file), waiting
        until the driver reports it; what changed ('' when it was so already). GpuhookError naming what the GPU
        offers, or that the vendor has no such layout. With `dry_run` the same checks without a write. Writes the
        driver's files or calls its library."""
        ...

    def backend(self, root: Root, state_dir: str) -> Backend:
        """The tuning backend for this vendor's GPUs under `root` (the caller closes it); what it starts on the
        host (NVIDIA's MPS daemons) it records in `state_dir`. Loads libraries."""
        ...


class TelemetryPart(Protocol):
    """The exporter's readings of a vendor's GPUs."""

    def telemetry(self, root: Root, inv: VendorInventory) -> Source:
        """A telemetry session on this vendor's GPUs under `root` (the caller closes it); GpuhookError when it
        cannot start. Loads libraries; reads only."""
        ...


class KubernetesPart(Protocol):
    """What a vendor's GPUs are to Kubernetes: node labels, the device plugin's slice resources, DRA devices."""

    RESOURCE: str  # the extended resource its GPUs are advertised under (nvidia.com/gpu), unless the admin names one
    SHARING: tuple[str, ...]  # how its GPUs can be shared: time-slicing, and mps where the tuning part runs MPS
    SLICE_RESOURCE: str  # the device plugin's per-profile resource name for slices ("mixed"), {profile} in it

    def labels(self, inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
               sharing: str = "time-slicing") -> dict[str, str]:
        """Node labels beyond presence, count and driver, for GPUs shared `replicas` ways (by `sharing`, one of
        SHARING) and slices advertised by `strategy` ([kubernetes] mig_strategy: none, single, mixed): a key
        without '/' is gpuhook's own (written as gpuhook-<vendor>.<key>), one with a prefix (the vendor's own
        labeller's, e.g. nvidia.com/gpu.product) is written as it is. Reads the host, may load libraries."""
        ...

    def dra_devices(self, inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
        """The devices gpuhook's DRA driver publishes for this vendor's GPUs: whole GPUs and slices, named and
        described as the vendor's own DRA driver does. Reads only, may load libraries."""
        ...

    def partitionable(self, inv: VendorInventory, root: Root) -> tuple[Partitionable, ...]:
        """The GPUs that can be partitioned on demand, each with its counters and every partition it can take (the
        DRA driver's [kubernetes] partitions = "dynamic"). Reads only, may load libraries."""
        ...

    def make_partition(self, root: Root, gpu: Gpu, layout: tuple[tuple[str, str], ...]) -> str:
        """`gpu` (physical) given the partition `layout` names; the place of what was made (a slice's `place`), ""
        when nothing is made (the whole GPU). GpuhookError with one line when the GPU cannot. Writes the driver's
        state."""
        ...

    def remove_partition(self, root: Root, gpu: Gpu, place: str) -> None:
        """The partition at `place` that make_partition made on `gpu` removed (gone already is fine). Writes the
        driver's state."""
        ...


class StackPart(Protocol):
    """The vendor's user space (NVIDIA's CUDA, AMD's ROCm, Hygon's DTK): which release of it the host's driver runs,
    and the check of what an image ships against it (plan/compat runs it; CUDA's is the image's stated requirements,
    which plan/compat evaluates with these answers)."""

    STACK: str  # its name in messages and requirements ("" for none)
    IMAGE: bool  # whether its release is read from the image's files (image_stack); CUDA's is stated in its env

    def release_of_driver(self, driver: str) -> str | None:
        """The newest release of STACK driver version `driver` runs; None when gpuhook cannot say. Pure."""
        ...

    def min_driver(self, release: str) -> str | None:
        """The oldest driver that runs release `release` of STACK; None when gpuhook cannot say. Pure."""
        ...

    def check_release(self, inv: VendorInventory, release: str, strict: bool) -> str | None:
        """The container's `release` of STACK against the host's driver: a warning when it is outside (or cannot be
        checked), None when it fits; PolicyError when `strict` and it is outside. Pure."""
        ...

    def image_stack(self, image: InRoot, notes: list[str]) -> str | None:
        """The release of STACK the image ships, None for none; a file gpuhook refused to read is said in
        `notes`. Reads the image root (never out of it)."""
        ...

    def stack_window(self, inv: VendorInventory) -> tuple[str, str] | None:
        """(oldest, newest) release of STACK the host's driver runs; None when gpuhook cannot say."""
        ...


class SimPart(Protocol):
    """The vendor's driver in `gpuhook simulate`'s hosts, and its reactions when its stub library changes a GPU
    (testing/react.py runs them)."""

    STATE: str  # the name its stub library's state files start with under the host's SIM_STATE ("" for none)
    REACTIONS: tuple[str, ...]  # what its stubs ask the simulator to play (a partition mode, MIG instances)
    DEMO: str  # the shell command `gpuhook demo`'s container runs to show what it got of this vendor's GPU
    OPTIONS: type  # its settings in a HostSpec: a @frozen record whose fields are their names, with defaults

    def build(self, root: str, spec: HostSpec, count: int) -> None:
        """Add this vendor's driver and `count` GPUs to the simulated host at `root`. Writes files, mknod."""
        ...

    def react(self, root: str, spec: HostSpec, what: str, index: int, value: str) -> HostSpec | None:
        """Play reaction `what` (one of REACTIONS) on GPU `index`: the spec the host is to be rebuilt with, or None
        where the files were made to follow in place. Writes files."""
        ...

    def settle(self, root: str) -> None:
        """After another vendor's reaction rebuilt the host and put back this vendor's state files: its driver's
        files made to follow them again. Writes files."""
        ...


class DoctorPart(Protocol):
    """What `gpuhook doctor` says of a vendor's driver beyond its device nodes."""

    def checks(self, inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
        """Findings (level, what, fix). Pure."""
        ...
