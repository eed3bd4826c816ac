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
exclusive, mps, mps-threads, mps-memory) and is checked as that annotation is, against [tuning] policy too, when
the claim is prepared: an invalid configuration fails the preparation with one line, which the kubelet shows in the
pod's events. The class's configuration comes first and the claim's overrides it, field by field, as the API orders
them. Unknown fields are refused (a typo must not silently tune nothing).
"""

from __future__ import annotations

from gpuhook.errors import KubernetesError
from gpuhook.request.tuning import GPU_CONFIG_FIELDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

API_VERSION = "resource.gpuhook.dev/v1alpha1"
KIND = "GpuConfig"
FIELDS = GPU_CONFIG_FIELDS  # field -> the tuning key of the same meaning


def tuning_by_request(configs: Sequence[Mapping[str, Any]], driver: str,
                      requests: Sequence[str]) -> dict[str, dict[str, str]]:
    """{request: {tuning key: value}} from an allocation's `config` entries (status.allocation.devices.config:
    the class's first, then the claim's), those of `driver` only. KubernetesError naming the entry at fault."""
    out: dict[str, dict[str, str]] = {r: {} for r in requests}
    for n, entry in enumerate(configs):
        opaque = entry.get("opaque") if isinstance(entry, dict) else None
        if not isinstance(opaque, dict) or opaque.get("driver") != driver:
            continue  # another driver's, or a kind of configuration this API version has that we do not read
        where = f"config[{n}] (from the {'class' if entry.get('source') == 'FromClass' else 'claim'})"
        keys = _parse(opaque.get("parameters"), where)
        for r in entry.get("requests") or requests:
            base = r.partition("/")[0]  # a firstAvailable subrequest (gpu/large) configures its request
            if base in out:
                out[base].update(keys)
    return out


def _parse(params: object, where: str) -> dict[str, str]:
    if not isinstance(params, dict):
        raise KubernetesError(f"{where}: opaque parameters must be an object (apiVersion {API_VERSION}, kind {KIND})")
    if params.get("apiVersion") != API_VERSION or params.get("kind") != KIND:
        raise KubernetesError(f"{where}: apiVersion {params.get('apiVersion')!r}, kind {params.get('kind')!r}: "
                              f"gpuhook's driver reads apiVersion {API_VERSION}, kind {KIND}")
    unknown = sorted(set(params) - {"apiVersion", "kind", *FIELDS})
    if unknown:
        raise KubernetesError(f"{where}: unknown field {unknown[0]!r} in {KIND}: known fields are "
                              + ", ".join(FIELDS))
    out = {}
    for field, key in FIELDS.items():
        if field in params:
            value = params[field]
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif not isinstance(value, (str, int)):
                raise KubernetesError(f"{where}: {field} must be a string or a number, not {value!r}")
            out[key] = str(value)
    return out
