"""GPU health, one rule for the device plugin (which devices it advertises Healthy) and the exporter
(`gpuhook_gpu_healthy`): a GPU is healthy while discovery sees it, its driver is loaded and every device node it
needs exists; the exporter adds that its telemetry can be read. Pure: the reasons are what the plugin logs and
what an admin reads."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
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
