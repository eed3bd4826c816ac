"""What the exporter serves, from what it gathered: View -> metric families (catalog.py names them). Pure: no
I/O, tested with literal views. Health is host/health.py's rule, the device plugin's."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gpuhook import __version__
from gpuhook.apply.counters import PREPARED, REFUSED
from gpuhook.frozen import frozen
from gpuhook.host.health import problem, vanished
from gpuhook.metrics.catalog import FAMILIES, TELEMETRY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuhook.apply.containers import ContainerRecord
    from gpuhook.host.inventory import Gpu, Inventory
    from gpuhook.vendors.contract import Reading

    Family = GaugeMetricFamily | CounterMetricFamily


_COUNTERS = {PREPARED: "gpuhook_containers_prepared_total", REFUSED: "gpuhook_containers_refused_total"}


@frozen
class TuningRow:
    """One ledger setting: on which GPU, its value, the original it restores, and its live holders."""

    vendor: str
    gpu: str  # UUID, else PCI address
    setting: str
    current: str
    original: str
    holders: int


@frozen
class View:
    """Everything one scrape gathered."""

    inventory: Inventory
    known: tuple[Gpu, ...] = ()  # GPUs this exporter saw before (those discovery no longer sees are unhealthy)
    readings: tuple[tuple[str, Reading], ...] | None = None  # by GPU (UUID, else PCI); None: telemetry is off
    records: tuple[ContainerRecord, ...] = ()  # the live containers gpuhook prepared
    settings: tuple[TuningRow, ...] = ()
    leases: tuple[tuple[str, str], ...] = ()  # (GPU, container id) of the live exclusive holders
    counters: tuple[tuple[tuple[str, str], int], ...] = ()  # ((counter, label), count)
    ledger_ok: bool = True
    duration: float = 0.0  # seconds the gathering took


def families(view: View) -> list[Family]:
    """The metric families of one scrape, in catalog order; every family is present, empty where nothing is."""
    out: dict[str, Family] = {f.name: (CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily)(
        f.name, f.help, labels=list(f.labels)) for f in FAMILIES}
    inv = view.inventory
    vendor_of = {g.key(): g.vendor for g in view.known}
    vendor_of |= {g.key(): g.vendor for v in inv.vendors for g in v.gpus}
    readings = dict(view.readings or ())
    for v in inv.vendors:
        for g in v.gpus:
            key = g.key()
            out["gpuhook_gpu_info"].add_metric([g.vendor, str(g.index), key, g.pci, g.model, v.driver_version or ""],
                                               1)
            for field, name in TELEMETRY.items():
                value = getattr(readings[key], field) if key in readings else None
                if value is not None:
                    out[name].add_metric([g.vendor, key], value)
    for (vendor, key), why in health(view).items():
        out["gpuhook_gpu_healthy"].add_metric([vendor, key], 0 if why else 1)
    for labels in dict.fromkeys((vendor_of.get(gpu) or _only_vendor(rec), gpu, rec.id, rec.pod, rec.namespace,
                                 rec.container) for rec in view.records for gpu in rec.gpus):
        out["gpuhook_gpu_allocated"].add_metric(list(labels), 1)
    for gpu, holder in dict.fromkeys(view.leases):
        out["gpuhook_gpu_exclusive"].add_metric([vendor_of.get(gpu, ""), gpu, holder], 1)
    for row in view.settings:
        out["gpuhook_tuning_setting"].add_metric([row.vendor, row.gpu, row.setting, row.current, row.original], 1)
        out["gpuhook_tuning_holders"].add_metric([row.vendor, row.gpu, row.setting], row.holders)
    for (counter, label), count in sorted(view.counters):
        served = _COUNTERS.get(counter)
        if served:
            out[served].add_metric([label], count)
    out["gpuhook_ledger_ok"].add_metric([], 1 if view.ledger_ok else 0)
    loaded = {v.vendor: v.driver_version or "" for v in inv.vendors}
    stale = {rec.id for rec in view.records if rec.stale_drivers(loaded)}
    out["gpuhook_stale_driver_containers"].add_metric([], len(stale))
    out["gpuhook_exporter_scrape_duration_seconds"].add_metric([], view.duration)
    out["gpuhook_build_info"].add_metric([__version__], 1)
    return list(out.values())


def health(view: View) -> dict[tuple[str, str], str]:
    """{(vendor, GPU): what makes it unhealthy, "" when nothing} for the GPUs discovery sees and those it saw
    before: host/health.py's rule, with unreadable telemetry where telemetry is on."""
    inv = view.inventory
    readings = dict(view.readings or ())
    out: dict[tuple[str, str], str] = {}
    for v in inv.vendors:
        for g in v.gpus:
            key = g.key()
            reading = readings.get(key)
            error = "" if view.readings is None else reading.error if reading else "the GPU gave no reading"
            out[(g.vendor, key)] = problem(g, error)
    for g in view.known:
        out.setdefault((g.vendor, g.key()), vanished(inv.vendor(g.vendor) is not None))
    return out


def _only_vendor(rec: ContainerRecord) -> str:
    """The vendor of a GPU discovery no longer sees: the record's, when it got one vendor's driver only."""
    vendors = {v for v, _ in rec.drivers}
    return vendors.pop() if len(vendors) == 1 else ""
