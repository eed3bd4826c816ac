"""Who grants GPUs: `[policy] requests`. Pure: the request and its verified allocation in, the request the
rest of the GPU path honours out.

- "any" (single hosts): the container's own annotations and env ask; an allocation, where presented, is
  honoured as the device plugin wrote it.
- "allocated" (cluster nodes): GPUs come only from an allocation the device plugin made for the kubelet; a
  pod author's gpuhook.dev/gpus, NVIDIA_VISIBLE_DEVICES=all and the like are refused with how to ask. Tuning
  is still the pod author's to ask for (by annotation or claim, never by the image's env), on the GPUs they were
  allocated, within [tuning] policy and within what their grant allows on a GPU other pods share
  (plan/shared_gpu.py).
"""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.frozen import frozen, replace
from gpuhook.plan.shared_gpu import MPS, TIME_SLICED, WHOLE, Grant, check
from gpuhook.request.container import ALLOCATION, PREFIX, Request, Selection
from gpuhook.request.tuning import GPU_CONFIG_FIELDS, env_key, parse_tuning
from gpuhook.vendors.registry import kubernetes as kube_part
from gpuhook.vendors.registry import resource, resources

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuhook.config import Config


@frozen
class Allocation:
    """One container's allocation by the kubelet."""

    id: str
    resource: str  # e.g. nvidia.com/gpu
    vendor: str
    gpus: tuple[str, ...]  # the GPUs (UUID, else PCI address), each once
    devices: tuple[str, ...]  # the kubelet's device ids (a GPU, or one share of it)
    shared: bool  # time-sliced: other containers may be given the same GPUs
    created: float
    expires: float  # the first claim must come before this
    claimed_by: str = ""  # "<pod>/<container name>" of the container that presented it first
    container: str = ""  # that container's id (the latest one presenting it)
    mps_threads: int = 0  # shared through MPS ([kubernetes] sharing = "mps"): each client's share of the threads


@frozen
class ClaimedDevice:
    """One device of a DRA claim, as the driver prepared it on this node."""

    request: str  # the claim's request it was allocated for
    device: str  # its name in the driver's ResourceSlice
    vendor: str
    gpu: str  # the GPU (its key: UUID, a slice's name, else PCI address)
    admin: bool = False  # adminAccess: given beside the pods that hold it, never tuned
    tuning: tuple[tuple[str, str], ...] = ()  # its request's configuration (the class's, then the claim's): keys
    # as gpuhook.dev/ annotations name them, checked against [tuning] when the claim was prepared
    share: str = ""  # the scheduler's share id where the device is allocated to several claims (time-slicing)


@frozen
class PreparedClaim:
    """A ResourceClaim the DRA driver prepared on this node (kubernetes/dra/state.py), the runtime's grant for
    the containers whose CDI devices name it (request/dra_claim.py)."""

    uid: str
    namespace: str
    name: str
    devices: tuple[ClaimedDevice, ...]
    pods: tuple[str, ...] = ()  # the pods it was reserved for when prepared (the kubelet adds others later)
    prepared: float = 0.0


def authorize(request: Request, alloc: Allocation | None, config: Config,
              claims: tuple[tuple[PreparedClaim, tuple[str, ...]], ...] = (), dra_driver: str = "") -> Request:
    """`request` with its GPUs replaced by the allocation's, or by the DRA claims' (each with the requests the
    container was given); PolicyError where the policy refuses it. `alloc` is the verified record of
    request.allocation (None when it presents none); `claims` are verified (granting.py); `dra_driver`: the name
    of gpuhook's DRA driver where it serves the node (apply/dra_node.py), whose ways to ask refusals name."""
    allocated = config.policy.requests == "allocated"
    if claims:
        return _from_claims(request, alloc, claims, config)
    if alloc is None:
        if allocated:
            _refuse_own_request(request, config, dra_driver)
        return request
    own = next((s for s in request.selections if s.source == f"{PREFIX}gpus"), None)
    if own is not None:
        raise PolicyError(f"{own.source}={own.shown!r} next to the kubelet's allocation ({alloc.resource}: "
                          f"{', '.join(alloc.gpus)}): a pod gets the GPUs its resources.limits asked for; drop "
                          f"{own.source}")
    check(request.tuning, _allocation_grant(alloc), _named(request, {}))
    # The allocation replaces every other ask, the image's own env included (a CUDA image's
    # NVIDIA_VISIBLE_DEVICES=all): the container gets exactly what the kubelet allocated. A GPU the node shares
    # through MPS is reached through its daemon, with the node's share of threads unless the pod asks less.
    tuning = request.tuning
    if alloc.mps_threads:
        tuning = replace(tuning, mps=True, mps_threads=min(tuning.mps_threads or 100, alloc.mps_threads))
    return replace(request, selections=(Selection(vendor=alloc.vendor, devices=alloc.gpus,
                                                  source=f"{PREFIX}{ALLOCATION}", raw=alloc.id),),
                   tuning=tuning)


def _from_claims(request: Request, alloc: Allocation | None,
                 claims: tuple[tuple[PreparedClaim, tuple[str, ...]], ...], config: Config) -> Request:
    """The GPUs of the claims' requests the container was given, one selection per vendor, and the claims'
    tuning added to the pod author's (one value per key: tuning is the container's, on all its GPUs), within what
    each device's grant allows (plan/shared_gpu.py)."""
    if alloc is not None:
        raise PolicyError(f"a container with a device plugin allocation ({alloc.resource}) and DRA claims "
                          f"({', '.join(c.name for c, _ in claims)}): give the GPUs one way, not both")
    own = next((s for s in request.selections if s.source == f"{PREFIX}gpus"), None)
    names = ", ".join(f"{c.namespace}/{c.name}" for c, _ in claims)
    if own is not None:
        raise PolicyError(f"{own.source}={own.shown!r} next to DRA claims ({names}): a pod gets the GPUs its "
                          f"claims were allocated; drop {own.source}")
    by_vendor: dict[str, list[str]] = {}
    tuning = dict(request.tuning_asked)
    from_claims: dict[str, str] = {}  # key -> how messages name the claim's field that asked it
    fields = {key: field for field, key in GPU_CONFIG_FIELDS.items()}
    admin = False
    for claim, requests in claims:
        for d in (d for d in claim.devices if d.request in requests):
            if d.gpu not in by_vendor.setdefault(d.vendor, []):
                by_vendor[d.vendor].append(d.gpu)
            admin = admin or d.admin
            for key, value in d.tuning:
                from_claims.setdefault(key, f"{fields.get(key, key)} in the GpuConfig of claim {claim.namespace}/"
                                            f"{claim.name}")
                if tuning.setdefault(key, value) != value:
                    raise PolicyError(f"{PREFIX}{key}: claim {claim.namespace}/{claim.name} asks {value!r} and "
                                      f"the container's other claims or annotations {tuning[key]!r}: tuning is "
                                      "the container's, on all its GPUs; ask one value")
    if admin and tuning:
        raise PolicyError(f"tuning ({', '.join(sorted(tuning))}) on a device given with adminAccess ({names}): "
                          "an admin's view of GPUs other pods hold never changes them")
    merged = parse_tuning(tuning) if tuning else request.tuning
    for claim, requests in claims:  # every device's grant allows the container's tuning, whichever asked it
        for d in (d for d in claim.devices if d.request in requests):
            check(merged, claimed_grant(f"{claim.namespace}/{claim.name}", d, config), _named(request, from_claims))
    selections = tuple(Selection(vendor=vendor, devices=tuple(gpus), source="DRA claim", raw=names) for vendor,
                       gpus in by_vendor.items())
    return replace(request, selections=selections, tuning=merged)


def _named(request: Request, from_claims: dict[str, str]) -> Callable[[str], str]:
    """How messages name a tuning key: the claim's GpuConfig field that asked it, else its env key or annotation."""
    def name(key: str) -> str:
        if key in from_claims:
            return from_claims[key]
        return env_key(key) if key in request.tuning_env else f"{PREFIX}{key}"
    return name


def _allocation_grant(alloc: Allocation) -> Grant:
    """How a device plugin allocation holds its GPUs: whole, or one share of them (time-sliced, or MPS)."""
    if not alloc.shared and not alloc.mps_threads:
        return Grant(WHOLE)
    how = f"an MPS share ({alloc.mps_threads}% of its threads)" if alloc.mps_threads else "a time-sliced share"
    return Grant(MPS if alloc.mps_threads else TIME_SLICED,
                 f"{how} of {', '.join(alloc.gpus)}: {alloc.resource} is shared between pods on this node",
                 f"ask for a whole GPU (nodeSelector {alloc.resource}.replicas: \"1\")")


def claimed_grant(claim: str, d: ClaimedDevice, config: Config) -> Grant:
    """How device `d` of DRA claim `claim` ("<namespace>/<name>") holds its GPU: whole, or one of the shares the
    scheduler may give other claims ([kubernetes] replicas > 1, or a share id in the record): an MPS share where
    the node shares its vendor's GPUs through MPS, else time-sliced. The driver checks a claim's configuration
    against it when it prepares the claim, the runtime again at each container's start."""
    k8s = config.kubernetes
    if not d.share and k8s.replicas < 2:
        return Grant(WHOLE)
    mps = k8s.sharing == "mps" and "mps" in kube_part(d.vendor).SHARING
    return Grant(MPS if mps else TIME_SLICED,
                 f"claim {claim} holds {'an MPS' if mps else 'a time-sliced'} share of {d.gpu} (device {d.device}), "
                 "which other claims may share",
                 "ask for a whole GPU (a node whose [kubernetes] replicas is 1, or a DeviceClass of whole GPUs)")


def _refuse_own_request(request: Request, config: Config, dra_driver: str) -> None:
    way = " or ".join(f"{r}: 1" for _, r in resources(config.kubernetes.resources))
    for sel in request.selections:
        if sel.count or sel.devices != ():  # `none` (the driver alone, no GPU) is not a GPU
            ask = (_claim_way(sel.vendor or "", dra_driver) if dra_driver else
                   f"resources.limits ({_resource_of(sel, config) or way})")
            raise PolicyError(f"{sel.source}={sel.shown!r}: on this node only the kubelet grants GPUs "
                              f"([policy] requests = \"allocated\"): ask in the pod spec with {ask}")
    if request.tuning.touches_host():
        ask = _claim_way("", dra_driver) if dra_driver else f"resources.limits ({way})"
        raise PolicyError("tuning (gpuhook.dev/clocks, power-limit, fan, perf-level, compute-mode, exclusive) needs "
                          f"GPUs the kubelet allocated: add {ask} to the container")


def _claim_way(vendor: str, driver: str) -> str:
    """How a pod asks for a GPU on a node gpuhook's DRA driver `driver` serves: a claim of the chart's DeviceClass
    for the vendor (any vendor's: `driver` itself), or the vendor's extended resource where the class serves it
    (its extendedResourceName, KEP-5004)."""
    limits = " or ".join(f"{r}: 1" for v, r in resources() if v == vendor or not vendor)  # the chart's names
    return (f"a ResourceClaim of DeviceClass {f'{vendor}.{driver}' if vendor else driver} (spec.resourceClaims; "
            f"gpuhook's DRA driver {driver} serves this node), or resources.limits ({limits}) where the cluster "
            "serves extended resources through DRA (Kubernetes 1.36+)")


def _resource_of(sel: Selection, config: Config) -> str:
    return f"{resource(sel.vendor, config.kubernetes.resources)}: 1" if sel.vendor else ""
