"""What a container asks of its GPUs' host settings and of its AMD runtime env (the Tuning record), parsed from its
gpuhook.dev/ annotations and GPUHOOK_* env by the knob table (request/knobs.py), and turned into a vendor's settings
by the vendor's table. Pure; errors name the key and quote the value."""

from __future__ import annotations

from gpuhook.errors import RequestError
from gpuhook.frozen import frozen
from gpuhook.request.knobs import CONTAINER, GPU, KNOB, KNOBS
from gpuhook.request.knobs import env_key as env_key  # the name plan/authority.py and messages use

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from gpuhook.request.knobs import Sets

KEYS = tuple(k.key for k in KNOBS)
# Never taken from env: an image's own ENV would lease GPUs or start host daemons for every container run from it,
# with nobody asking (an annotation is always the user's, or the pod author's)
NOT_FROM_ENV = tuple(k.key for k in KNOBS if not k.from_env)
# A claim's GpuConfig field for each tuning key (kubernetes/dra/config.py parses them; messages name them)
GPU_CONFIG_FIELDS = {k.claim: k.key for k in KNOBS if k.claim}


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

    def value(self, key: str) -> Any:
        """What it asks of the knob `key` (None for a knob that only adds to its env)."""
        field = KNOB[key].field
        return getattr(self, field) if field else None

    def touches_host(self) -> bool:
        """Whether anything must be applied (and later restored) on the host."""
        return any(self.value(k.key) for k in KNOBS if k.scope != CONTAINER)

    def asked_keys(self) -> tuple[str, ...]:
        """The host-side keys it asks (as gpuhook.dev/ names them), in KEYS order; the AMD env knobs are not."""
        return tuple(k.key for k in KNOBS if k.field and self.value(k.key))

    def sets_gpu(self) -> bool:
        """Whether it changes a setting of the physical GPU (clocks, power, fan, performance level, compute mode)."""
        return any(self.value(k.key) for k in KNOBS if k.scope == GPU)

    def settings(self, table: Sequence[Sets], foreign: Mapping[str, tuple[str, str]],
                 gpu: str) -> tuple[tuple[str, str], ...]:
        """A vendor's (setting, value) pairs for what it asks, by the vendor's `table` in its order (a setting's
        first row asked wins). RequestError for a knob of the physical GPU the table lacks: `foreign` says whose
        setting it is and the way out, `gpu` the GPU and its vendor ("GPU 0 is NVIDIA")."""
        mapped = {row.knob for row in table}
        for knob in KNOBS:
            asked = self.value(knob.key)
            if asked and knob.scope == GPU and knob.key not in mapped:
                if knob.key not in foreign:
                    raise RequestError(f"gpuhook.dev/{knob.key}={asked!r}: {gpu}, on which gpuhook sets no "
                                       f"{knob.key}: drop it")
                whose, way_out = foreign[knob.key]
                raise RequestError(f"gpuhook.dev/{knob.key}={asked!r} is {whose} but {gpu}: {way_out}")
        out: dict[str, str] = {}
        for row in table:
            asked = self.value(row.knob)
            if asked:
                out.setdefault(row.setting, row.value(asked))
        return tuple(out.items())


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
    """The tuning part of a container's gpuhook.dev/ annotations (keys without the prefix), each by its knob's
    parser; `env_keys` are those that came from the GPUHOOK_* env instead (from_env), named so in errors."""
    fields: dict[str, Any] = {}
    env = []
    for knob in KNOBS:
        if knob.key in ours:
            value = knob.parse(ours[knob.key], _named(knob.key, env_keys))
            if knob.field:
                fields[knob.field] = value
            elif value:
                env.append(value)
    limits = [k for k in ("mps-threads", "mps-memory") if fields.get(KNOB[k].field)]
    if limits and not fields.get("mps"):
        raise RequestError(f"{_named(limits[0], env_keys)} limits an MPS client: it needs gpuhook.dev/mps=true")
    return Tuning(env=tuple(env), **fields)


def _named(key: str, env_keys: frozenset[str]) -> str:
    return env_key(key) if key in env_keys else f"annotation gpuhook.dev/{key}"
