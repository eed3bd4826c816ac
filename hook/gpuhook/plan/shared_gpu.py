"""What a tenant may ask of a GPU other tenants hold too: the one rule, for every way tuning is asked (annotation,
GPUHOOK_* env, a claim's GpuConfig) and every kind of grant. Pure.

A GPU's clocks, power limit, fans, performance level and compute mode are the physical GPU's, and NVML or amdgpu
sets them for every process on it; `exclusive` leases the whole GPU. On a GPU shared between tenants (a
time-sliced share, an MPS share, a slice whose siblings others hold) they would be one tenant's say over the
others' work: `compute-mode=exclusive-process` or `prohibited` ends the other shares' CUDA, `exclusive` refuses
their pods at start. They are the admin's there (docs/tuning.md, "On a shared GPU"); a tenant keeps what is its
own container's: the AMD runtime env (fine-grain-pcie, gfx-override) and, on an MPS share, its client's limits.
Each knob's row (request/knobs.py) names the grants whose holders may ask it (`tenants`) and why the others may not:

    grant              may ask
    whole GPU          everything (within [tuning])
    time-sliced share  fine-grain-pcie, gfx-override
    MPS share          those, mps, mps-threads, mps-memory (a client's own limits; the node's share is the most)
    slice (siblings    those, mps (refused by the vendor on a MIG device), exclusive (leases the slice alone);
      held by others)  with [tuning] shared_slices = true (a tunable slice) also clocks, power-limit, fan,
                       perf-level; never compute-mode
"""

from __future__ import annotations

from gpuhook.errors import PolicyError
from gpuhook.frozen import frozen
from gpuhook.request.knobs import KNOB
from gpuhook.request.knobs import MPS as MPS
from gpuhook.request.knobs import SLICE as SLICE
from gpuhook.request.knobs import SLICE_OPEN as SLICE_OPEN
from gpuhook.request.knobs import TIME_SLICED as TIME_SLICED
from gpuhook.request.knobs import WHOLE as WHOLE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuhook.request.tuning import Tuning


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
    for key in tuning.asked_keys():
        if grant.kind not in KNOB[key].tenants:
            raise PolicyError(f"{name(key)} on a shared GPU ({grant.what}): {KNOB[key].why}; "
                              f"{grant.way_out}, or drop {name(key)}")


def own_mps(tuning: Tuning) -> Grant | None:
    """The grant a container makes itself by asking MPS on a GPU it was given whole: one client of a daemon other
    containers' clients share; None when it asks no MPS."""
    if not tuning.mps:
        return None
    return Grant(MPS, "gpuhook.dev/mps makes this container one MPS client of its GPU, beside the other "
                      "containers' clients", "ask it without MPS")
