"""Tuning annotations (clocks, power-limit, fan, perf-level, compute-mode, exclusive, fine-grain-pcie,
gfx-override).
Pure; errors name the key and quote the value."""

from __future__ import annotations

from gpuhook.errors import RequestError
from gpuhook.frozen import frozen
from gpuhook.request.ids import is_decimal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

PERF_LEVELS = ("auto", "low", "high", "manual", "profile_standard", "profile_peak", "profile_min_sclk",
               "profile_min_mclk", "perf_determinism")
COMPUTE_MODES = ("default", "exclusive-process", "prohibited")
MAX_MHZ = 100_000  # well above any GPU clock; NVML takes 32-bit values
MAX_WATTS = 10_000  # well above any GPU board; NVML takes milliwatts in 32 bits
KEYS = ("clocks", "power-limit", "fan", "perf-level", "compute-mode", "exclusive", "fine-grain-pcie", "gfx-override",
        "mps", "mps-threads", "mps-memory")
MAX_MPS_MIB = 1 << 24  # 16 TiB: above any GPU's memory
# Never taken from env: an image's own ENV would lease GPUs or start host daemons for every container run from it,
# with nobody asking (an annotation is always the user's, or the pod author's)
NOT_FROM_ENV = ("exclusive", "mps", "mps-threads", "mps-memory")
# A claim's GpuConfig field for each tuning key (kubernetes/dra/config.py parses them; messages name them)
GPU_CONFIG_FIELDS = {"clocks": "clocks", "powerLimit": "power-limit", "fan": "fan", "perfLevel": "perf-level",
                     "computeMode": "compute-mode", "exclusive": "exclusive", "mps": "mps",
                     "mpsActiveThreadPercentage": "mps-threads", "mpsPinnedMemoryLimit": "mps-memory"}


@frozen
class Tuning:
    """Host settings a container asks for on its GPUs, and AMD runtime knobs (env)."""

    clocks: tuple[int, int] | None = None  # graphics clock range, MHz
    power_limit: int | None = None  # watts
    fan: str | None = None  # "auto" (the driver's own curve) or a fixed speed, percent ("80")
    perf_level: str | None = None  # AMD
    compute_mode: str | None = None  # NVIDIA
    exclusive: bool = False
    env: tuple[str, ...] = ()
    mps: bool = False  # NVIDIA: share the GPU through an MPS control daemon gpuhook runs on the host
    mps_threads: int | None = None  # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, 1-100
    mps_memory: int | None = None  # CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, MiB

    def touches_host(self) -> bool:
        """Whether anything must be applied (and later restored) on the host."""
        return any((self.clocks, self.power_limit, self.fan, self.perf_level, self.compute_mode, self.exclusive,
                    self.mps))

    def asked_keys(self) -> tuple[str, ...]:
        """The host-side keys it asks (as gpuhook.dev/ names them), in KEYS order; the AMD env knobs are not."""
        asked = {"clocks": self.clocks, "power-limit": self.power_limit, "fan": self.fan,
                 "perf-level": self.perf_level, "compute-mode": self.compute_mode, "exclusive": self.exclusive,
                 "mps": self.mps, "mps-threads": self.mps_threads, "mps-memory": self.mps_memory}
        return tuple(k for k in KEYS if asked.get(k))

    def sets_gpu(self) -> bool:
        """Whether it changes a setting of the physical GPU (clocks, power, fan, performance level, compute mode)."""
        return any((self.clocks, self.power_limit, self.fan, self.perf_level, self.compute_mode))


def env_key(key: str) -> str:
    """The env name of a tuning key, for engines that pass no annotations (Docker 20.10): GPUHOOK_CLOCKS, ..."""
    return "GPUHOOK_" + key.upper().replace("-", "_")


def from_env(ours: Mapping[str, str], env: Mapping[str, str]) -> tuple[dict[str, str], frozenset[str]]:
    """The tuning keys asked by annotation, with those asked only in env (GPUHOOK_CLOCKS=1500) added; and which
    of them came from env. An annotation wins over the same key in env. RequestError for a key never taken from
    env (NOT_FROM_ENV) set there, non-empty, without its annotation."""
    merged = {k: v for k, v in ours.items() if k in KEYS}
    for key in NOT_FROM_ENV:
        value = env.get(env_key(key), "")
        if key not in merged and isinstance(value, str) and value.strip():
            shown = value if len(value) <= 64 else value[:64] + "…"
            raise RequestError(f"{env_key(key)}={shown!r}: {key} is never taken from env (an image's ENV would ask "
                               f"it for every container run from it): ask with the annotation gpuhook.dev/{key} "
                               f"(docker run --annotation), or unset it (-e {env_key(key)}=)")
    taken = frozenset(k for k in KEYS if k not in merged and k not in NOT_FROM_ENV and env_key(k) in env)
    return merged | {k: env[env_key(k)] for k in taken}, taken


def parse_tuning(ours: Mapping[str, str], env_keys: frozenset[str] = frozenset()) -> Tuning:
    """The tuning part of a container's gpuhook.dev/ annotations (keys without the prefix); `env_keys` are those
    that came from the GPUHOOK_* env instead (from_env), named so in errors."""
    def name(key: str) -> str:
        return env_key(key) if key in env_keys else f"annotation gpuhook.dev/{key}"

    env = []
    if _flag(ours, "fine-grain-pcie", name):
        env.append("HSA_FORCE_FINE_GRAIN_PCIE=1")
    if "gfx-override" in ours:
        value = ours["gfx-override"].strip()
        parts = value.split(".")
        if len(parts) != 3 or not all(is_decimal(p) and len(p) <= 3 for p in parts):
            _bad(name("gfx-override"), ours["gfx-override"], "a gfx version such as 10.3.0")
        env.append(f"HSA_OVERRIDE_GFX_VERSION={value}")
    mps, threads, memory = _flag(ours, "mps", name), _threads(ours, name), _mib(ours, name)
    if (threads or memory) and not mps:
        shown = "mps-threads" if threads else "mps-memory"
        raise RequestError(f"{name(shown)} limits an MPS client: it needs gpuhook.dev/mps=true")
    return Tuning(_clocks(ours, name), _watts(ours, name), _fan(ours, name),
                  _choice(ours, "perf-level", PERF_LEVELS, name), _choice(ours, "compute-mode", COMPUTE_MODES, name),
                  _flag(ours, "exclusive", name), tuple(env), mps, threads, memory)


def _bad(name: str, raw: str, expected: str) -> None:
    shown = raw if len(raw) <= 64 else raw[:64] + "…"
    raise RequestError(f"{name}={shown!r}: expected {expected}")


def _clocks(ours: Mapping[str, str], name: Callable[[str], str]) -> tuple[int, int] | None:
    if "clocks" not in ours:
        return None
    raw = ours["clocks"]
    low, sep, high = raw.strip().lower().removesuffix("mhz").partition("-")
    if not _number(low.strip()) or (sep and not _number(high.strip())):
        _bad(name("clocks"), raw, "MHz (1500) or a range (1200-1800)")
    lo, hi = int(low), int(high) if sep else int(low)
    if lo <= 0 or hi < lo or hi > MAX_MHZ:
        _bad(name("clocks"), raw, f"a positive MHz value up to {MAX_MHZ} or a range whose first value is the lower")
    return lo, hi


def _watts(ours: Mapping[str, str], name: Callable[[str], str]) -> int | None:
    if "power-limit" not in ours:
        return None
    raw = ours["power-limit"]
    value = raw.strip().lower().removesuffix("w").strip()
    if not _number(value) or not 0 < int(value) <= MAX_WATTS:
        _bad(name("power-limit"), raw, f"watts, e.g. 300 (at most {MAX_WATTS})")
    return int(value)


def _fan(ours: Mapping[str, str], name: Callable[[str], str]) -> str | None:
    if "fan" not in ours:
        return None
    raw = ours["fan"]
    value = raw.strip().lower()
    if value == "auto":
        return value
    value = value.removesuffix("%").strip()
    if not _number(value) or int(value) > 100:
        _bad(name("fan"), raw, "a fan speed in percent (0-100) or auto")
    return str(int(value))


def _threads(ours: Mapping[str, str], name: Callable[[str], str]) -> int | None:
    if "mps-threads" not in ours:
        return None
    value = ours["mps-threads"].strip().removesuffix("%").strip()
    if not _number(value) or not 0 < int(value) <= 100:
        _bad(name("mps-threads"), ours["mps-threads"], "a share of the GPU's threads in percent, 1-100")
    return int(value)


def _mib(ours: Mapping[str, str], name: Callable[[str], str]) -> int | None:
    if "mps-memory" not in ours:
        return None
    raw = ours["mps-memory"]
    value = raw.strip().upper().removesuffix("B")
    scale = {"M": 1, "G": 1024, "T": 1024 * 1024}.get(value[-1:], 0)
    if not scale or not _number(value[:-1]) or not 0 < int(value[:-1]) * scale <= MAX_MPS_MIB:
        _bad(name("mps-memory"), raw, "the GPU memory an MPS client may pin, e.g. 8G or 512M")
    return int(value[:-1]) * scale


def _number(text: str) -> bool:
    return is_decimal(text) and len(text) <= 6


def _choice(ours: Mapping[str, str], key: str, choices: tuple[str, ...], name: Callable[[str], str]) -> str | None:
    if key not in ours:
        return None
    value = ours[key].strip().lower()
    if value not in choices:
        _bad(name(key), ours[key], "one of " + ", ".join(choices))
    return value


def _flag(ours: Mapping[str, str], key: str, name: Callable[[str], str]) -> bool:
    if key not in ours:
        return False
    value = ours[key].strip().lower()
    if value not in ("true", "false"):
        _bad(name(key), ours[key], "true or false")
    return value == "true"
