"""The GPU vendors gpuhook knows, each a package behind the `Vendor` protocol, and the registry of them.

Everything that differs between vendors is a member of the protocol: nothing outside vendors/ tests a
vendor's name to pick a behaviour, and a name the registry does not know is an error, never a default.
A built-in vendor is a package in this folder, named in BUILTIN, whose order is the order of discovery, listings and
messages (all_vendors imports them in it): vendor.py is the protocol's face (the GPU path's part); its other parts
are modules named after them (tuning.py, telemetry.py, kubernetes.py, stack.py, sim.py, doctor.py: the protocols of
vendors/contract.py), found here by that name, and vendors/defaults.py's stand in for one it lacks. A vendor's
modules import only the rooms below vendors/, vendors/contract.py and other vendors' modules (Hygon's build on
AMD's); nothing outside vendors/ imports them but this registry. `register` adds one from outside (a plugin, a
test) for the life of the process, its parts as attributes of the same names.
A vendor's request env key must end in `_VISIBLE_DEVICES`: the runtime's pass-through path looks for that
text (and `gpuhook.dev/`) before it loads any vendor, so every vendor's requests are seen without it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Protocol

    from gpuhook.config import Policy
    from gpuhook.edits import DeviceNode, Edits
    from gpuhook.host.inventory import Gpu, VendorInventory
    from gpuhook.host.root import Root
    from gpuhook.vendors.amd import kubernetes as amd_kubernetes
    from gpuhook.vendors.amd import sim as amd_sim
    from gpuhook.vendors.amd import telemetry as amd_telemetry
    from gpuhook.vendors.amd import tuning as amd_tuning
    from gpuhook.vendors.contract import DoctorPart, KubernetesPart, SimPart, StackPart, TelemetryPart, TuningPart
    from gpuhook.vendors.hygon import doctor as hygon_doctor
    from gpuhook.vendors.hygon import kubernetes as hygon_kubernetes
    from gpuhook.vendors.hygon import sim as hygon_sim
    from gpuhook.vendors.hygon import stack as hygon_stack
    from gpuhook.vendors.hygon import telemetry as hygon_telemetry
    from gpuhook.vendors.hygon import tuning as hygon_tuning
    from gpuhook.vendors.nvidia import doctor as nvidia_doctor
    from gpuhook.vendors.nvidia import kubernetes as nvidia_kubernetes
    from gpuhook.vendors.nvidia import sim as nvidia_sim
    from gpuhook.vendors.nvidia import telemetry as nvidia_telemetry
    from gpuhook.vendors.nvidia import tuning as nvidia_tuning

    # the built-in parts, held to their protocols by the type checker (the registry finds them by name at run time)
    _TUNING: tuple[TuningPart, ...] = (nvidia_tuning, amd_tuning, hygon_tuning)
    _TELEMETRY: tuple[TelemetryPart, ...] = (nvidia_telemetry, amd_telemetry, hygon_telemetry)
    _KUBERNETES: tuple[KubernetesPart, ...] = (nvidia_kubernetes, amd_kubernetes, hygon_kubernetes)
    _STACK: tuple[StackPart, ...] = (hygon_stack,)
    _SIM: tuple[SimPart, ...] = (nvidia_sim, amd_sim, hygon_sim)
    _DOCTOR: tuple[DoctorPart, ...] = (nvidia_doctor, hygon_doctor)
else:
    Protocol = object

BUILTIN = ("nvidia", "amd", "hygon")
MARKER_SUFFIX = "_VISIBLE_DEVICES"


class Vendor(Protocol):
    """What a vendor's vendor.py provides: the GPU path's part (ids, discovery, identities, the container's edits,
    claims, hardening, procfs files). Discovery and the procfs copy read the host; the rest is pure. Its other parts
    (tuning, telemetry, Kubernetes, stack, simulator, doctor) are modules of their own (`part`)."""

    NAME: str  # as in gpuhook.dev/vendor=
    LABEL: str  # in messages
    NODE_PREFIXES: tuple[str, ...]  # a spec with such a device node has this vendor's GPU (no request needed)
    ENV_KEY: str  # the env request images carry, e.g. NVIDIA_VISIBLE_DEVICES
    NONE_MEANS_DRIVER: bool  # ENV_KEY=none asks for the driver without any GPU (NVIDIA's convention)
    CAPABILITIES_ENV: str | None  # the env that names driver capabilities, if the vendor has one
    CDI_KIND: str  # e.g. nvidia.com/gpu
    DOCKER_GPUS_HOOK: str | None  # the prestart hook Docker's --gpus adds with ENV_KEY (request.docker_flag)
    STACK: str  # the user space its images carry (CUDA, ROCm, DTK; "" for none), which its stack part checks: the
    # GPU path reads it to know whether checks apply before it loads that part

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


_registered: list[Vendor] = []
_cache: tuple[Vendor, ...] | None = None


def all_vendors() -> tuple[Vendor, ...]:
    """Every vendor gpuhook knows, built-in ones first, in a stable order."""
    global _cache
    if _cache is None:  # vendors/<name>/vendor.py for each built-in name: a new vendor is its row in BUILTIN
        builtin = tuple(__import__(f"gpuhook.vendors.{name}.vendor", fromlist=["vendor"]) for name in BUILTIN)
        _cache = (*builtin, *_registered)
    return _cache


def tuning(name: str) -> TuningPart:
    """The tuning part of vendor `name` (its settings, MPS, partition layouts, backend)."""
    return _part(name, "tuning")  # type: ignore[no-any-return]


def telemetry(name: str) -> TelemetryPart:
    """The telemetry part of vendor `name` (the exporter's readings)."""
    return _part(name, "telemetry")  # type: ignore[no-any-return]


def kubernetes(name: str) -> KubernetesPart:
    """The Kubernetes part of vendor `name` (node labels, slice resources, DRA devices)."""
    return _part(name, "kubernetes")  # type: ignore[no-any-return]


def stack(name: str) -> StackPart:
    """The user-space stack part of vendor `name` (STACK "" where it has none)."""
    return _part(name, "stack")  # type: ignore[no-any-return]


def sim(name: str) -> SimPart:
    """The simulator part of vendor `name`."""
    return _part(name, "sim")  # type: ignore[no-any-return]


def doctor(name: str) -> DoctorPart:
    """The doctor part of vendor `name`."""
    return _part(name, "doctor")  # type: ignore[no-any-return]


_parts: dict[tuple[str, str], Any] = {}
# a member each part has: a registered vendor's attribute of that name without it is no part
_PART_MEMBERS = {"tuning": "settings", "telemetry": "telemetry", "kubernetes": "labels", "stack": "image_stack",
                 "sim": "build", "doctor": "checks"}


def _part(name: str, kind: str) -> Any:
    """Vendor `name`'s part `kind`: a built-in vendor's module vendors/<name>/<kind>.py, a registered vendor's
    attribute `kind`, else vendors/defaults.py's for it. Imports the module on first use."""
    found = _parts.get((name, kind))
    if found is None:
        vendor = get(name)
        if name in BUILTIN:
            module = f"gpuhook.vendors.{name}.{kind}"
            try:  # __import__, not importlib.import_module: importlib and warnings cost the GPU path 4 modules
                found = __import__(module, fromlist=[kind])
            except ModuleNotFoundError as e:
                if e.name != module:
                    raise
        else:
            found = getattr(vendor, kind, None)
        if found is None:
            from gpuhook.vendors.defaults import DEFAULTS

            found = DEFAULTS[kind](vendor.LABEL, name)
        _parts[(name, kind)] = found
    return found


def resources(chosen: tuple[tuple[str, str], ...] = ()) -> tuple[tuple[str, str], ...]:
    """(vendor, the extended resource its GPUs are advertised under) for every vendor: the name `chosen` gives it
    ([kubernetes] resources), else its Kubernetes part's RESOURCE."""
    named = dict(chosen)
    return tuple((v, named.get(v) or kubernetes(v).RESOURCE) for v in names())


def resource(vendor: str, chosen: tuple[tuple[str, str], ...] = ()) -> str:
    """The extended resource vendor `vendor`'s GPUs are advertised under (see `resources`)."""
    return dict(chosen).get(vendor) or kubernetes(vendor).RESOURCE


def register(vendor: Vendor) -> None:
    """Add a vendor for the rest of this process (a plugin or a test); ValueError for a name taken or an env key
    the pass-through path would not notice."""
    global _cache
    if vendor.NAME in names():
        raise ValueError(f"vendor {vendor.NAME!r} is already registered")
    if not vendor.ENV_KEY.endswith(MARKER_SUFFIX):
        raise ValueError(f"vendor {vendor.NAME!r}: its env key {vendor.ENV_KEY!r} must end in {MARKER_SUFFIX}")
    for kind, member in _PART_MEMBERS.items():
        part = getattr(vendor, kind, None)
        if part is not None and not hasattr(part, member):
            raise ValueError(f"vendor {vendor.NAME!r}: its attribute {kind!r} is not a {kind} part (it lacks "
                             f"{member!r}; vendors/contract.py says what a {kind} part has)")
    _registered.append(vendor)
    _cache = None
    for key in [k for k in _parts if k[0] == vendor.NAME]:
        del _parts[key]


def unregister(name: str) -> None:
    """Drop a vendor `register` added."""
    global _cache
    _registered[:] = [v for v in _registered if name != v.NAME]
    _cache = None
    for key in [k for k in _parts if k[0] == name]:
        del _parts[key]


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
