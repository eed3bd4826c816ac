"""The tuning knobs, one row each: what a container may ask of its GPUs (gpuhook.dev/<key>) and all that the rooms
read of it: its parser, its GPUHOOK_* env twin and whether env may ask it, the [tuning] bounds it is held to, its
field in a DRA claim's GpuConfig, what it touches, which tenants of a shared GPU may ask it, and its line of
docs/tuning.md's table. Pure: each parser takes a value as asked and how messages name its key (`annotation
gpuhook.dev/clocks`, `GPUHOOK_CLOCKS`), and a RequestError names the key and quotes the value.

A new knob is a row here and its field in request/tuning.Tuning; a vendor whose GPUs take it adds a row to its tuning
table (`Sets`), and one whose GPUs do not refuses it unasked (a knob of the physical GPU no table maps)."""

from __future__ import annotations

from gpuhook.errors import RequestError
from gpuhook.frozen import frozen
from gpuhook.request.ids import is_decimal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

# What a knob touches (Knob.scope)
GPU = "gpu"  # a setting of the physical GPU, for every process on it (applied on the host, restored after)
HOST = "host"  # held on the host for the container: a lease, a daemon (applied, restored after)
CONTAINER = "container"  # the container's own env, nothing on the host

# How [tuning] holds a knob (Bound.kind)
RANGE = "range"  # a (lowest, highest) pair its value keeps within
CHOICES = "choices"  # the values allowed (none listed: any)
SWITCH = "switch"  # false: the knob is refused

# The grants a container holds its GPUs by (plan/shared_gpu.py): who may ask a knob (Knob.tenants)
WHOLE = "whole GPU"
TIME_SLICED = "time-sliced share"
MPS = "MPS share"
SLICE = "slice"  # a MIG device or partition whose sibling slices other containers may hold
SLICE_OPEN = "tunable slice"  # the same, where the admin lets its holder tune the GPU ([tuning] shared_slices)
GRANTS = (WHOLE, TIME_SLICED, MPS, SLICE, SLICE_OPEN)


@frozen
class Bound:
    """A [tuning] key that holds a knob: a range, the values allowed or a switch (`kind`), never holding `free`."""

    kind: str  # RANGE, CHOICES, SWITCH
    policy: str  # the [tuning] key, config.TuningPolicy's field of that name
    unit: str = ""  # a range's unit in messages (" MHz")
    denies: str = ""  # a switch: what the host does not do while it is false ("grant exclusive GPUs")
    free: str = ""  # a value no bound holds (fan's auto: the driver's own curve)


@frozen
class Knob:
    """One tuning knob, as every room reads it."""

    key: str  # gpuhook.dev/<key>
    field: str  # the Tuning field it fills ("": it adds an entry to the container's env, Tuning.env)
    parse: Callable[[str, str], Any]  # (value as asked, how messages name it) -> the field's value; RequestError
    scope: str  # GPU, HOST, CONTAINER
    from_env: bool  # taken from its GPUHOOK_* twin (never where an image's ENV would ask it for every container)
    bounds: tuple[Bound, ...]  # what [tuning] holds it to, checked in this order
    claim: str  # its field in a DRA claim's GpuConfig ("": none)
    tenants: tuple[str, ...]  # the grants whose holders may ask it (GRANTS)
    why: str  # why the holders of other grants may not
    values: str  # docs/tuning.md: the values it takes
    vendors: str  # docs/tuning.md: whose GPUs take it

    @property
    def env(self) -> str:
        """Its env twin, for engines that pass no annotations (Docker 20.10): GPUHOOK_CLOCKS, ..."""
        return env_key(self.key)


def env_key(key: str) -> str:
    """The env name of a tuning key: GPUHOOK_ and the key upper-cased, `-` as `_`."""
    return "GPUHOOK_" + key.upper().replace("-", "_")


@frozen
class Sets:
    """A row of a vendor's tuning table: knob `knob`, asked, sets the GPU's setting `setting` to `value(asked)`."""

    knob: str
    setting: str
    value: Callable[[Any], str]


PERF_LEVELS = ("auto", "low", "high", "manual", "profile_standard", "profile_peak", "profile_min_sclk",
               "profile_min_mclk", "perf_determinism")
COMPUTE_MODES = ("default", "exclusive-process", "prohibited")
MAX_MHZ = 100_000  # well above any GPU clock; NVML takes 32-bit values
MAX_WATTS = 10_000  # well above any GPU board; NVML takes milliwatts in 32 bits
MAX_MPS_MIB = 1 << 24  # 16 TiB: above any GPU's memory


def _clocks(raw: str, name: str) -> tuple[int, int]:
    """A graphics clock range in MHz: 1500 (1500-1500) or 1200-1800."""
    low, sep, high = raw.strip().lower().removesuffix("mhz").partition("-")
    if not _number(low.strip()) or (sep and not _number(high.strip())):
        _bad(name, raw, "MHz (1500) or a range (1200-1800)")
    lo, hi = int(low), int(high) if sep else int(low)
    if lo <= 0 or hi < lo or hi > MAX_MHZ:
        _bad(name, raw, f"a positive MHz value up to {MAX_MHZ} or a range whose first value is the lower")
    return lo, hi


def _watts(raw: str, name: str) -> int:
    """A power limit in watts: 300 or 300W."""
    value = raw.strip().lower().removesuffix("w").strip()
    if not _number(value) or not 0 < int(value) <= MAX_WATTS:
        _bad(name, raw, f"watts, e.g. 300 (at most {MAX_WATTS})")
    return int(value)


def _fan(raw: str, name: str) -> str:
    """'auto' (the driver's own curve) or a fixed fan speed in percent, as digits ("80")."""
    value = raw.strip().lower()
    if value == "auto":
        return value
    value = value.removesuffix("%").strip()
    if not _number(value) or int(value) > 100:
        _bad(name, raw, "a fan speed in percent (0-100) or auto")
    return str(int(value))


def _perf_level(raw: str, name: str) -> str:
    """One of PERF_LEVELS (AMD's performance levels)."""
    return _choice(raw, PERF_LEVELS, name)


def _compute_mode(raw: str, name: str) -> str:
    """One of COMPUTE_MODES (NVIDIA's compute modes)."""
    return _choice(raw, COMPUTE_MODES, name)


def _flag(raw: str, name: str) -> bool:
    """true or false."""
    value = raw.strip().lower()
    if value not in ("true", "false"):
        _bad(name, raw, "true or false")
    return value == "true"


def _fine_grain_pcie(raw: str, name: str) -> str:
    """The env entry HSA_FORCE_FINE_GRAIN_PCIE=1 for true, nothing ("") for false."""
    return "HSA_FORCE_FINE_GRAIN_PCIE=1" if _flag(raw, name) else ""


def _gfx_override(raw: str, name: str) -> str:
    """The env entry HSA_OVERRIDE_GFX_VERSION=<version> for a gfx version such as 10.3.0."""
    value = raw.strip()
    parts = value.split(".")
    if len(parts) != 3 or not all(is_decimal(p) and len(p) <= 3 for p in parts):
        _bad(name, raw, "a gfx version such as 10.3.0")
    return f"HSA_OVERRIDE_GFX_VERSION={value}"


def _threads(raw: str, name: str) -> int:
    """An MPS client's share of the GPU's threads in percent, 1-100."""
    value = raw.strip().removesuffix("%").strip()
    if not _number(value) or not 0 < int(value) <= 100:
        _bad(name, raw, "a share of the GPU's threads in percent, 1-100")
    return int(value)


def _mib(raw: str, name: str) -> int:
    """The GPU memory an MPS client may pin, in MiB, from 512M, 8G or 1T."""
    value = raw.strip().upper().removesuffix("B")
    scale = {"M": 1, "G": 1024, "T": 1024 * 1024}.get(value[-1:], 0)
    if not scale or not _number(value[:-1]) or not 0 < int(value[:-1]) * scale <= MAX_MPS_MIB:
        _bad(name, raw, "the GPU memory an MPS client may pin, e.g. 8G or 512M")
    return int(value[:-1]) * scale


def _choice(raw: str, choices: tuple[str, ...], name: str) -> str:
    value = raw.strip().lower()
    if value not in choices:
        _bad(name, raw, "one of " + ", ".join(choices))
    return value


def _number(text: str) -> bool:
    return is_decimal(text) and len(text) <= 6


def _bad(name: str, raw: str, expected: str) -> NoReturn:
    shown = raw if len(raw) <= 64 else raw[:64] + "…"
    raise RequestError(f"{name}={shown!r}: expected {expected}")


_GPU_WIDE = (WHOLE, SLICE_OPEN)
_CLIENT = (WHOLE, MPS, SLICE, SLICE_OPEN)
_GPU_WIDE_WHY = ("clocks, power limit, fans and performance level are the whole GPU's: on a shared GPU the admin "
                 "sets them, not a tenant")
_CLIENT_WHY = "an MPS client's limits need an MPS share"

# In the order of docs/tuning.md's table, of the keys in messages, and of the GpuConfig fields
KNOBS = (
    Knob(key="clocks", field="clocks", parse=_clocks, scope=GPU, from_env=True,
         bounds=(Bound(kind=RANGE, policy="clocks_mhz", unit=" MHz"),), claim="clocks", tenants=_GPU_WIDE,
         why=_GPU_WIDE_WHY, values="MHz (`1500`) or a range (`1200-1800`)",
         vendors="both (NVIDIA: NVML locked clocks; AMD: the manual performance level with the sclk range)"),
    Knob(key="power-limit", field="power_limit", parse=_watts, scope=GPU, from_env=True,
         bounds=(Bound(kind=RANGE, policy="power_watts", unit=" W"),), claim="powerLimit", tenants=_GPU_WIDE,
         why=_GPU_WIDE_WHY, values="watts (`300`)",
         vendors="both (NVIDIA: the NVML power limit; AMD: the power cap)"),
    Knob(key="fan", field="fan", parse=_fan, scope=GPU, from_env=True,
         bounds=(Bound(kind=SWITCH, policy="fan", denies="let containers set fans", free="auto"),
                 Bound(kind=RANGE, policy="fan_percent", unit="%", free="auto")),
         claim="fan", tenants=_GPU_WIDE, why=_GPU_WIDE_WHY,
         values="a fixed speed in percent (`80`, `80%`) or `auto` (the driver's own curve, held against fixed "
                "speeds)",
         vendors="both (NVIDIA: NVML, every fan of the GPU; AMD: amdgpu's hwmon `pwm1`)"),
    Knob(key="perf-level", field="perf_level", parse=_perf_level, scope=GPU, from_env=True,
         bounds=(Bound(kind=CHOICES, policy="perf_levels"),), claim="perfLevel", tenants=_GPU_WIDE,
         why=_GPU_WIDE_WHY, values=", ".join(f"`{level}`" for level in PERF_LEVELS), vendors="AMD"),
    Knob(key="compute-mode", field="compute_mode", parse=_compute_mode, scope=GPU, from_env=True,
         bounds=(Bound(kind=CHOICES, policy="compute_modes"),), claim="computeMode", tenants=(WHOLE,),
         why="the compute mode is the whole GPU's (exclusive-process or prohibited ends the other tenants' CUDA)",
         values=", ".join(f"`{mode}`" for mode in COMPUTE_MODES), vendors="NVIDIA"),
    Knob(key="exclusive", field="exclusive", parse=_flag, scope=HOST, from_env=False,
         bounds=(Bound(kind=SWITCH, policy="exclusive", denies="grant exclusive GPUs"),), claim="exclusive",
         tenants=(WHOLE, SLICE, SLICE_OPEN),
         why="exclusive leases the whole GPU and refuses the other tenants' containers",
         values="`true`, `false`", vendors="both"),
    Knob(key="fine-grain-pcie", field="", parse=_fine_grain_pcie, scope=CONTAINER, from_env=True, bounds=(),
         claim="", tenants=GRANTS, why="", values="`true`, `false` (sets `HSA_FORCE_FINE_GRAIN_PCIE=1`)",
         vendors="AMD"),
    Knob(key="gfx-override", field="", parse=_gfx_override, scope=CONTAINER, from_env=True, bounds=(), claim="",
         tenants=GRANTS, why="", values="a gfx version, `10.3.0` (sets `HSA_OVERRIDE_GFX_VERSION`)", vendors="AMD"),
    Knob(key="mps", field="mps", parse=_flag, scope=HOST, from_env=False,
         bounds=(Bound(kind=SWITCH, policy="mps", denies="share GPUs through MPS"),), claim="mps", tenants=_CLIENT,
         why="how a shared GPU is shared is the admin's choice ([kubernetes] sharing = \"mps\"), not a tenant's",
         values="`true`, `false`: share the GPU through an MPS control daemon gpuhook runs on the host",
         vendors="NVIDIA ([below](#sharing-a-gpu-through-mps))"),
    Knob(key="mps-threads", field="mps_threads", parse=_threads, scope=CONTAINER, from_env=False, bounds=(),
         claim="mpsActiveThreadPercentage", tenants=_CLIENT, why=_CLIENT_WHY,
         values="percent, 1-100 (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`)", vendors="NVIDIA, with `mps`"),
    Knob(key="mps-memory", field="mps_memory", parse=_mib, scope=CONTAINER, from_env=False, bounds=(),
         claim="mpsPinnedMemoryLimit", tenants=_CLIENT, why=_CLIENT_WHY,
         values="`8G`, `512M` (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`)", vendors="NVIDIA, with `mps`"),
)
KNOB = {k.key: k for k in KNOBS}
