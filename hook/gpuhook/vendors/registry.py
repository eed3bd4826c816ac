"""The GPU vendors gpuhook knows, each a package behind the `Vendor` protocol, and the registry of them.

Everything that differs between vendors is a member of the protocol: nothing outside vendors/ tests a
vendor's name to pick a behaviour, and a name the registry does not know is an error, never a default.
A built-in vendor is a package in this folder (vendors/<name>/: vendor.py is the protocol's face; discovery's
helpers, node labels, the tuning backend, telemetry readings and the simulator are its other modules, which import
only the rooms below vendors/ and vendors/contract.py), named in BUILTIN, whose order is the order of discovery,
listings and messages (all_vendors imports them in it); `register` adds one from outside (a plugin, a test) for
the life of the process.
A vendor's request env key must end in `_VISIBLE_DEVICES`: the runtime's pass-through path looks for that
text (and `gpuhook.dev/`) before it loads any vendor, so every vendor's requests are seen without it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    from gpuhook.config import Policy
    from gpuhook.edits import DeviceNode, Edits
    from gpuhook.host.image import InRoot
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.request.tuning import Tuning
    from gpuhook.simulator.host import HostSpec
    from gpuhook.vendors.contract import Backend, DraDevice, Setting, Source
else:
    Protocol = object

BUILTIN = ("nvidia", "amd", "hygon")
MARKER_SUFFIX = "_VISIBLE_DEVICES"


class Vendor(Protocol):
    """What a vendor module provides. Discovery and the procfs copy read the host; everything else is pure,
    except `backend` (which the tuning hooks alone call), `telemetry` (the exporter's) and `simulate` (the simulator's
    builder)."""

    NAME: str  # as in gpuhook.dev/vendor=
    LABEL: str  # in messages
    NODE_PREFIXES: tuple[str, ...]  # a spec with such a device node has this vendor's GPU (no request needed)
    ENV_KEY: str  # the env request images carry, e.g. NVIDIA_VISIBLE_DEVICES
    NONE_MEANS_DRIVER: bool  # ENV_KEY=none asks for the driver without any GPU (NVIDIA's convention)
    CAPABILITIES_ENV: str | None  # the env that names driver capabilities, if the vendor has one
    CDI_KIND: str  # e.g. nvidia.com/gpu
    DOCKER_GPUS_HOOK: str | None  # the prestart hook Docker's --gpus adds with ENV_KEY (request.docker_flag)
    SLICE_RESOURCE: str  # the device plugin's per-profile resource name for slices ("mixed"), {profile} in it
    SHARING: tuple[str, ...]  # how its GPUs can be shared: time-slicing, and mps where `sharing` runs MPS daemons
    STACK: str | None  # the vendor's user space an image ships, checked against the host's driver by plan/compat
    # (Hygon's DTK); None where there is none to check that way (NVIDIA's CUDA and AMD's ROCm have checks of their own)

    def parse_id(self, item: str) -> str | None:
        """The vendor's own identifier form (a UUID) normalised, or None when `item` is not one."""
        ...

    def discover(self, root: Root) -> VendorInventory | None:
        """The vendor's driver, GPUs, nodes and files on the host; None when its driver is absent. Reads."""
        ...

    def refresh(self) -> None:
        """What `discover` remembers of a host between calls (NVIDIA: its driver files), read again where it
        changed; nothing for a vendor that remembers nothing. Reads."""
        ...

    def identify(self, root: Root, inv: VendorInventory, idents: Sequence[str] | None) -> VendorInventory:
        """`inv` with the identities only the vendor's library knows (NVIDIA: MIG UUIDs and profiles from NVML)
        filled in, when `idents` (a request's normalised identifiers; None: a listing's, all) need such a one;
        else `inv` itself. May load a library."""
        ...

    def plan(self, inv: VendorInventory, gpus: Sequence[Gpu], capabilities: frozenset[str],
             host_base: str) -> Edits:
        """Edits that give a container `gpus` (and the driver parts for `capabilities`)."""
        ...

    def claims(self, gpu: Gpu) -> tuple[DeviceNode, ...]:
        """The nodes whose presence in a spec means the container already has this GPU (a device plugin's)."""
        ...

    def hardening(self, policy: Policy) -> Edits:
        """What every container of this vendor gets by default ([policy] switches)."""
        ...

    def procfs_files(self, root: Root, gpus: Sequence[Gpu], policy: Policy) -> tuple[str, dict[str, str]] | None:
        """(procfs directory, its files' texts) to copy read-only over the container's own; None for none.
        Reads the host."""
        ...

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
        offers, or that the vendor has no such layout. With `dry_run` the same checks, and what would change,
        without a write (`partition apply` checks every GPU so before it changes one). Writes the driver's files
        or calls its library."""
        ...

    def backend(self, root: Root, state_dir: str) -> Backend:
        """The tuning backend for this vendor's GPUs under `root` (the caller closes it); what it starts on the
        host (NVIDIA's MPS daemons) it records in `state_dir`. Loads libraries."""
        ...

    def telemetry(self, root: Root, inv: VendorInventory) -> Source:
        """A telemetry session on this vendor's GPUs under `root`, for the exporter (the caller closes it);
        GpuhookError when it cannot start. Loads libraries; reads only."""
        ...

    def labels(self, inv: VendorInventory, root: Root, replicas: int, strategy: str = "none",
               sharing: str = "time-slicing") -> dict[str, str]:
        """Node labels beyond presence, count and driver, for GPUs shared `replicas` ways (by `sharing`, one of
        SHARING) and slices advertised by `strategy` ([kubernetes] mig_strategy: none, single, mixed): a key without
        '/' is gpuhook's own (written as gpuhook-<vendor>.<key>), one with a prefix (the vendor's own labeller's,
        e.g. nvidia.com/gpu.product) is written as it is."""
        ...

    def dra_devices(self, inv: VendorInventory, root: Root) -> tuple[DraDevice, ...]:
        """The devices gpuhook's DRA driver publishes for this vendor's GPUs: whole GPUs and slices, named and
        described as the vendor's own DRA driver does (vendors/contract.DraDevice). Loads libraries; reads only."""
        ...

    def image_stack(self, image: InRoot, notes: list[str]) -> str | None:
        """The release of STACK the image ships, None for none; a file gpuhook refused to read is said in `notes`.
        Reads the image root (never out of it)."""
        ...

    def stack_window(self, inv: VendorInventory) -> tuple[str, str] | None:
        """(oldest, newest) release of STACK the host's driver runs; None when gpuhook cannot say."""
        ...

    def checks(self, inv: VendorInventory) -> tuple[tuple[str, str, str], ...]:
        """Doctor findings (level, what, fix) beyond the device nodes."""
        ...

    def simulate(self, root: str, spec: HostSpec, count: int) -> None:
        """Add this vendor's driver and `count` GPUs to the simulated host at `root`. Writes files, mknod."""
        ...


_registered: list[Vendor] = []
_cache: tuple[Vendor, ...] | None = None


def all_vendors() -> tuple[Vendor, ...]:
    """Every vendor gpuhook knows, built-in ones first, in a stable order."""
    global _cache
    if _cache is None:
        from gpuhook.vendors.amd import vendor as amd
        from gpuhook.vendors.hygon import vendor as hygon
        from gpuhook.vendors.nvidia import vendor as nvidia

        builtin: dict[str, Vendor] = {"nvidia": nvidia, "amd": amd, "hygon": hygon}
        _cache = (*(builtin[name] for name in BUILTIN), *_registered)
    return _cache


def register(vendor: Vendor) -> None:
    """Add a vendor for the rest of this process (a plugin or a test); ValueError for a name taken or an env key
    the pass-through path would not notice."""
    global _cache
    if vendor.NAME in names():
        raise ValueError(f"vendor {vendor.NAME!r} is already registered")
    if not vendor.ENV_KEY.endswith(MARKER_SUFFIX):
        raise ValueError(f"vendor {vendor.NAME!r}: its env key {vendor.ENV_KEY!r} must end in {MARKER_SUFFIX}")
    _registered.append(vendor)
    _cache = None


def unregister(name: str) -> None:
    """Drop a vendor `register` added."""
    global _cache
    _registered[:] = [v for v in _registered if name != v.NAME]
    _cache = None


def names() -> tuple[str, ...]:
    """The known vendors' names."""
    return tuple(v.NAME for v in all_vendors())


def get(name: str) -> Vendor:
    """The vendor called `name`; KeyError naming the known ones otherwise (an internal error: names come from
    the registry itself, and requests are checked against `names()` first)."""
    for v in all_vendors():
        if name == v.NAME:
            return v
    raise KeyError(f"unknown GPU vendor {name!r}; gpuhook knows {', '.join(names())}")


def env_keys() -> tuple[str, ...]:
    """Every vendor's request env key, in vendor order."""
    return tuple(v.ENV_KEY for v in all_vendors())


def node_prefixes() -> tuple[str, ...]:
    """Every vendor's GPU device node prefixes (no spaces in them): a spec naming one has a GPU."""
    return tuple(p for v in all_vendors() for p in v.NODE_PREFIXES)


def markers() -> tuple[bytes, ...]:
    """Byte strings whose presence in a config.json may mean a GPU request."""
    return (b"gpuhook.dev/", *(k.encode() for k in env_keys()))
