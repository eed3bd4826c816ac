"""What a container asks for, parsed from its annotations and env. Pure: no I/O."""

from __future__ import annotations

from gpuhook.errors import RequestError
from gpuhook.frozen import frozen, replace
from gpuhook.request.docker_flag import SOURCE as FLAG_SOURCE
from gpuhook.request.ids import check_length, parse_item
from gpuhook.request.pod import CRIO, engine
from gpuhook.request.requirements import is_version
from gpuhook.request.tuning import KEYS as TUNING_KEYS
from gpuhook.request.tuning import Tuning, from_env, parse_tuning

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from gpuhook.request.terms import Terms

PREFIX = "gpuhook.dev/"
CAPABILITIES = ("compute", "utility", "video", "graphics", "display", "compat32", "ngx")
DEFAULT_CAPABILITIES = frozenset({"compute", "utility"})

ALLOCATION = "allocation"  # set by gpuhook's device plugin through the kubelet, never by a pod author
_KNOWN = ("gpus", "vendor", "capabilities", "require", "host-rocm", *TUNING_KEYS, ALLOCATION)
COUNT_PREFIX = "count:"
MAX_COUNT = 64


@frozen
class Selection:
    """One ask for GPUs of one vendor (or of the vendor the host makes obvious).

    `devices` is None for all GPUs (or, with `count`, for that many free ones), () for the driver without any
    GPU (`none`, where the vendor has it), else normalised identifiers: decimal index, a vendor's own UUID form
    (`GPU-…`, `0x…`) or a full PCI address.
    """

    vendor: str | None
    devices: tuple[str, ...] | None
    source: str  # the annotation or env key it came from
    raw: str
    count: int = 0  # gpus=count:N: N GPUs the allocator picks among the free ones
    any_vendor: bool = False  # Docker's --gpus under [policy] gpus_any_vendor: a host's only vendor serves it

    @property
    def shown(self) -> str:
        """The raw value as messages quote it (a long list is cut)."""
        return self.raw if len(self.raw) <= 64 else self.raw[:64] + "…"


@frozen
class HostRocm:
    """gpuhook.dev/host-rocm: mount the host's ROCm user space (a version, or the one the driver supports)."""

    version: str | None = None
    override: bool = False  # the host's ROCm wins over a different one in the image


@frozen
class Request:
    """Everything a container asks gpuhook for."""

    selections: tuple[Selection, ...] = ()
    capabilities: frozenset[str] = DEFAULT_CAPABILITIES
    host_rocm: HostRocm | None = None
    host_rocm_asked: bool = False  # the annotation was given (true or false), so the policy default does not apply
    tuning: Tuning = Tuning()
    allocation: str | None = None  # gpuhook.dev/allocation: the device plugin's record id
    tuning_asked: tuple[tuple[str, str], ...] = ()  # the tuning keys (without the prefix) as asked, for merging
    tuning_env: frozenset[str] = frozenset()  # those of them asked by GPUHOOK_* env, not by annotation


    @property
    def wants_gpus(self) -> bool:
        """Whether anything is to be injected."""
        return bool(self.selections)


def env_map(env: Iterable[str]) -> dict[str, str]:
    """An OCI `process.env` list as a dict (the last of repeated keys wins; a null item, "" to runc, is none)."""
    out: dict[str, str] = {}
    for item in env:
        if not isinstance(item, str):
            continue
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def pod_keys() -> tuple[str, ...]:
    """Every gpuhook.dev/ key (without the prefix) a pod author may set: all but the allocation."""
    return tuple(k for k in _KNOWN if k != ALLOCATION)


def parse_request(annotations: Mapping[str, str], env: Mapping[str, str], accept_env: bool = True,
                  flag: str | None = None, any_vendor: bool = True, *, vendors: Sequence[Terms],
                  env_tuning: bool | None = None) -> Request:
    """Parse a container's GPU request, in the terms of `vendors`; annotations win over env, env counts only if
    `accept_env`. `flag` is the
    vendor whose Docker --gpus hook the spec carries (request.docker_flag): its env key is then the user's request,
    honoured even without `accept_env`, for gpuhook.dev/vendor's vendor, or (`any_vendor`) the host's only one.
    Tuning is asked by annotation or, where an engine passes none (Docker 20.10), by GPUHOOK_<KEY> env when
    `env_tuning` (default: `accept_env`; Policy.env_tuning says, never on a cluster node): `docker run --gpus 0 -e
    GPUHOOK_CLOCKS=1500`; exclusive and MPS never from env (request.tuning.NOT_FROM_ENV)."""
    ours = {k[len(PREFIX):]: v if isinstance(v, str) else "" for k, v in annotations.items()  # null: "" to runc
            if k.startswith(PREFIX)}
    for key, value in ours.items():
        if key not in _KNOWN:
            raise RequestError(f"unknown annotation {PREFIX}{key}={value!r}: known keys are "
                               + ", ".join(PREFIX + k for k in _KNOWN))
    vendor = _parse_vendor(ours["vendor"], vendors) if "vendor" in ours else None
    caps = _capabilities(ours, env, accept_env or flag is not None, vendors)
    rocm = _parse_host_rocm(ours["host-rocm"]) if "host-rocm" in ours else None
    asked = "host-rocm" in ours
    # the env is the image author's as much as the user's: only where the policy takes tuning from it
    tuning_keys, from_env_keys = from_env(ours, env) if (accept_env if env_tuning is None else env_tuning) \
        else (ours, frozenset())
    tuning = parse_tuning(tuning_keys, from_env_keys)
    raw = tuple((k, v) for k, v in sorted(tuning_keys.items()) if k in TUNING_KEYS)
    allocation = _allocation(ours[ALLOCATION], annotations) if ALLOCATION in ours else None
    if "gpus" in ours:
        sel = _parse_gpus(f"{PREFIX}gpus", ours["gpus"], vendor, vendors)
        return Request(selections=(sel,) if sel else (), capabilities=caps, host_rocm=rocm, host_rocm_asked=asked,
                       tuning=tuning, allocation=allocation, tuning_asked=raw, tuning_env=from_env_keys)
    flagged = _flag_selection(env, flag, vendor, any_vendor, vendors)
    if vendor is not None and flagged is None:
        raise RequestError(f"annotation {PREFIX}vendor={ours['vendor']!r} needs {PREFIX}gpus "
                           "(e.g. all, 0,1, count:2 or a UUID)")
    if flagged is not None:  # the user's --gpus bounds the request: an image's AMD_VISIBLE_DEVICES=all adds none
        return Request(selections=(flagged,), capabilities=caps, host_rocm=rocm, host_rocm_asked=asked, tuning=tuning,
                       allocation=allocation, tuning_asked=raw, tuning_env=from_env_keys)
    return Request(selections=_env_selections(env, accept_env, vendors, skip=flag), capabilities=caps, host_rocm=rocm,
                   host_rocm_asked=asked, tuning=tuning, allocation=allocation, tuning_asked=raw,
                   tuning_env=from_env_keys)


def _flag_selection(env: Mapping[str, str], flag: str | None, vendor: str | None, any_vendor: bool,
                    vendors: Sequence[Terms]) -> Selection | None:
    """What Docker's --gpus asked: the flag vendor's env key as dockerd set it (all, 0,1 for a count, device ids)."""
    flagged = next((v for v in vendors if flag == v.NAME), None) if flag is not None else None
    if flagged is None or flagged.ENV_KEY not in env:
        return None
    sel = _parse_gpus(FLAG_SOURCE, env[flagged.ENV_KEY], vendor or flagged.NAME, vendors, flagged.NONE_MEANS_DRIVER)
    return replace(sel, any_vendor=True) if sel and any_vendor and vendor is None else sel


_CRIO_OWN = "io.kubernetes.cri-o.Annotations"  # CRI-O: the container's own CRI annotations, as JSON


def _allocation(raw: str, annotations: Mapping[str, str]) -> str:
    """The allocation id, where the kubelet put it: a container's annotation. containerd passes only that one
    (container_annotations); CRI-O merges the pod's annotations into the spec too, and names the container's
    own in a JSON of theirs, which must hold the same id."""
    value = _parse_allocation(raw)
    if _CRIO_OWN in annotations or engine(annotations) == CRIO:
        from gpuhook.fastjson import loads

        try:
            own = loads(str(annotations.get(_CRIO_OWN) or ""))
        except ValueError:
            own = None
        if not isinstance(own, dict) or own.get(PREFIX + ALLOCATION) != raw:
            raise RequestError(f"annotation {PREFIX}{ALLOCATION} is the pod's, not the container's: only gpuhook's "
                               "device plugin sets it, through the kubelet; ask for GPUs in the pod's resources")
    return value


def _parse_allocation(raw: str) -> str:
    """An allocation id as the device plugin makes them: 32 lower-case hex digits."""
    value = raw.strip()
    if len(value) != 32 or any(c not in "0123456789abcdef" for c in value):
        raise RequestError(f"annotation {PREFIX}{ALLOCATION}={raw[:64]!r} is not an allocation id: it is set "
                           "by gpuhook's device plugin, through the kubelet, never by hand")
    return value


def _parse_host_rocm(raw: str) -> HostRocm | None:
    """true | false | VERSION, optionally followed by ',override' (the host's ROCm wins over the image's)."""
    value, _, flag = raw.strip().lower().partition(",")
    if flag not in ("", "override") or not value:
        raise RequestError(f"annotation {PREFIX}host-rocm={raw!r}: expected true, false or a version such as 6.2, "
                           "optionally followed by ',override'")
    if value == "false":
        return None
    if value == "true":
        return HostRocm(None, bool(flag))
    if not is_version(value):
        raise RequestError(f"annotation {PREFIX}host-rocm={raw!r}: {value!r} is not a ROCm version such as 6.2.1")
    return HostRocm(value, bool(flag))


def _parse_vendor(value: str, vendors: Sequence[Terms]) -> str:
    v = value.strip().lower()
    names = [t.NAME for t in vendors]
    if v not in names:
        raise RequestError(f"annotation {PREFIX}vendor={value!r}: expected one of " + ", ".join(names))
    return v


def _capabilities(ours: Mapping[str, str], env: Mapping[str, str], accept_env: bool,
                  vendors: Sequence[Terms]) -> frozenset[str]:
    named = (v.CAPABILITIES_ENV for v in vendors if v.CAPABILITIES_ENV)
    from_env = next((k for k in named if accept_env and env.get(k, "").strip()), None)
    if "capabilities" in ours:
        key, value = f"{PREFIX}capabilities", ours["capabilities"]
    elif from_env:
        key, value = from_env, env[from_env]
    else:
        return DEFAULT_CAPABILITIES
    items = {c.strip().lower() for c in value.split(",") if c.strip()}
    if not items:
        raise RequestError(f"{key}={value!r}: expected a comma list of " + ", ".join((*CAPABILITIES, "all")))
    if "all" in items:
        return frozenset(CAPABILITIES)
    bad = sorted(items - set(CAPABILITIES))
    if bad:
        raise RequestError(f"{key}={value!r}: unknown capability {bad[0]!r}; known: "
                           + ", ".join((*CAPABILITIES, "all")))
    return frozenset(items)


def _env_selections(env: Mapping[str, str], accept_env: bool, vendors: Sequence[Terms],
                    skip: str | None = None) -> tuple[Selection, ...]:
    if not accept_env:
        return ()
    out = []
    for vendor in vendors:
        if vendor.ENV_KEY in env and skip != vendor.NAME:
            sel = _parse_gpus(vendor.ENV_KEY, env[vendor.ENV_KEY], vendor.NAME, vendors, vendor.NONE_MEANS_DRIVER)
            if sel:
                out.append(sel)
    return tuple(out)


def _parse_gpus(key: str, raw: str, vendor: str | None, vendors: Sequence[Terms],
                none_means_driver: bool = False) -> Selection | None:
    """None when nothing is asked; `none` means the driver without GPUs where the vendor says so, `void`
    (in env) nothing."""
    check_length(key, raw)
    value = raw.strip()
    low = value.lower()
    if low == "none":
        return Selection(vendor=vendor, devices=(), source=key, raw=raw) if none_means_driver else None
    if low in ("", "void") and key != f"{PREFIX}gpus":
        return None
    if low == "all":
        return Selection(vendor=vendor, devices=None, source=key, raw=raw)
    if low.startswith(COUNT_PREFIX) and key == f"{PREFIX}gpus":
        count = _parse_count(key, raw, low[len(COUNT_PREFIX):].strip())
        return Selection(vendor=vendor, devices=None, source=key, raw=raw, count=count)
    ids: dict[str, None] = {}
    for item in value.split(","):
        ids.update(dict.fromkeys(parse_item(key, raw, item.strip(), vendors)))
    return Selection(vendor=vendor, devices=tuple(ids), source=key, raw=raw)


def _parse_count(key: str, raw: str, text: str) -> int:
    if not text.isdigit() or not text.isascii() or len(text) > 3 or not 1 <= int(text) <= MAX_COUNT:
        raise RequestError(f"{key}={raw[:64]!r}: expected count:N with N from 1 to {MAX_COUNT} (that many free "
                           "GPUs, picked by gpuhook)")
    return int(text)
