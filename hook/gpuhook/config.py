"""The validated gpuhook configuration."""

from __future__ import annotations

import os

from gpuhook.configfile import config_path, read_config, remember_valid
from gpuhook.errors import ConfigError
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.schema.json")


@frozen
class Policy:
    """What the admin allows containers to ask for."""

    accept_env_requests: bool = True
    rocm_compatibility: str = "warn"  # or "strict": refuse images whose ROCm the host driver does not support
    host_rocm: bool = False  # AMD containers get the host's ROCm unless they say gpuhook.dev/host-rocm=false
    mask_kfd_proc: bool = True  # hide /sys/class/kfd/kfd/proc (other tenants' GPU processes) from AMD containers
    readonly_sys: bool = True  # GPU containers' /sys stays read-only
    nvidia_procfs: bool = True  # a read-only /proc/driver/nvidia copy: ModifyDeviceFiles 0, own GPUs only
    allow_tuning: bool = True  # containers may ask for clocks, power limits, perf levels, compute modes, leases
    requests: str = "any"  # or "allocated": GPUs only through the device plugin's allocations (cluster nodes)
    gpus_any_vendor: bool = True  # Docker's --gpus (Compose reservations) on a host with one vendor's GPUs gets them

    def env_tuning(self) -> bool:
        """Whether GPUHOOK_* env asks tuning: under accept_env_requests, and never where the kubelet grants GPUs
        (requests = "allocated": a pod author asks by annotation or claim; the env is the image author's too)."""
        return self.accept_env_requests and self.requests != "allocated"


@frozen
class TuningPolicy:
    """What the admin allows ([policy] allow_tuning and the [tuning] table): the knobs' bounds (request/knobs.py's
    rows name the field each is held to), the MPS daemons' directory and tuning on shared slices."""

    allow: bool = True
    clocks_mhz: tuple[int, int] | None = None
    power_watts: tuple[int, int] | None = None
    fan_percent: tuple[int, int] | None = None  # fixed fan speeds containers may ask; None: any the GPU takes
    perf_levels: tuple[str, ...] | None = None
    compute_modes: tuple[str, ...] | None = None
    exclusive: bool = True
    fan: bool = True  # containers may set fans at all (gpuhook.dev/fan=auto is always allowed)
    mps: bool = True  # containers may share NVIDIA GPUs through MPS control daemons gpuhook starts
    mps_dir: str = "/run/gpuhook/mps"  # each GPU's MPS directories, <mps_dir>/<uuid>/{pipe,log,shm} (shm: a tmpfs)
    shared_slices: bool = False  # tuning on a MIG device or AMD partition whose siblings other containers may hold


@frozen
class Kubernetes:
    """The device plugin's settings (the [kubernetes] table)."""

    kubelet_dir: str = "/var/lib/kubelet/device-plugins"
    resources: tuple[tuple[str, str], ...] = ()  # the admin's names by vendor; each vendor's own (its Kubernetes
    # part's RESOURCE: nvidia.com/gpu, amd.com/gpu, hygon.com/dcu) for the rest: vendors/registry.resources
    replicas: int = 1  # time-slicing: shares advertised per GPU
    allocate_with: tuple[str, ...] = ("annotation",)  # and/or "env", "cdi": what Allocate answers with
    allocation_ttl: int = 3600  # seconds an allocation waits for its container (image pulls included)
    health_interval: float = 1.0  # seconds between health checks
    mig_strategy: str = "none"  # MIG devices advertised as none, single (each an nvidia.com/gpu), mixed (per profile)
    sharing: str = "time-slicing"  # or "mps": shares (replicas) of a GPU whose vendor has MPS are its MPS clients
    partitions: str = "static"  # or "dynamic": the DRA driver makes MIG devices and AMD partitions at prepare


@frozen
class Exporter:
    """`gpuhook exporter`'s settings (the [exporter] table)."""

    listen: str = "127.0.0.1:9835"  # host:port of /metrics ([::1]:9835 for IPv6, 0.0.0.0:9835 for every address)
    textfile_dir: str | None = None  # write gpuhook.prom here for node_exporter's textfile collector instead
    interval: float = 15.0  # seconds between textfile writes
    telemetry: bool = True  # read utilisation, memory, power, ... through NVML and amdsmi (false: gpuhook's own)


@frozen
class Config:
    """Settings from config.toml, with defaults."""

    path: str
    host_root: str = "/"
    runtime: str = "runc"
    state_dir: str = "/run/gpuhook"
    log_file: str | None = None
    log_level: str = "info"
    log_max_bytes: int = 0  # rotate log_file to log_file.1 past this size (0: never)
    ldconfig: str = "/sbin/ldconfig"
    hook_timeout: int = 30  # seconds: every hook gpuhook adds (and each helper a hook runs) has this deadline
    policy: Policy = Policy()  # frozen: one shared default is safe
    tuning: TuningPolicy = TuningPolicy()
    kubernetes: Kubernetes = Kubernetes()
    exporter: Exporter = Exporter()


def load() -> Config:
    """Read and validate the config named by GPUHOOK_CONFIG or the default path. Reads a file."""
    path, explicit = config_path()
    table, validated = read_config(path, explicit)
    return from_table(table, path, validated)


def from_table(table: dict[str, Any], path: str, validated: bool = False) -> Config:
    """Validate a parsed TOML table against the shipped schema (unless this file already passed)."""
    if not validated:
        _validate(table, path)
        remember_valid(path, table)
    policy = Policy(**table.get("policy", {}))
    tuning = _tuning(policy.allow_tuning, table.get("tuning", {}))
    top = {k: v for k, v in table.items() if k not in ("policy", "tuning", "kubernetes", "exporter")}
    return Config(path=path, policy=policy, tuning=tuning, kubernetes=_kubernetes(table.get("kubernetes")),
                  exporter=Exporter(**table.get("exporter", {})), **top)


def _kubernetes(t: dict[str, Any] | None) -> Kubernetes:
    if not t:
        return Kubernetes()
    resources = dict(t.get("resources", {}))
    rest: dict[str, Any] = {k: (tuple(v) if k == "allocate_with" else v) for k, v in t.items() if k != "resources"}
    return Kubernetes(resources=tuple(sorted(resources.items())), **rest)


def _tuning(allow: bool, t: dict[str, Any]) -> TuningPolicy:
    """[tuning] as the schema validated it, each key its field's: a list (a range's pair, the values allowed) as a
    tuple."""
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in t.items()}
    return TuningPolicy(allow=allow, **fields)


def schema() -> dict[str, Any]:
    """The JSON schema of config.toml shipped in the package."""
    import json

    with open(SCHEMA) as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def _validate(table: dict[str, Any], path: str) -> None:
    import jsonschema

    sch = schema()
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(sch).iter_errors(table))
    if error is None:
        return
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - known)
        key = ".".join(p for p in (where, unknown[0]) if p)
        raise ConfigError(f"config {path}: unknown key {key!r}; known here: {', '.join(sorted(known))}")
    raise ConfigError(f"config {path}: key {where or '(top)'!r}: {error.message}")
