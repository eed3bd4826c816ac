"""Who grants GPUs: `[policy] requests`. Pure: the request and its verified allocation in, the request the
rest of the GPU path honours out.

- "any" (single hosts): the container's own annotations and env ask; an allocation, where presented, is
  honoured as the device plugin wrote it.
- "allocated" (cluster nodes): GPUs come only from an allocation the device plugin made for the kubelet; a
  pod author's gpuhook.dev/gpus, NVIDIA_VISIBLE_DEVICES=all and the like are refused with how to ask. Tuning
  is still the pod author's to ask for, on the GPUs they were allocated, within [tuning] policy.
"""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.frozen import frozen, replace
from gpuhook.request.container import ALLOCATION, PREFIX, Request, Selection

TYPE_CHECKING = False
if TYPE_CHECKING:
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


def authorize(request: Request, alloc: Allocation | None, config: Config) -> Request:
    """`request` with its GPUs replaced by the allocation's; PolicyError where the policy refuses it. `alloc` is
    the verified record of request.allocation (None when it presents none)."""
    allocated = config.policy.requests == "allocated"
    if alloc is None:
        if allocated:
            _refuse_own_request(request, config)
        return request
    own = next((s for s in request.selections if s.source == f"{PREFIX}gpus"), None)
    if own is not None:
        raise PolicyError(f"{own.source}={own.shown!r} next to the kubelet's allocation ({alloc.resource}: "
                          f"{', '.join(alloc.gpus)}): a pod gets the GPUs its resources.limits asked for; drop "
                          f"{own.source}")
    if request.tuning.exclusive and alloc.shared:
        raise PolicyError(f"{PREFIX}exclusive=true on a time-sliced GPU ({alloc.resource} is shared between pods "
                          "on this node): exclusive needs a node with whole "
                          f"GPUs (nodeSelector {alloc.resource}.replicas: \"1\"), or drop {PREFIX}exclusive")
    # The allocation replaces every other ask, the image's own env included (a CUDA image's
    # NVIDIA_VISIBLE_DEVICES=all): the container gets exactly what the kubelet allocated.
    return replace(request, selections=(Selection(alloc.vendor, alloc.gpus, f"{PREFIX}{ALLOCATION}", alloc.id),))


def _refuse_own_request(request: Request, config: Config) -> None:
    way = " or ".join(f"{r}: 1" for _, r in config.kubernetes.resources)
    for sel in request.selections:
        if sel.count or sel.devices != ():  # `none` (the driver alone, no GPU) is not a GPU
            raise PolicyError(f"{sel.source}={sel.shown!r}: on this node only the kubelet grants GPUs "
                              f"([policy] requests = \"allocated\"): ask in the pod spec with resources.limits "
                              f"({_resource_of(sel, config) or way})")
    if request.tuning.touches_host():
        raise PolicyError("tuning (gpuhook.dev/clocks, power-limit, perf-level, compute-mode, exclusive) needs GPUs "
                          f"the kubelet allocated: add resources.limits ({way}) to the container")


def _resource_of(sel: Selection, config: Config) -> str:
    return f"{config.kubernetes.resource(sel.vendor)}: 1" if sel.vendor else ""
