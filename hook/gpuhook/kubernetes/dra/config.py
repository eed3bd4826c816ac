"""A claim's opaque configuration for gpuhook's DRA driver: the tuning a container's annotations can ask for,
written in a ResourceClaim (or its DeviceClass) instead. Pure.

    config:
      - requests: [gpu]          # optional: the requests it is for (all when absent)
        opaque:
          driver: gpu.gpuhook.dev
          parameters:
            apiVersion: resource.gpuhook.dev/v1alpha1
            kind: GpuConfig
            clocks: "1500"         # or "1200-1500"
            powerLimit: 250        # watts
            fan: 80                # percent, or "auto"
            perfLevel: high        # AMD
            computeMode: exclusive-process   # NVIDIA
            exclusive: true        # no other container on these GPUs while it runs
            mps: true              # NVIDIA: share the GPU through an MPS daemon (one GPU a request)
            mpsActiveThreadPercentage: 50
            mpsPinnedMemoryLimit: 8G

Each field is the annotation of the same meaning (gpuhook.dev/clocks, power-limit, fan, perf-level, compute-mode,
exclusive, mps, mps-threads, mps-memory: each knob's row in request/knobs.py names its field) and is checked as that
annotation is, against [tuning] policy too, when the claim is prepared: an invalid configuration fails the
preparation with one line, which the kubelet shows in the pod's events. The class's configuration comes first
and the claim's overrides it, field by field, as the API orders them. Unknown fields are refused (a typo must not
silently tune nothing).

A configuration written for NVIDIA's or AMD's own DRA driver (resource.nvidia.com/v1beta1 GpuConfig and
MigDeviceConfig, gpu.resource.amd.com/v1alpha1 GpuConfig) is read too, mapped to the same keys or refused by name
(dra/ported.py): addressed to this driver, or to the vendor's driver by name (gpu.nvidia.com) for requests whose
devices are all that vendor's, as a claim written for that driver addresses it.

Every number (clocks, powerLimit, fan, mpsActiveThreadPercentage, mpsPinnedMemoryLimit) goes through one parser,
`_whole`: a JSON integer, or a string of ASCII digits (str.isdigit would take fullwidth or Arabic-Indic digits) at
most _DIGITS long (int() of thousands of digits fails with Python's own text), within the field's range, with the
unit the annotation of the same meaning takes; anything else (a float, a negative, a bool) is refused in one line
naming the claim, the field and the range. Values go on in the annotations' canonical form ("250", "1200-1500",
"8G").

In kubernetes-sigs/dra-example-driver: api/example.com/resource/gpu/v1alpha1/api.go and validate.go
(GpuConfig, its checks).
"""

from __future__ import annotations

from gpuhook.errors import KubernetesError
from gpuhook.kubernetes.dra.ported import APIS, ported_keys
from gpuhook.request.ids import is_decimal
from gpuhook.request.knobs import KNOBS, MAX_MHZ, MAX_MPS_MIB, MAX_WATTS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence
    from typing import Any

API_VERSION = "resource.gpuhook.dev/v1alpha1"
KIND = "GpuConfig"
FIELDS = {k.claim: k.key for k in KNOBS if k.claim}  # field -> the tuning key of the same meaning (its knob's row)
_DIGITS = 8  # more than any field's range needs (MAX_MPS_MIB in M has 8); int() is never given more
_MAX_TEXT = 64  # a string value longer than this is no value of any field


def tuning_by_request(configs: Sequence[Mapping[str, Any]], driver: str, requests: Sequence[str],
                      claim: str = "",
                      vendors: Mapping[str, Collection[str]] | None = None) -> dict[str, dict[str, str]]:
    """{request: {tuning key: value}} from an allocation's `config` entries (status.allocation.devices.config:
    the class's first, then the claim's): those of `driver`, and those of a vendor's own DRA driver (gpu.nvidia.com)
    in its configuration's shape (dra/ported.py), for the requests whose devices are all that vendor's (`vendors`:
    {request: the vendors of its devices}), so that a claim written for that driver keeps its settings here.
    KubernetesError naming the claim (`claim`, "namespace/name") and the entry at fault."""
    out: dict[str, dict[str, str]] = {r.partition("/")[0]: {} for r in requests}  # keyed by the claim's request
    for n, entry in enumerate(configs):
        opaque = entry.get("opaque") if isinstance(entry, dict) else None
        if not isinstance(opaque, dict):
            continue  # a kind of configuration this API version has that we do not read
        params = opaque.get("parameters")
        api = params.get("apiVersion") if isinstance(params, dict) else None
        vendor = ""
        if opaque.get("driver") != driver:
            theirs = APIS.get(str(api))
            if theirs is None or theirs[0] != opaque.get("driver") or vendors is None:
                continue  # another driver's
            vendor = theirs[1]
        where = f"config[{n}] (from the {'class' if entry.get('source') == 'FromClass' else 'claim'})"
        where = f"claim {claim}, {where}" if claim else where
        keys = _parse(params, where)
        for r in entry.get("requests") or out:
            # a firstAvailable request: a config naming it (gpu) holds for whichever subrequest was allocated, one
            # naming a subrequest (gpu/large) only where that one was
            base = r.partition("/")[0]
            if r != base and r not in requests:
                continue
            if base in out and (not vendor or set((vendors or {}).get(base, ())) == {vendor}):
                out[base].update(keys)
    return out


def _parse(params: object, where: str) -> dict[str, str]:
    if not isinstance(params, dict):
        raise KubernetesError(f"{where}: opaque parameters must be an object (apiVersion {API_VERSION}, kind {KIND})")
    if params.get("apiVersion") in APIS:
        return ported_keys(params, where)
    if params.get("apiVersion") != API_VERSION or params.get("kind") != KIND:
        raise KubernetesError(f"{where}: apiVersion {params.get('apiVersion')!r}, kind {params.get('kind')!r}: "
                              f"gpuhook's driver reads apiVersion {API_VERSION}, kind {KIND}, and NVIDIA's and "
                              f"AMD's drivers' configurations ({', '.join(APIS)})")
    unknown = sorted(set(params) - {"apiVersion", "kind", *FIELDS})
    if unknown:
        raise KubernetesError(f"{where}: unknown field {unknown[0]!r} in {KIND}: known fields are "
                              + ", ".join(FIELDS))
    out = {}
    for field, key in FIELDS.items():
        if field in params:
            value = params[field]
            if key in _NUMBERS:
                out[key] = _NUMBERS[key](value, field, where)
            elif isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, str) and len(value) <= _MAX_TEXT:
                out[key] = value
            else:
                raise KubernetesError(f"{where}: {field}={_shown(value)}: expected a string of at most {_MAX_TEXT} "
                                      "characters")
    return out


def _whole(value: object, field: str, lo: int, hi: int, where: str, what: str, raw: object = None) -> int:
    """The one parser of a number: a JSON integer, or a string of at most _DIGITS ASCII digits, in [lo, hi].
    KubernetesError naming the field, its value (`raw`, where `value` is a part of it) and the range."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and is_decimal(value) and len(value) <= _DIGITS:
        number = int(value)
    if number is None or not lo <= number <= hi:
        raise KubernetesError(f"{where}: {field}={_shown(value if raw is None else raw)}: expected {what}, a whole "
                              f"number {lo}-{hi} in ASCII digits")
    return number


def _unit(value: object, units: tuple[str, ...]) -> object:
    """A string value with spaces and the annotation's unit taken off (any case); other values as they are."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    for unit in units:
        text = text.removesuffix(unit).strip()
    return text


def _watts(value: object, field: str, where: str) -> str:
    return str(_whole(_unit(value, ("w",)), field, 1, MAX_WATTS, where, "watts", value))


def _fan(value: object, field: str, where: str) -> str:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return str(_whole(_unit(value, ("%",)), field, 0, 100, where, "auto or a fan speed in percent", value))


def _threads(value: object, field: str, where: str) -> str:
    return str(_whole(_unit(value, ("%",)), field, 1, 100, where, "a share of the GPU's threads in percent", value))


def _clocks(value: object, field: str, where: str) -> str:
    what = "MHz (1500) or a range (1200-1500)"
    if not isinstance(value, str):
        return str(_whole(value, field, 1, MAX_MHZ, where, what))
    low, sep, high = str(_unit(value, ("mhz",))).partition("-")
    lo = _whole(low.strip(), field, 1, MAX_MHZ, where, what, value)
    hi = _whole(high.strip(), field, lo, MAX_MHZ, where, "a range's upper end in MHz", value) if sep else lo
    return f"{lo}-{hi}" if sep else str(lo)


def _memory(value: object, field: str, where: str) -> str:
    what = "the GPU memory an MPS client may pin (8G, 512M)"
    text = value.strip().upper().removesuffix("B") if isinstance(value, str) else ""
    scale = {"M": 1, "G": 1024, "T": 1024 * 1024}.get(text[-1:], 0)
    if not scale:
        raise KubernetesError(f"{where}: {field}={_shown(value)}: expected {what}, a whole number with M, G or T, "
                              f"1M-{MAX_MPS_MIB >> 20}T")
    return f"{_whole(text[:-1].strip(), field, 1, MAX_MPS_MIB // scale, where, what + ' in ' + text[-1], value)}" \
        f"{text[-1]}"


def _shown(value: object) -> str:
    """A value in an error: quoted, escaped, cut short; a huge integer by its size, never converted whole."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** _DIGITS:
        return f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, str):
        return repr(value if len(value) <= 32 else value[:32] + "…")
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


# knob -> the parser of its number in a GpuConfig (any other field is a string or a bool, checked as the annotation)
_NUMBERS: dict[str, Callable[[object, str, str], str]] = {
    "clocks": _clocks, "power-limit": _watts, "fan": _fan, "mps-threads": _threads, "mps-memory": _memory}
