"""The admin commands about this host: simulate, list, configure, labels (argparse in cli/admin.py)."""

from __future__ import annotations

import sys

from gpuhook.errors import GpuhookError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from gpuhook.apply.cdi_readers import Reader
    from gpuhook.engines.engine import Engine


def simulate(args: argparse.Namespace) -> int:
    """`gpuhook simulate`: build a fake GPU host tree. Writes files, makes device nodes."""
    from gpuhook.testing.simulate import HostSpec, build_host

    amd_driver = None if args.amd_driver == "in-tree" else args.amd_driver
    root = build_host(args.root, HostSpec(nvidia=args.nvidia, amd=args.amd, hygon=args.hygon,
                                          hygon_driver=args.hygon_driver, nvidia_driver=args.nvidia_driver,
                                          cuda_version=args.cuda_version, amd_driver=amd_driver,
                                          mig=tuple(args.mig), mig_gpus=args.mig_gpus,
                                          amd_partitions=args.partitions.upper(), fans=args.fans,
                                          numa_nodes=args.numa_nodes),
                     replace=args.replace)
    print(f"simulated host with {args.nvidia} NVIDIA and {args.amd} AMD GPUs"
          + (f" and {args.hygon} Hygon DCUs" if args.hygon else "") + f" at {root}")
    print(f"use it with: host_root = \"{root}\" in the gpuhook config")
    return 0


def list_gpus(args: argparse.Namespace) -> int:
    """`gpuhook list`: the GPUs (and their MIG devices, partitions) as gpuhook sees them."""
    import json

    from gpuhook.config import load
    from gpuhook.host.root import Root
    from gpuhook.vendors.discover import discover, identified

    root = Root(args.host_root or load().host_root)
    inventory = identified(root, discover(root))
    gpus = [(v, g) for v in inventory.vendors for g in (*v.gpus, *v.slices)]
    gpus.sort(key=lambda vg: (inventory.vendors.index(vg[0]), vg[1].index, vg[1].slice))  # slices under their GPU
    if args.json:
        print(json.dumps([{"vendor": g.vendor, "index": g.index, "uuid": g.uuid, "pci": g.pci, "model": g.model,
                           "arch": g.arch, "driver": v.driver_version, "nodes": [n.path for n in g.nodes],
                           **({"parent": g.parent, "slice": g.slice, "profile": g.profile} if g.parent else {})}
                          for v, g in gpus], indent=2))
        return 0
    if not gpus:
        print(f"no GPUs found under host root {inventory.root}")
        return 0
    print(f"{'VENDOR':7} {'IDX':>3}  {'UUID':42} {'PCI':13} {'DRIVER':10} {'MODEL / ARCH':24} NODES")
    for v, g in gpus:
        model = " ".join(dict.fromkeys(x for x in (g.model, g.arch) if x))
        nodes = " ".join(n.path for n in g.nodes)
        index = f"{g.slice:>3}" if g in v.slices else f"{g.index:>3}"  # a MIG device: <gpu>:<mig>, under its GPU
        model = f"{g.profile} {g.place}".strip() if g in v.slices else f"{model} {g.place}".strip()
        print(f"{g.vendor:7} {index}  {g.uuid:42} {g.pci:13} {v.driver_version or '':10} {model:24} {nodes}")
    return 0


def configure(args: argparse.Namespace) -> int:
    """`gpuhook configure ENGINE`: register gpuhook with an engine, or revert. Writes its config."""
    import os

    from gpuhook.configfile import config_path
    from gpuhook.engines.files import configure, configure_drop_in, revert, revert_drop_in
    from gpuhook.engines.table import named
    from gpuhook.engines.wanted import Wanted

    engine = named(args.engine)
    path = args.config_path or engine.config_path
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    drop_in = _drop_in(engine, path, args.drop_in, args.in_place)
    if args.revert:
        outcome = revert_drop_in(engine.name, path, drop_in, args.dry_run) if drop_in else \
            revert(engine.name, path, args.dry_run)
    else:
        cdi = _cdi(engine, args.cdi)
        from gpuhook.proc import beside

        hook = beside(here, "gpuhook-hook", os.path.join(here, "gpuhook"))  # the hook's native front end, else gpuhook
        wanted = Wanted(shim=os.path.abspath(args.runtime_path or os.path.join(here, "gpuhook-runtime")), gpuhook=hook,
                        config=config_path()[0], set_default=args.set_default, cdi=cdi)
        outcome = configure_drop_in(engine.name, path, drop_in, wanted, args.dry_run) if drop_in else \
            configure(engine.name, path, wanted, args.dry_run)
    if outcome.diff:
        print(outcome.diff, end="")
    print(("changed " + outcome.path + ": " if outcome.changed else "") + outcome.next_step)
    return 0


def _drop_in(engine: Engine, path: str, asked: str | None, in_place: bool) -> str:
    """The drop-in configure writes for `engine` whose main config is `path`: `asked`, else the engine's default
    beside `path`; "" for --in-place, for an engine without drop-ins, and where one does not fit the file (a k3s or
    RKE2 template). EngineConfigError for --drop-in with --in-place or for an engine that takes none. Reads `path`."""
    from gpuhook.errors import EngineConfigError

    how = engine.drop_in
    if asked and in_place:
        raise EngineConfigError(f"--drop-in {asked} with --in-place, which edits {path} itself: give one of the two")
    if asked and how is None:
        raise EngineConfigError(f"--drop-in {asked}: {engine.label} takes no drop-in from gpuhook (it writes "
                                f"{path}): run it without --drop-in")
    if in_place or how is None:
        return ""
    try:
        with open(path) as f:
            text = f.read(1 << 20)
    except OSError:
        text = ""
    if not how.fits(path, text):
        return ""
    return asked or how.default_path(path)


def _cdi(engine: Engine, asked: bool) -> bool:
    """Whether configure turns CDI on in `engine`'s config: where its switch is automatic, on --cdi or where the
    installed release reads CDI specs; else on --cdi, refused (EngineConfigError) where the installed release reads
    none. Runs `PROGRAM --version` when that decides; an engine that is not installed is not judged (the file may be
    for another host's)."""
    switch = engine.cdi
    if switch is None or not switch.setting:
        return asked  # nothing to write: the engine reads CDI specs unasked, or never
    if asked == switch.automatic:  # --cdi where it is automatic, or no --cdi where it waits for one
        return asked
    release = _installed_reader(engine)
    if switch.automatic:
        return release is not None and bool(release.library)
    if release is not None and not release.library:
        from gpuhook.engines.engine import cdi_since
        from gpuhook.errors import EngineConfigError

        raise EngineConfigError(f"--cdi: {release.label} reads no CDI specs ({switch.setting} needs {engine.label} "
                                f"{cdi_since(engine)} or later); nothing was changed: drop --cdi (--runtime gpuhook "
                                "needs no CDI)")
    return True


def _installed_reader(engine: Engine) -> Reader | None:
    """The installed release of `engine` as a CDI reader; None where its program is not there or names no release.
    Runs `PROGRAM --version`."""
    from gpuhook.apply.cdi_readers import version_in
    from gpuhook.errors import ProcessError
    from gpuhook.proc import run

    try:
        version = version_in(run([engine.program, "--version"], timeout=10))
    except ProcessError:
        return None
    return engine.reader(version) if version else None


def _write(path: str, text: str) -> None:
    """Write an output file the admin named; GpuhookError naming it when that fails."""
    from gpuhook.atomic import write_text

    try:
        write_text(path, text, make_dirs=True)
    except OSError as e:
        raise GpuhookError(f"cannot write {path}: {e.strerror or e}") from e


def labels(args: argparse.Namespace) -> int:
    """`gpuhook labels`: the node's facts as an NFD feature file (or stdout). Writes a file."""
    from gpuhook.config import load
    from gpuhook.host.root import Root
    from gpuhook.vendors.discover import discover
    from gpuhook.vendors.labels import DEFAULT_PATH, labels, render

    config = load()
    root = Root(config.host_root)
    k8s = config.kubernetes
    text = render(labels(discover(root), root, k8s.replicas, k8s.mig_strategy, k8s.sharing))
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    path = args.output or DEFAULT_PATH
    _write(path, text)
    print(f"wrote {path} ({text.count(chr(10))} labels)")
    return 0
