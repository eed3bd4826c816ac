"""What a tenant may ask of a GPU other tenants hold too: the one rule, for every way tuning is asked (annotation,
GPUHOOK_* env, a claim's GpuConfig) and every kind of grant. Pure.

A GPU's clocks, power limit, fans, performance level and compute mode are the physical GPU's, and NVML or amdgpu
sets them for every process on it; `exclusive` leases the whole GPU. On a GPU shared between tenants (a
time-sliced share, an MPS share, a slice whose siblings others hold) they would be one tenant's say over the
others' work: `compute-mode=exclusive-process` or `prohibited` ends the other shares' CUDA, `exclusive` refuses
their pods at start. They are the admin's there (docs/tuning.md, "On a shared GPU"); a tenant keeps what is its
own container's: the AMD runtime env (fine-grain-pcie, gfx-override) and, on an MPS share, its client's limits.

    grant              may ask
    whole GPU          everything (within [tuning])
    time-sliced share  fine-grain-pcie, gfx-override
    MPS share          those, mps, mps-threads, mps-memory (a client's own limits; the node's share is the most)
    slice (siblings    those, mps (refused by the vendor on a MIG device), exclusive (leases the slice alone);
      held by others)  with [tuning] shared_slices = true also clocks, power-limit, fan, perf-level; never
                       compute-mode
"""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuhook.request.tuning import Tuning

WHOLE = "whole GPU"
TIME_SLICED = "time-sliced share"
MPS = "MPS share"
SLICE = "slice"  # a MIG device or partition whose sibling slices other containers may hold
SLICE_OPEN = "slice, tunable"  # the same, where the admin lets its holder tune the GPU ([tuning] shared_slices)

_GPU_WIDE = ("clocks", "power-limit", "fan", "perf-level")
_OWN = ("fine-grain-pcie", "gfx-override")  # the container's own runtime env, never the host's
_CLIENT = ("mps", "mps-threads", "mps-memory")

ALLOWED: dict[str, frozenset[str]] = {
    WHOLE: frozenset((*_GPU_WIDE, "compute-mode", "exclusive", *_CLIENT, *_OWN)),
    TIME_SLICED: frozenset(_OWN),
    MPS: frozenset((*_CLIENT, *_OWN)),
    SLICE: frozenset(("exclusive", *_CLIENT, *_OWN)),
    SLICE_OPEN: frozenset((*_GPU_WIDE, "exclusive", *_CLIENT, *_OWN)),
}

_WHY = {
    "exclusive": "exclusive leases the whole GPU and refuses the other tenants' containers",
    "compute-mode": "the compute mode is the whole GPU's (exclusive-process or prohibited ends the other tenants' "
                    "CUDA)",
    "mps": "how a shared GPU is shared is the admin's choice ([kubernetes] sharing = \"mps\"), not a tenant's",
    "mps-threads": "an MPS client's limits need an MPS share",
    "mps-memory": "an MPS client's limits need an MPS share",
}
_GPU_WIDE_WHY = ("clocks, power limit, fans and performance level are the whole GPU's: on a shared GPU the admin "
                 "sets them, not a tenant")


@frozen
class Grant:
    """How a container holds its GPUs, as far as the other tenants on them go."""

    kind: str  # WHOLE, TIME_SLICED, MPS, SLICE, SLICE_OPEN
    what: str = ""  # the grant as messages name it ("a time-sliced share of nvidia.com/gpu: ...")
    way_out: str = ""  # how to get a grant that allows more


def annotation(key: str) -> str:
    """How a message names a tuning key asked by annotation."""
    return f"gpuhook.dev/{key}"


def check(tuning: Tuning, grant: Grant, name: Callable[[str], str] = annotation) -> None:
    """PolicyError naming the first setting of `tuning` that `grant` does not let its holder ask (`name`: how the
    source it came from names it), that the GPU is shared, and the way out."""
    allowed = ALLOWED[grant.kind]
    for key in tuning.asked_keys():
        if key not in allowed:
            raise PolicyError(f"{name(key)} on a shared GPU ({grant.what}): {_WHY.get(key, _GPU_WIDE_WHY)}; "
                              f"{grant.way_out}, or drop {name(key)}")


def own_mps(tuning: Tuning) -> Grant | None:
    """The grant a container makes itself by asking MPS on a GPU it was given whole: one client of a daemon other
    containers' clients share; None when it asks no MPS."""
    if not tuning.mps:
        return None
    return Grant(MPS, "gpuhook.dev/mps makes this container one MPS client of its GPU, beside the other "
                      "containers' clients", "ask it without MPS")
