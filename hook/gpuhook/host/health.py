"""GPU health, one rule for the device plugin (which devices it advertises Healthy) and the exporter
(`gpuhook_gpu_healthy`): a GPU is healthy while discovery sees it, its driver is loaded and every device node it
needs exists; the exporter adds that its telemetry can be read. Pure: the reasons are what the plugin logs and
what an admin reads.

Faults, for the DRA driver's device taints (kubernetes/dra/taints.py): what is wrong with a GPU, by class, with the
effect the class has on claims. A class is named as NVIDIA's DRA driver names it where it has one (`gpu-lost`,
`xid`), so that a toleration written for that driver reads ours; AMD's and Hygon's RAS errors are `ras`.
- gpu-lost: a device node the GPU needs is missing. NoExecute: nothing in a container can reach it.
- xid: an NVIDIA XID in the kernel log. The XIDs of application errors (the GPU itself is fine: NVIDIA's device
  plugin and DRA driver skip the same ones) are None, informational; those that lose or corrupt the running work
  and need the GPU reset are NoExecute; any other, NoSchedule.
- ras: uncorrectable errors in amdgpu's RAS counters (ras/<block>_err_count, "ue: N"). NoExecute: the GPU's memory
  or an engine returned bad data; correctable errors are no fault.
"""

from __future__ import annotations

from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from gpuhook.host.inventory import Gpu

DRIVER_GONE = "the driver is not loaded"
GPU_GONE = "discovery no longer sees this GPU"


def problem(gpu: Gpu, telemetry_error: str = "") -> str:
    """What makes a GPU discovery sees unhealthy ("" when nothing): a missing device node, else telemetry that
    cannot be read (`telemetry_error`, where telemetry was asked for)."""
    if gpu.missing:
        return f"device node {gpu.missing[0]} is missing"
    if telemetry_error:
        return f"its telemetry cannot be read ({telemetry_error})"
    return ""


def vanished(driver_loaded: bool) -> str:
    """Why a GPU seen before is unhealthy now that discovery no longer lists it."""
    return GPU_GONE if driver_loaded else DRIVER_GONE


NO_EXECUTE, NO_SCHEDULE, NONE = "NoExecute", "NoSchedule", "None"  # the effects, in resource.k8s.io's words
LOST, XID, RAS = "gpu-lost", "xid", "ras"
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})  # the application's error, not the GPU's
FATAL_XIDS = frozenset({48, 62, 64, 74, 79, 95, 119, 120, 140})  # double-bit ECC, halted controller, row remap
# failure, NVLink, fallen off the bus, uncontained ECC, GSP timeout and error, unrecovered ECC: reset the GPU
_RANK = {NO_EXECUTE: 3, NO_SCHEDULE: 2, NONE: 1}


@frozen
class Fault:
    """One thing wrong with a GPU: its class (LOST, XID, RAS), a value naming it (a label value: the XID's
    number, the RAS block), the effect on claims, and the reason in words."""

    kind: str
    value: str
    effect: str
    why: str

    def unhealthy(self) -> bool:
        """Whether the GPU is unhealthy for it (the kubelet's health watch): every effect but None."""
        return self.effect != NONE


def faults(gpu: Gpu, xids: Iterable[int] = (), ras: Mapping[str, int] | None = None) -> tuple[Fault, ...]:
    """What is wrong with `gpu`: a missing device node, the worst of the XIDs the kernel logged for it, and its
    RAS blocks' uncorrectable error counts ({block: count}), in that order."""
    out: list[Fault] = []
    if gpu.missing:
        out.append(Fault(LOST, "node-missing", NO_EXECUTE, f"device node {gpu.missing[0]} is missing"))
    worst = max(xids, key=lambda x: (_RANK[xid_effect(x)], x), default=None)
    if worst is not None:
        out.append(Fault(XID, str(worst), xid_effect(worst), f"the driver logged XID {worst}"))
    bad = sorted((block, n) for block, n in (ras or {}).items() if n > 0)
    if bad:
        out.append(Fault(RAS, bad[0][0], NO_EXECUTE, "uncorrectable RAS errors: "
                         + ", ".join(f"{block} {n}" for block, n in bad)))
    return tuple(out)


def xid_effect(xid: int) -> str:
    """The effect of an XID on claims (NoExecute, NoSchedule, None)."""
    if xid in APPLICATION_XIDS:
        return NONE
    return NO_EXECUTE if xid in FATAL_XIDS else NO_SCHEDULE


def unhealthy(found: Iterable[Fault]) -> str:
    """Why the GPU is unhealthy for the kubelet, "" when it is not: the reasons of its faults that have an
    effect."""
    return "; ".join(f.why for f in found if f.unhealthy())
