"""What a container asks for, parsed from its annotations and env. Pure: no I/O."""

from __future__ import annotations

from gpuhook.errors import RequestError
from gpuhook.record import record
from gpuhook.tuningreq import KEYS as TUNING_KEYS
from gpuhook.tuningreq import Tuning, parse_tuning

TYPE_CHECKING = False  # typing and collections cost milliseconds to import: this runs before a container starts
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

PREFIX = "gpuhook.dev/"
VENDORS = ("nvidia", "amd")
CAPABILITIES = ("compute", "utility", "video", "graphics", "display", "compat32", "ngx")
DEFAULT_CAPABILITIES = frozenset({"compute", "utility"})
ENV_KEYS = ("NVIDIA_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")

_KNOWN = ("gpus", "vendor", "capabilities", "require", "host-rocm", *TUNING_KEYS)

_HEX = frozenset("0123456789abcdefABCDEF")  # identifiers are checked by hand: `re` costs milliseconds to import
_NV_UUID_GROUPS = (8, 4, 4, 4, 12)  # GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx


@record
class Selection:
    """One ask for GPUs of one vendor (or of the vendor the host makes obvious).

    `devices` is None for all GPUs, () for the driver without any GPU (NVIDIA `none`),
    else normalised identifiers: decimal index, `GPU-…` UUID, `0x…` KFD id or a full PCI address.
    """

    vendor: str | None
    devices: tuple[str, ...] | None
    source: str  # the annotation or env key it came from
    raw: str


@record
class HostRocm:
    """gpuhook.dev/host-rocm: mount the host's ROCm user space (a version, or the one the driver supports)."""

    version: str | None = None
    override: bool = False  # the host's ROCm wins over a different one in the image


@record
class Request:
    """Everything a container asks gpuhook for."""

    selections: tuple[Selection, ...] = ()
    capabilities: frozenset[str] = DEFAULT_CAPABILITIES
    host_rocm: HostRocm | None = None
    host_rocm_asked: bool = False  # the annotation was given (true or false), so the policy default does not apply
    tuning: Tuning = Tuning()

    @property
    def wants_gpus(self) -> bool:
        """Whether anything is to be injected."""
        return bool(self.selections)


def env_map(env: Iterable[str]) -> dict[str, str]:
    """An OCI `process.env` list as a dict (the last of repeated keys wins)."""
    out: dict[str, str] = {}
    for item in env:
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def parse_request(annotations: Mapping[str, str], env: Mapping[str, str], accept_env: bool = True) -> Request:
    """Parse a container's GPU request; annotations win over env, env counts only if `accept_env`."""
    ours = {k[len(PREFIX):]: v for k, v in annotations.items() if k.startswith(PREFIX)}
    for key, value in ours.items():
        if key not in _KNOWN:
            raise RequestError(f"unknown annotation {PREFIX}{key}={value!r}: known keys are "
                               + ", ".join(PREFIX + k for k in _KNOWN))
    vendor = _parse_vendor(ours["vendor"]) if "vendor" in ours else None
    caps = _capabilities(ours, env, accept_env)
    rocm = _parse_host_rocm(ours["host-rocm"]) if "host-rocm" in ours else None
    asked = "host-rocm" in ours
    tuning = parse_tuning(ours)
    if "gpus" in ours:
        sel = _parse_gpus(f"{PREFIX}gpus", ours["gpus"], vendor)
        return Request((sel,) if sel else (), caps, rocm, asked, tuning)
    if vendor is not None:
        raise RequestError(f"annotation {PREFIX}vendor={ours['vendor']!r} needs {PREFIX}gpus "
                           "(e.g. all, 0,1 or a UUID)")
    return Request(_env_selections(env, accept_env), caps, rocm, asked, tuning)


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
    if not all(p.isdigit() for p in value.split(".")) or value.count(".") > 2:
        raise RequestError(f"annotation {PREFIX}host-rocm={raw!r}: {value!r} is not a ROCm version such as 6.2.1")
    return HostRocm(value, bool(flag))


def _parse_vendor(value: str) -> str:
    v = value.strip().lower()
    if v not in VENDORS:
        raise RequestError(f"annotation {PREFIX}vendor={value!r}: expected one of " + ", ".join(VENDORS))
    return v


def _capabilities(ours: Mapping[str, str], env: Mapping[str, str], accept_env: bool) -> frozenset[str]:
    if "capabilities" in ours:
        key, value = f"{PREFIX}capabilities", ours["capabilities"]
    elif accept_env and env.get("NVIDIA_DRIVER_CAPABILITIES", "").strip():
        key, value = "NVIDIA_DRIVER_CAPABILITIES", env["NVIDIA_DRIVER_CAPABILITIES"]
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


def _env_selections(env: Mapping[str, str], accept_env: bool) -> tuple[Selection, ...]:
    if not accept_env:
        return ()
    out = []
    if "NVIDIA_VISIBLE_DEVICES" in env:
        sel = _parse_gpus("NVIDIA_VISIBLE_DEVICES", env["NVIDIA_VISIBLE_DEVICES"], "nvidia")
        if sel:
            out.append(sel)
    if "AMD_VISIBLE_DEVICES" in env:
        sel = _parse_gpus("AMD_VISIBLE_DEVICES", env["AMD_VISIBLE_DEVICES"], "amd")
        if sel:
            out.append(sel)
    return tuple(out)


def _parse_gpus(key: str, raw: str, vendor: str | None) -> Selection | None:
    """None when nothing is asked; NVIDIA's env `none` means the driver without GPUs, `void` nothing."""
    value = raw.strip()
    low = value.lower()
    if low == "none":
        return Selection(vendor, (), key, raw) if key == "NVIDIA_VISIBLE_DEVICES" else None
    if low in ("", "void") and key != f"{PREFIX}gpus":
        return None
    if low == "all":
        return Selection(vendor, None, key, raw)
    ids: list[str] = []
    for item in value.split(","):
        for ident in _parse_item(key, raw, item.strip()):
            if ident not in ids:
                ids.append(ident)
    return Selection(vendor, tuple(ids), key, raw)


def _parse_item(key: str, raw: str, item: str) -> list[str]:
    if _is_decimal(item):
        return [str(int(item))]
    first, dash, last = item.partition("-")
    if dash and _is_decimal(first) and _is_decimal(last) and int(first) <= int(last):
        return [str(i) for i in range(int(first), int(last) + 1)]
    if item.startswith("GPU-") and [len(g) for g in item[4:].split("-")] == list(_NV_UUID_GROUPS) \
            and _is_hex(item[4:].replace("-", ""), 32, 32):
        return ["GPU-" + item[4:].lower()]
    if item[:2] in ("0x", "0X") and _is_hex(item[2:], 1, 16):
        return [hex(int(item, 16))]
    if _pci_parts(item):
        return [normalize_pci(item)]
    raise RequestError(f"{key}={raw!r}: cannot read {item!r} as a GPU; expected all, none, an index (0), "
                       "a range (0-3), a UUID (GPU-… or 0x…) or a PCI address (0000:3b:00.0)")


def normalize_pci(address: str) -> str:
    """A PCI address in the kernel's long form, lower case: 0000:3b:00.0."""
    parts = _pci_parts(address.strip())
    if not parts:
        raise RequestError(f"not a PCI address: {address!r}")
    domain, bus, device, function = parts
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def _pci_parts(text: str) -> tuple[str, str, str, str] | None:
    """[domain:]bus:device.function (domain 4-8 hex digits, bus and device 2, function 0-7), split; else None."""
    rest, dot, function = text.rpartition(".")
    fields = rest.split(":")
    if not dot or len(function) != 1 or function not in "01234567" or len(fields) not in (2, 3):
        return None
    domain = fields[0] if len(fields) == 3 else ""
    bus, device = fields[-2:]
    if (domain and not _is_hex(domain, 4, 8)) or not _is_hex(bus, 2, 2) or not _is_hex(device, 2, 2):
        return None
    return domain, bus, device, function


def _is_decimal(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _is_hex(text: str, shortest: int, longest: int) -> bool:
    return shortest <= len(text) <= longest and all(c in _HEX for c in text)
