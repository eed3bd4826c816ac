"""`gpuhook doctor`: what an admin should know about this host, each finding with its fix."""

from __future__ import annotations

from gpuhook import records
from gpuhook.config import Config
from gpuhook.discover import discover
from gpuhook.errors import GpuhookError
from gpuhook.record import record
from gpuhook.root import Root


@record
class Finding:
    """One check's result: level ok, warn or fail."""

    level: str
    what: str
    fix: str = ""


def run_checks(config: Config) -> list[Finding]:
    """Every check, in order. Reads the host and state_dir; drops records of containers that are gone."""
    out = [Finding("ok", f"config {config.path} is valid")]
    try:
        inventory = discover(Root(config.host_root))
    except GpuhookError as e:
        return [*out, Finding("fail", str(e), "set host_root to the host's root (usually /)")]
    loaded = {v.vendor: v.driver_version or "" for v in inventory.vendors}
    for vendor, version in loaded.items():
        gpus = len(inventory.vendor(vendor).gpus)  # type: ignore[union-attr]
        out.append(Finding("ok", f"{vendor} driver {version or '(in-kernel)'} with {gpus} GPUs"))
    if not loaded:
        out.append(Finding("warn", f"no GPU driver found under host root {config.host_root}",
                           "load the nvidia or amdgpu kernel module"))
    out += stale_containers(config.state_dir, loaded)
    return out


def stale_containers(state_dir: str, loaded: dict[str, str]) -> list[Finding]:
    """Running containers that got driver user space older or other than the loaded kernel module's."""
    found = []
    for rec in records.live_records(state_dir):
        for vendor, version in rec.drivers:
            now = loaded.get(vendor)
            if version and now and version != now:
                found.append(Finding("warn", f"container {rec.id} runs with {vendor} driver libraries {version} "
                                     f"but the loaded kernel module is {now}",
                                     f"restart container {rec.id} so that it gets the {now} libraries"))
    return found or [Finding("ok", "no running GPU container carries an old driver's libraries")]
