"""`gpuhook partition apply FILE`: GPU partition layouts from a file, as NVIDIA's MIG manager and AMD's GPU operator
apply theirs. The file (TOML, or JSON by its name) has one table array per vendor:

    [[amd]]
    gpus = "all"          # or a list: physical GPU numbers (0, 1, in discovery order), PCI addresses, UUIDs
    compute = "CPX"       # SPX, DPX, QPX, CPX
    memory = "NPS4"       # NPS1, NPS4

    [[nvidia]]
    gpus = [0]
    mig = ["3g.40gb", "2g.20gb", "1g.10gb"]   # [] turns MIG off

A GPU any container (or process) uses is refused, named with its users, before anything changes; a GPU already so
is left alone. After the change the CDI specs and the node feature file gpuhook wrote are written anew; the device
plugin and the DRA driver see the new devices on their next look (seconds). Writes the driver's files."""

from __future__ import annotations

import argparse
import os

from gpuhook.errors import GpuhookError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.config import Config
    from gpuhook.host.inventory import Gpu, Inventory, VendorInventory
    from gpuhook.host.root import Root

MAX_FILE = 1 << 20
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")


def apply(args: argparse.Namespace) -> int:
    """Apply the file's layouts (or with --dry-run say what would change). 0 when every GPU has its layout. The
    checks, and the users read again, and the changes are made under the GPU path's lock (exclusive): no container
    starts on a GPU while its layout changes, and one that started before is seen as its user."""
    from gpuhook.apply.state_dir import Lock
    from gpuhook.config import load
    from gpuhook.host.root import Root
    from gpuhook.vendors.registry import get, tuning

    config = load()
    wanted = _read(args.file)
    root = Root(config.host_root)
    if args.dry_run:  # the same checks as apply's, without its lock (it changes nothing)
        for vendor, gpu, layout, what in planned(root, args.file, wanted, config):
            print(f"would put {get(vendor).LABEL} GPU {gpu.pci} in {_shown(layout)}"
                  + ("" if what else " (it is so already)"))
        return 0
    with Lock(config.state_dir, exclusive=True):
        plan = planned(root, args.file, wanted, config)  # every table checked before any GPU changes
        changed = []
        for vendor, gpu, layout, _ in plan:
            what = tuning(vendor).repartition(root, gpu, layout)
            print(f"{get(vendor).LABEL} GPU {gpu.pci}: " + (what or f"already {_shown(layout)}"))
            if what:
                changed.append(vendor)
        if changed:
            _refresh(config, sorted(set(changed)), args.labels)
    return 0


def planned(root: Root, name: str, wanted: dict[str, Any],
            config: Config) -> list[tuple[str, Gpu, dict[str, object], str]]:
    """(vendor, GPU, layout, what would change) for every GPU the file names, each layout checked by its vendor
    (repartition's dry run: keys, value types and bounds, what the GPU offers) and no GPU in use: the one check
    both apply and --dry-run make. GpuhookError for the first table or GPU refused. Reads the host."""
    from gpuhook.vendors.discover import discover
    from gpuhook.vendors.registry import get, names, tuning

    unknown = sorted(set(wanted) - set(names()))
    if unknown:
        raise GpuhookError(f"{name}: no vendor {unknown[0]!r}: the tables are {', '.join(names())}")
    inventory = discover(root)
    plan: list[tuple[str, Gpu, dict[str, object]]] = []
    for vendor, entries in wanted.items():
        inv = inventory.vendor(vendor)
        if inv is None:
            raise GpuhookError(f"{name}: [[{vendor}]] but this host has no {get(vendor).LABEL} driver")
        for n, entry in enumerate(entries):
            if not isinstance(entry, dict) or "gpus" not in entry:
                raise GpuhookError(f"{name}: [[{vendor}]] entry {n + 1} needs gpus (\"all\" or a list)")
            layout = {k: v for k, v in entry.items() if k != "gpus"}
            plan += [(vendor, gpu, layout) for gpu in _chosen(inv, entry["gpus"], f"{name}: [[{vendor}]]")]
    twice = [gpu.pci for i, (_, gpu, _) in enumerate(plan) if any(g.pci == gpu.pci for _, g, _ in plan[:i])]
    if twice:
        raise GpuhookError(f"{name}: GPU {twice[0]} is named by two tables: give each GPU one layout")
    checked = [(vendor, gpu, layout, tuning(vendor).repartition(root, gpu, layout, dry_run=True))
               for vendor, gpu, layout in plan]
    _refuse_if_used(config, inventory, [(vendor, gpu) for vendor, gpu, _ in plan])
    return checked


def physical(inv: VendorInventory) -> list[Gpu]:
    """The vendor's physical GPUs in discovery order: whole GPUs, and each partitioned GPU once (its first slice
    stands for it: its PCI address is the GPU's)."""
    seen: dict[str, Gpu] = {}
    for g in (*inv.gpus, *inv.slices):
        seen.setdefault(g.parent or g.key(), g)
    return list(seen.values())


def _chosen(inv: VendorInventory, gpus: object, where: str) -> list[Gpu]:
    every = physical(inv)
    if gpus == "all":
        return every
    if not isinstance(gpus, list) or not gpus:
        raise GpuhookError(f"{where}: gpus = {gpus!r}: expected \"all\" or a list of GPUs")
    out = []
    for item in gpus:
        text = str(item).lower()
        found = [g for i, g in enumerate(every) if text in (str(i), g.pci, (g.parent or g.uuid).lower())]
        if not found:
            have = ", ".join(f"{i} ({g.pci})" for i, g in enumerate(every)) or "none"
            raise GpuhookError(f"{where}: no GPU {item!r}; this host has {have}")
        out.append(found[0])
    return list(dict.fromkeys(out))


def _refuse_if_used(config: Config, inventory: Inventory, chosen: list[tuple[str, Gpu]]) -> None:
    """GpuhookError naming the containers (and processes) that use the first of `chosen` GPUs (or any of its
    slices) any use; state_dir and /proc are read once for all of them."""
    from gpuhook.cli.upgrade_commands import users

    families = []
    for vendor, gpu in chosen:
        inv = inventory.vendor(vendor)
        families.append((gpu, [g for g in (*(inv.gpus if inv else ()), *(inv.slices if inv else ()))
                               if (g.parent or g.key()) == (gpu.parent or gpu.key())]))
    records, held = users(config, frozenset((n.major, n.minor) for _, family in families for g in family
                                            for n in g.nodes))
    for gpu, family in families:
        keys = {g.key() for g in family} | {gpu.parent} - {""}
        numbers = {(n.major, n.minor) for g in family for n in g.nodes}
        who = [*(f"container {r.id}" for r in records if keys & set(r.gpus)),
               *(f"{h.command} ({h.pid})" for h in held if numbers & set(h.nodes))]
        if who:
            raise GpuhookError(f"GPU {gpu.pci} is in use by {', '.join(who[:4])}: stop them before its partitions "
                               "change (`gpuhook upgrade plan` lists what holds the GPUs); nothing was changed")


def _refresh(config: Config, vendors: list[str], labels_path: str | None) -> None:
    """gpuhook's CDI specs of `vendors` and the NFD feature file, where they exist, written anew."""
    from gpuhook.cli import cdi_commands, host_commands
    from gpuhook.vendors.labels import DEFAULT_PATH

    for vendor in vendors:
        for d in SPEC_DIRS:
            for fmt in ("json", "yaml"):
                path = f"{d}/gpuhook-{vendor}.{fmt}"
                if os.path.exists(path):
                    cdi_commands.generate(argparse.Namespace(
                        vendor=vendor, output=path, output_dir=None, format=fmt, capabilities="compute,utility",
                        cdi_version=None, if_changed=True, engine=None))
    path = labels_path or DEFAULT_PATH
    if os.path.exists(path):
        host_commands.labels(argparse.Namespace(output=path))


def _read(path: str) -> dict[str, Any]:
    from gpuhook import fastjson
    from gpuhook.configfile import parse_toml, read_regular

    try:
        raw = read_regular(path, 0, MAX_FILE)  # a FIFO or a device is refused at once, not waited on
    except OSError as e:
        raise GpuhookError(f"cannot read {path}: {e.strerror}: give a layout file (TOML, or JSON by its name), at "
                           f"most {MAX_FILE} bytes") from e
    kind = "JSON" if path.endswith(".json") else "TOML"
    try:
        doc = fastjson.loads(raw) if kind == "JSON" else parse_toml(raw, path)
    except ValueError as e:
        raise GpuhookError(f"{path} cannot be read as {kind}: {e}") from e
    if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
        raise GpuhookError(f"{path}: expected one table array per vendor ([[amd]], [[nvidia]])")
    return doc


def _shown(layout: dict[str, object]) -> str:
    def value(v: object) -> str:
        return (", ".join(map(str, v)) or "none") if isinstance(v, list) else str(v)

    return ", ".join(f"{k} {value(v)}" for k, v in layout.items()) or "its layout"
