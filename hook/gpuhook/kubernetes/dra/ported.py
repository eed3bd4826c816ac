"""A claim's opaque configuration written for NVIDIA's or AMD's own DRA driver, read as gpuhook's: each field
mapped to the tuning key of the same meaning (request/knobs.py), or refused by name in one line where gpuhook has
no counterpart, never dropped. Pure.

NVIDIA's (resource.nvidia.com/v1beta1, kubernetes-sigs/dra-driver-nvidia-gpu's api/nvidia.com/resource/v1beta1):
- `GpuConfig` {sharing: {strategy, timeSlicingConfig: {interval}, mpsConfig: {...}}}:
  - strategy `TimeSlicing`: what NVIDIA's driver does, the GPU's compute mode set to Default while the claim's
    containers run (`compute-mode=default`); an interval other than `Default` (Short, Medium, Long: its
    `nvidia-smi compute-policy --set-timeslice`) is refused: gpuhook leaves the driver's time slice as it is;
  - strategy `MPS`: an MPS daemon for the claim's GPUs (`mps=true`); mpsConfig's defaultActiveThreadPercentage is
    `mps-threads`, defaultPinnedDeviceMemoryLimit (a Kubernetes quantity: 10Gi, 8G, 512Mi) `mps-memory` in whole
    MiB, as NVIDIA's driver rounds it; defaultPerDevicePinnedMemoryLimit (a limit per GPU) and multiUser: true
    are refused (gpuhook's clients all get one limit, and its daemon serves the claim's own user);
- `MigDeviceConfig` {sharing: {strategy, mpsConfig}}: TimeSlicing sets nothing (a MIG device has no time slice of
  its own; NVIDIA's driver sets nothing either); MPS as above;
- `VfioDeviceConfig`, `ComputeDomainChannelConfig`, `ComputeDomainDaemonConfig`: refused (VFIO passthrough to a
  VM, and IMEX compute domains, are not what gpuhook gives).
AMD's (gpu.resource.amd.com/v1alpha1, ROCm/k8s-gpu-dra-driver's api/amd.com/resource/gpu/v1alpha1): `GpuConfig`
has no fields (taken, nothing to set); `VfioDeviceConfig` is refused.
Unknown fields are refused, as those drivers' strict decoders refuse them.
"""

from __future__ import annotations

from fractions import Fraction

from gpuhook.errors import KubernetesError
from gpuhook.request.knobs import MAX_MPS_MIB

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

NVIDIA_API = "resource.nvidia.com/v1beta1"
AMD_API = "gpu.resource.amd.com/v1alpha1"
# apiVersion -> (the vendor's DRA driver's name, the vendor whose GPUs it configures)
APIS = {NVIDIA_API: ("gpu.nvidia.com", "nvidia"), AMD_API: ("gpu.amd.com", "amd")}
_REFUSED = {
    (NVIDIA_API, "VfioDeviceConfig"): "VFIO passthrough of a GPU to a virtual machine",
    (NVIDIA_API, "ComputeDomainChannelConfig"): "IMEX compute domains (NVIDIA's compute-domain.nvidia.com driver)",
    (NVIDIA_API, "ComputeDomainDaemonConfig"): "IMEX compute domains (NVIDIA's compute-domain.nvidia.com driver)",
    (AMD_API, "VfioDeviceConfig"): "VFIO passthrough of a GPU to a virtual machine"}
_SUFFIXES = {"": 1, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18,
             "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}


def ported_keys(params: Mapping[str, Any], where: str) -> dict[str, str]:
    """The tuning keys of a vendor's configuration object (apiVersion one of APIS). KubernetesError naming
    `where`, the field and the way out."""
    api, kind = str(params.get("apiVersion"))[:64], str(params.get("kind"))[:64]
    what = f"{where}: {kind} ({api})"
    if (api, kind) in _REFUSED:
        raise KubernetesError(f"{what}: gpuhook has no counterpart ({_REFUSED[api, kind]}): remove it from the claim")
    parse = _KINDS.get((api, kind))
    if parse is None:
        known = ", ".join(k for a, k in _KINDS if a == api)
        raise KubernetesError(f"{what}: gpuhook reads kind {known} of {api}, and its own "
                              "resource.gpuhook.dev/v1alpha1 GpuConfig")
    return parse(params, what)


def _amd_gpu(params: Mapping[str, Any], what: str) -> dict[str, str]:
    _fields(params, ("apiVersion", "kind"), what)
    return {}


def _nvidia_gpu(params: Mapping[str, Any], what: str) -> dict[str, str]:
    return _sharing(params, what, ("strategy", "timeSlicingConfig", "mpsConfig"))


def _nvidia_mig(params: Mapping[str, Any], what: str) -> dict[str, str]:
    return _sharing(params, what, ("strategy", "mpsConfig"))


def _sharing(params: Mapping[str, Any], what: str, known: tuple[str, ...]) -> dict[str, str]:
    """NVIDIA's `sharing` of a GpuConfig or MigDeviceConfig, as gpuhook's keys."""
    _fields(params, ("apiVersion", "kind", "sharing"), what)
    sharing = params.get("sharing")
    if sharing is None:
        return {}
    _fields(_object(sharing, "sharing", what), known, what, "sharing.")
    strategy = sharing.get("strategy")
    if strategy == "TimeSlicing":
        if sharing.get("mpsConfig") is not None:
            raise KubernetesError(f"{what}: sharing.mpsConfig with strategy TimeSlicing: use strategy MPS, or "
                                  "remove mpsConfig")
        if "timeSlicingConfig" not in known:
            return {}  # a MIG device: nothing to set, as NVIDIA's driver sets nothing
        config = _object(sharing.get("timeSlicingConfig") or {}, "sharing.timeSlicingConfig", what)
        _fields(config, ("interval",), what, "sharing.timeSlicingConfig.")
        interval = config.get("interval", "Default")
        if interval != "Default":
            raise KubernetesError(f"{what}: sharing.timeSlicingConfig.interval={_shown(interval)}: gpuhook leaves "
                                  "the driver's time slice as it is: set Default or remove the interval")
        return {"compute-mode": "default"}
    if strategy == "MPS":
        if sharing.get("timeSlicingConfig") is not None:
            raise KubernetesError(f"{what}: sharing.timeSlicingConfig with strategy MPS: use strategy TimeSlicing, "
                                  "or remove timeSlicingConfig")
        return {"mps": "true", **_mps(sharing.get("mpsConfig") or {}, what)}
    raise KubernetesError(f"{what}: sharing.strategy={_shown(strategy)}: expected TimeSlicing or MPS")


def _mps(config: object, what: str) -> dict[str, str]:
    """NVIDIA's mpsConfig as gpuhook's MPS keys."""
    config = _object(config, "sharing.mpsConfig", what)
    _fields(config, ("defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
                     "defaultPerDevicePinnedMemoryLimit", "multiUser"), what, "sharing.mpsConfig.")
    if config.get("defaultPerDevicePinnedMemoryLimit"):
        raise KubernetesError(f"{what}: sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: gpuhook gives every "
                              "GPU of a claim one limit: use defaultPinnedDeviceMemoryLimit")
    if config.get("multiUser") not in (None, False):
        raise KubernetesError(f"{what}: sharing.mpsConfig.multiUser={_shown(config.get('multiUser'))}: gpuhook's "
                              "MPS daemon serves the claim's own user: remove multiUser")
    out = {}
    threads = config.get("defaultActiveThreadPercentage")
    if threads is not None:
        if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 100:
            raise KubernetesError(f"{what}: sharing.mpsConfig.defaultActiveThreadPercentage={_shown(threads)}: "
                                  "expected a whole number 1-100")
        out["mps-threads"] = str(threads)
    limit = config.get("defaultPinnedDeviceMemoryLimit")
    if limit is not None:
        out["mps-memory"] = f"{_mib(limit, what)}M"
    return out


def _mib(value: object, what: str) -> int:
    """A Kubernetes quantity of bytes in whole MiB (rounded down, as NVIDIA's driver does), 1 MiB to
    MAX_MPS_MIB."""
    name = "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit"
    bad = KubernetesError(f"{what}: {name}={_shown(value)}: expected a quantity of memory (8Gi, 10G, 512Mi) "
                          f"of 1Mi to {MAX_MPS_MIB >> 20}Ti")
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not 0 < len(text) <= 24 or not text.isascii():
        raise bad
    number = text.rstrip("kMGTPEi")
    suffix = text[len(number):]
    whole, _, part = number.partition(".")
    if suffix not in _SUFFIXES or not whole.isdigit() or (part and not part.isdigit()) or len(number) > 20:
        raise bad
    mib = int(Fraction(number) * _SUFFIXES[suffix] / (1 << 20))
    if not 1 <= mib <= MAX_MPS_MIB:
        raise bad
    return mib


def _object(value: object, name: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise KubernetesError(f"{what}: {name} must be an object")
    return value


def _fields(params: Mapping[str, Any], known: tuple[str, ...], what: str, prefix: str = "") -> None:
    """KubernetesError for the first field not in `known`, as the vendor's strict decoder refuses it."""
    unknown = sorted(str(k) for k in set(params) - set(known))
    if unknown:
        fields = ", ".join(f"{prefix}{k}" for k in known if k not in ("apiVersion", "kind")) or "none"
        raise KubernetesError(f"{what}: unknown field {prefix}{unknown[0][:40]!r}: its fields are {fields}")


def _shown(value: object) -> str:
    """A value in an error: quoted, cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


_KINDS: dict[tuple[str, str], Callable[[Mapping[str, Any], str], dict[str, str]]] = {
    (NVIDIA_API, "GpuConfig"): _nvidia_gpu, (NVIDIA_API, "MigDeviceConfig"): _nvidia_mig,
    (AMD_API, "GpuConfig"): _amd_gpu}
