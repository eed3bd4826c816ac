"""Every metric the exporter serves: name, type, labels and help, in one table. The names and labels are an
interface (dashboards and alerts depend on them); docs/monitoring.md's metric table and the Grafana dashboard
are checked against this table by the tests."""

from __future__ import annotations

from gpuhook.frozen import frozen


@frozen
class Family:
    """One metric family."""

    name: str  # as served; a counter's ends in _total
    kind: str  # gauge or counter (info-style families are gauges whose value is 1)
    labels: tuple[str, ...]
    help: str


_GPU = ("vendor", "uuid")

FAMILIES = (
    Family("gpuhook_gpu_info", "gauge", ("vendor", "index", "uuid", "pci", "model", "driver"),
           "1 for each GPU discovery sees (uuid: the GPU's UUID, else its PCI address)"),
    Family("gpuhook_gpu_healthy", "gauge", _GPU,
           "1 while the GPU's device nodes are present, its driver is loaded and its telemetry is readable (the "
           "device plugin's health); 0 for a GPU seen before that discovery no longer sees"),
    Family("gpuhook_gpu_allocated", "gauge", (*_GPU, "container_id", "pod", "namespace", "container"),
           "1 for each running container gpuhook gave the GPU (pod labels empty outside Kubernetes)"),
    Family("gpuhook_gpu_exclusive", "gauge", (*_GPU, "container_id"),
           "1 while a running container holds the GPU exclusively (gpuhook.dev/exclusive)"),
    Family("gpuhook_tuning_setting", "gauge", (*_GPU, "setting", "current", "original"),
           "1 for each GPU setting gpuhook applied for containers (the ledger): its value and the original it "
           "restores"),
    Family("gpuhook_tuning_holders", "gauge", (*_GPU, "setting"),
           "Running containers holding the setting (0: applied with no holder left; gpuhook gc restores it)"),
    Family("gpuhook_gpu_utilization_ratio", "gauge", _GPU,
           "Share of the last sample period the GPU was busy (0-1)"),
    Family("gpuhook_gpu_memory_used_bytes", "gauge", _GPU, "GPU memory in use"),
    Family("gpuhook_gpu_memory_total_bytes", "gauge", _GPU, "GPU memory in all"),
    Family("gpuhook_gpu_power_watts", "gauge", _GPU, "Power drawn now"),
    Family("gpuhook_gpu_power_limit_watts", "gauge", _GPU,
           "The power limit in force (NVIDIA: power management limit; AMD: power cap)"),
    Family("gpuhook_gpu_temperature_celsius", "gauge", _GPU,
           "GPU temperature (NVIDIA: the GPU core; AMD: the junction, else the edge)"),
    Family("gpuhook_gpu_sm_clock_hertz", "gauge", _GPU, "Graphics clock (NVIDIA: SM clock; AMD: sclk)"),
    Family("gpuhook_containers_prepared_total", "counter", ("vendor",),
           "GPU containers gpuhook prepared, per vendor they got GPUs of (since state_dir was made: boot)"),
    Family("gpuhook_containers_refused_total", "counter", ("reason",),
           "Containers gpuhook refused, by the error's class (RequestError, PlanError, PolicyError, ...)"),
    Family("gpuhook_ledger_ok", "gauge", (),
           "1 when the tuning ledger can be read (or there is none); 0 when it is corrupt or state_dir is "
           "untrusted: gpuhook then tunes and restores nothing until an admin repairs it"),
    Family("gpuhook_stale_driver_containers", "gauge", (),
           "Running GPU containers whose driver user space is older or other than the loaded driver's"),
    Family("gpuhook_exporter_scrape_duration_seconds", "gauge", (),
           "How long the exporter took to gather this scrape"),
    Family("gpuhook_build_info", "gauge", ("version",), "1, with gpuhook's version"),
)

TELEMETRY = {  # the families of Reading's fields
    "utilization": "gpuhook_gpu_utilization_ratio", "memory_used": "gpuhook_gpu_memory_used_bytes",
    "memory_total": "gpuhook_gpu_memory_total_bytes", "power": "gpuhook_gpu_power_watts",
    "power_limit": "gpuhook_gpu_power_limit_watts", "temperature": "gpuhook_gpu_temperature_celsius",
    "sm_clock": "gpuhook_gpu_sm_clock_hertz",
}


def family(name: str) -> Family:
    """The family called `name`; KeyError for a name the exporter does not serve."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(name)
