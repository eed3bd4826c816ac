"""`gpuhook doctor`: what an admin should know about this host, each finding with its fix."""

from __future__ import annotations

import os
import sys

from gpuhook.apply.containers import live_records
from gpuhook.cli.findings import Finding
from gpuhook.config import Config
from gpuhook.errors import GpuhookError
from gpuhook.host.inventory import Inventory, VendorInventory
from gpuhook.host.root import Root
from gpuhook.vendors.discover import discover
from gpuhook.vendors.registry import doctor


def run_checks(config: Config) -> list[Finding]:
    """Every check, in order. Reads the host and state_dir; drops records of containers that are gone."""
    out = [Finding("ok", f"config {config.path} is valid")]
    try:
        inventory = discover(Root(config.host_root))
    except GpuhookError as e:
        return [*out, Finding("fail", str(e), "set host_root to the host's root (usually /)")]
    loaded = {v.vendor: v.driver_version or "" for v in inventory.vendors}
    for inv in inventory.vendors:
        version = inv.driver_version or "(in-kernel)"
        out.append(Finding("ok", f"{inv.vendor} driver {version} with {len(inv.gpus)} GPUs"))
        out += _nodes(inv)
        out += [Finding(*check) for check in doctor(inv.vendor).checks(inv)]
    if not loaded:
        out.append(Finding("warn", f"no GPU driver found under host root {config.host_root}",
                           "load the nvidia or amdgpu kernel module"))
    state = _state_dir(config.state_dir)
    out.append(state)
    out += _runtime(config.runtime)
    out += _paths()
    out += _engines()
    out += stale_cdi_specs(inventory)
    out += _daemon_reload(config, inventory)
    if state.level != "fail":  # records in a state_dir that cannot be trusted are not read
        out += stale_containers(config.state_dir, loaded)
    return out


def _nodes(inv: VendorInventory) -> list[Finding]:
    missing = [p for g in inv.gpus for p in g.missing] + list(inv.notes)
    if missing:
        return [Finding("fail", f"{inv.vendor} device nodes missing: {', '.join(missing)}",
                        "create them (nvidia-modprobe, or udev for amdgpu/kfd)")]
    groups = sorted({n.gid for g in inv.gpus for n in g.nodes} | {n.gid for n in inv.shared_nodes})
    return [Finding("ok", f"{inv.vendor} device nodes present (groups {', '.join(map(str, groups))})")]


def runc_affected_by_cve_2024_45310(version_text: str) -> bool:
    """runc before 1.1.14 (and 1.2.0-rc1/rc2) can be raced into creating empty files or directories outside
    the container while it makes bind-mount targets: a rootfs that swaps a directory for a symlink meanwhile."""
    from gpuhook.cli.doctor_engines import runc_release

    base = runc_release(version_text)
    if base is None:
        return False
    nums = [int(p) for p in base.split("-")[0].split(".") if p.isdigit()]
    if len(nums) < 3:
        return False
    if tuple(nums[:2]) == (1, 2) and "-rc" in base:
        return base.split("-rc")[1].lstrip(".")[:1] in ("1", "2")
    return tuple(nums[:3]) < (1, 1, 14)


def _runtime(runtime: str) -> list[Finding]:
    from gpuhook.cli.shim import find_runtime
    from gpuhook.errors import GpuhookError as Error
    from gpuhook.proc import run

    try:
        path = find_runtime(runtime)
        text = run([path, "--version"], timeout=10).splitlines()[0]
    except (Error, IndexError) as e:
        return [Finding("fail", f"runtime {runtime!r}: {e}", "install runc or set `runtime` in the gpuhook config")]
    from gpuhook.cli.doctor_engines import time_namespaces

    docker = [Finding(*f) for f in time_namespaces(text)]  # Docker 29.5's time namespaces on an older runc
    if runc_affected_by_cve_2024_45310(text):
        return [*docker, Finding("warn", f"{path}: {text} is affected by CVE-2024-45310 (a rootfs racing runc while "
                                 "it creates mount targets can make it create empty files or directories outside the "
                                 "container)", "upgrade runc to 1.1.14 or later")]
    return [*docker, Finding("ok", f"runtime {path}: {text}")]


def _paths() -> list[Finding]:
    from gpuhook.cli.doctor_paths import checks

    return [Finding(*f) for f in checks(os.path.dirname(os.path.realpath(sys.argv[0])))]


def _daemon_reload(config: Config, inventory: Inventory) -> list[Finding]:
    from gpuhook.cli.doctor_reload import checks

    return checks(config, inventory)


def _state_dir(state_dir: str) -> Finding:
    from gpuhook.apply.state_dir import ensure

    try:
        ensure(state_dir)
    except GpuhookError as e:
        return Finding("fail", str(e), "chown root and chmod 700 the directory, or set state_dir")
    try:
        probe = os.path.join(state_dir, f".doctor-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.unlink(probe)
    except OSError as e:
        return Finding("fail", f"state_dir {state_dir} is not writable: {e.strerror}",
                       "point state_dir at a root-owned writable directory (default /run/gpuhook)")
    return Finding("ok", f"state_dir {state_dir} is writable")


def _engines() -> list[Finding]:
    """Which engines have gpuhook registered, and Docker's --gpus hook (cli/doctor_engines.py)."""
    from gpuhook.cli.doctor_engines import checks

    return [Finding(*f) for f in checks()]


def stale_containers(state_dir: str, loaded: dict[str, str]) -> list[Finding]:
    """Running containers that got driver user space older or other than the loaded kernel module's."""
    found = []
    for rec in live_records(state_dir):
        for vendor, version in rec.drivers:
            now = loaded.get(vendor)
            if version and now and version != now:
                found.append(Finding("warn", f"container {rec.id} runs with {vendor} driver libraries {version} "
                                     f"but the loaded kernel module is {now}",
                                     f"restart container {rec.id} so that it gets the {now} libraries"))
    return found or [Finding("ok", "no running GPU container carries an old driver's libraries")]


def stale_cdi_specs(inventory: Inventory) -> list[Finding]:
    """gpuhook's CDI specs (in /etc/cdi and /var/run/cdi) that no longer fit the loaded driver: another version's
    driver files, other device nodes or GPUs. Reads the spec files."""
    from gpuhook.apply.cdi import is_ours, stale
    from gpuhook.cli.cdi_files import read_spec, spec_files
    from gpuhook.errors import CdiError
    from gpuhook.vendors.discover import identified
    from gpuhook.vendors.registry import all_vendors

    out = []
    named: Inventory | None = None  # with MIG devices' UUIDs (NVML), as `cdi generate` names them
    for path in spec_files():
        try:
            spec = read_spec(path)
        except CdiError:
            continue  # not readable here (YAML without PyYAML, another tool's broken file): cdi validate says why
        for vendor in (v for v in all_vendors() if is_ours(spec, v)):
            fix = (f"gpuhook cdi generate --vendor {vendor.NAME} --output {path} (or enable gpuhook-cdi-refresh.path "
                   "to have it done after driver changes)")
            if named is None:
                named = identified(Root(inventory.root), inventory)
            reasons = stale(spec, vendor, named.vendor(vendor.NAME), named.root)
            out += [Finding("warn", f"CDI spec {path} is stale: {why}", fix) for why in reasons] or [
                Finding("ok", f"CDI spec {path} fits the loaded {vendor.LABEL} driver")]
    return out
