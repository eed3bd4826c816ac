"""gpuhook: the admin command line (simulate, list, demo, version)."""

from __future__ import annotations

import sys

from gpuhook import __version__
from gpuhook.errors import GpuhookError

TYPE_CHECKING = False  # runc starts `gpuhook hook` before and after every hooked container: keep it light
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `gpuhook`; maps GpuhookError to one stderr line and exit status 1."""
    args_in = sys.argv[1:] if argv is None else list(argv)
    if args_in[:1] == ["hook"] and len(args_in) <= 2:  # the hot path, run around hooked containers: no argparse
        from gpuhook.hook import STAGES

        if all(a in STAGES for a in args_in[1:]):
            return _hook(args_in[1] if len(args_in) == 2 else None, [])
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
        return code
    except GpuhookError as e:
        print(f"gpuhook: {e}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    import argparse

    from gpuhook.hook import STAGES

    p = argparse.ArgumentParser(prog="gpuhook", description="GPUs for containers, without privileges.")
    sub = p.add_subparsers(metavar="COMMAND")
    s = sub.add_parser("simulate", help="build a fake GPU host tree for testing on machines without GPUs")
    s.add_argument("--root", required=True, help="directory to build the fake host in (new or empty)")
    s.add_argument("--nvidia", type=int, default=0, metavar="N", help="number of NVIDIA GPUs")
    s.add_argument("--amd", type=int, default=0, metavar="M", help="number of AMD GPUs")
    s.add_argument("--nvidia-driver", default="550.54.15", help="NVIDIA driver version to report")
    s.add_argument("--cuda-version", type=int, default=12040, help="CUDA version the stub libcuda reports")
    s.add_argument("--amd-driver", default="6.7.0", help="amdgpu DKMS version; 'in-tree' for none")
    s.set_defaults(func=_simulate)
    ls = sub.add_parser("list", help="list the host's GPUs as gpuhook sees them")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.add_argument("--host-root", help="override host_root from the config")
    ls.set_defaults(func=_list)
    d = sub.add_parser("demo", help="run a container through gpuhook-runtime (a simulated host if no GPUs)")
    d.add_argument("--work-dir", default="/run/gpuhook/demo", help="where the demo bundle and fake host go")
    d.set_defaults(func=_demo)
    h = sub.add_parser("hook", help="the OCI hook (runc, Podman/CRI-O hooks.d); reads the state on stdin")
    h.add_argument("stage", nargs="?", choices=STAGES,
                   help="hook stage; detected from the state's status when omitted")
    h.add_argument("--folder", action="append", default=[], help="update-ldcache: a library folder to list")
    h.set_defaults(func=lambda a: _hook(a.stage, a.folder))
    cdi = sub.add_parser("cdi", help="Container Device Interface specs for the host's GPUs")
    cdi_sub = cdi.add_subparsers(metavar="ACTION")
    gen = cdi_sub.add_parser("generate", help="write CDI specs (nvidia.com/gpu, amd.com/gpu)")
    gen.add_argument("--vendor", choices=("nvidia", "amd", "all"), default="all")
    out = gen.add_mutually_exclusive_group()
    out.add_argument("--output", help="one file (with --vendor nvidia or amd); - for stdout")
    out.add_argument("--output-dir", default="/etc/cdi", help="one gpuhook-<vendor> file per vendor here")
    gen.add_argument("--format", choices=("json", "yaml"), default="json")
    gen.add_argument("--capabilities", default="compute,utility", help="NVIDIA driver capabilities to mount")
    gen.add_argument("--cdi-version", help="write this cdiVersion (older clients: drops what it cannot carry)")
    gen.set_defaults(func=_cdi_generate)
    lst = cdi_sub.add_parser("list", help="the CDI devices gpuhook's specs offer")
    lst.add_argument("--spec-dir", action="append", help="where specs are (default /etc/cdi and /var/run/cdi)")
    lst.set_defaults(func=_cdi_list)
    c = sub.add_parser("configure", help="register gpuhook with a container engine")
    c.add_argument("engine", choices=("docker", "containerd", "crio", "podman"))
    c.add_argument("--config-path", help="the engine's config file (default: its usual place)")
    c.add_argument("--set-default", action="store_true", help="make gpuhook the engine's default runtime")
    c.add_argument("--cdi", action="store_true", help="docker: also turn on features.cdi")
    c.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    c.add_argument("--revert", action="store_true", help="put back the file as it was before gpuhook changed it")
    c.add_argument("--runtime-path", help="the shim to register (default: gpuhook-runtime next to this gpuhook)")
    c.set_defaults(func=_configure)
    lab = sub.add_parser("labels", help="write node facts as a Node Feature Discovery feature file")
    lab.add_argument("--output", help="the feature file (default: NFD's features.d/gpuhook); - for stdout")
    lab.set_defaults(func=_labels)
    g = sub.add_parser("gc", help="release tuning held by containers that are gone, and restore the originals")
    g.set_defaults(func=_gc)
    st = sub.add_parser("status", help="show the tuning ledger: GPU, setting, original, current, holders")
    st.add_argument("--ledger", help="read this ledger file (e.g. ledger.json.prev) instead of state_dir's")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(func=_status)
    doc = sub.add_parser("doctor", help="check the host and the GPU containers gpuhook set up (exit 0 ok, 1 warnings, "
                         "2 failures)")
    doc.set_defaults(func=_doctor)
    v = sub.add_parser("version", help="print the version")
    v.set_defaults(func=lambda _a: print(f"gpuhook {__version__}") or 0)
    return p


def _simulate(args: argparse.Namespace) -> int:
    from gpuhook.simulate import HostSpec, build_host

    amd_driver = None if args.amd_driver == "in-tree" else args.amd_driver
    root = build_host(args.root, HostSpec(nvidia=args.nvidia, amd=args.amd, nvidia_driver=args.nvidia_driver,
                                          cuda_version=args.cuda_version, amd_driver=amd_driver))
    print(f"simulated host with {args.nvidia} NVIDIA and {args.amd} AMD GPUs at {root}")
    print(f"use it with: host_root = \"{root}\" in the gpuhook config")
    return 0


def _list(args: argparse.Namespace) -> int:
    import json

    from gpuhook.config import load
    from gpuhook.discover import discover
    from gpuhook.root import Root

    inventory = discover(Root(args.host_root or load().host_root))
    gpus = [(v, g) for v in inventory.vendors for g in v.gpus]
    if args.json:
        print(json.dumps([{"vendor": g.vendor, "index": g.index, "uuid": g.uuid, "pci": g.pci, "model": g.model,
                           "arch": g.arch, "driver": v.driver_version, "nodes": [n.path for n in g.nodes]}
                          for v, g in gpus], indent=2))
        return 0
    if not gpus:
        print(f"no GPUs found under host root {inventory.root}")
        return 0
    print(f"{'VENDOR':7} {'IDX':>3}  {'UUID':42} {'PCI':13} {'DRIVER':10} {'MODEL / ARCH':24} NODES")
    for v, g in gpus:
        model = " ".join(dict.fromkeys(x for x in (g.model, g.arch) if x))
        nodes = " ".join(n.path for n in g.nodes)
        print(f"{g.vendor:7} {g.index:>3}  {g.uuid:42} {g.pci:13} {v.driver_version or '':10} {model:24} {nodes}")
    return 0


def _configure(args: argparse.Namespace) -> int:
    import os

    from gpuhook.configfile import config_path
    from gpuhook.engines import DEFAULT_PATHS, Wanted
    from gpuhook.engines.files import configure, revert

    path = args.config_path or DEFAULT_PATHS[args.engine]
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    if args.revert:
        outcome = revert(args.engine, path, args.dry_run)
    else:
        wanted = Wanted(os.path.abspath(args.runtime_path or os.path.join(here, "gpuhook-runtime")),
                        os.path.join(here, "gpuhook"), config_path()[0], args.set_default, args.cdi)
        outcome = configure(args.engine, path, wanted, args.dry_run)
    if outcome.diff:
        print(outcome.diff, end="")
    print(("changed " + outcome.path + ": " if outcome.changed else "") + outcome.next_step)
    return 0


def _labels(args: argparse.Namespace) -> int:

    from gpuhook.atomicfile import write_text
    from gpuhook.config import load
    from gpuhook.discover import discover
    from gpuhook.labels import DEFAULT_PATH, labels, render
    from gpuhook.root import Root

    root = Root(load().host_root)
    text = render(labels(discover(root), root))
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    path = args.output or DEFAULT_PATH
    write_text(path, text, make_dirs=True)
    print(f"wrote {path} ({text.count(chr(10))} labels)")
    return 0


def _gc(args: argparse.Namespace) -> int:
    from gpuhook import tune
    from gpuhook.backends import BackendSet
    from gpuhook.config import load
    from gpuhook.discover import discover
    from gpuhook.root import Root

    config = load()
    root = Root(config.host_root)
    with BackendSet(root, discover(root)) as backends:
        problems = tune.sweep(config.state_dir, backends)
    for p in problems:
        print(f"gpuhook gc: {p}", file=sys.stderr)
    print("gc: done" if not problems else f"gc: {len(problems)} settings could not be restored (kept for the next gc)")
    return 1 if problems else 0


def _status(args: argparse.Namespace) -> int:
    import json
    import os

    from gpuhook import ledger, tune
    from gpuhook.config import load

    path = args.ledger or os.path.join(load().state_dir, ledger.NAME)
    state = ledger.load(path)
    rows = [{"gpu": e["gpu"], "index": e["index"], "setting": e["name"], "original": e["original"],
             "current": e["value"], "holders": [h["id"] + ("" if tune.alive(h) else " (gone)") for h in e["holders"]]}
            for e in sorted(state["settings"].values(), key=lambda e: e["seq"])]
    leases = {g: h["id"] + ("" if tune.alive(h) else " (gone)") for g, h in state["leases"].items()}
    if args.json:
        print(json.dumps({"settings": rows, "leases": leases}, indent=2))
        return 0
    if not rows and not leases:
        print("no GPU tuning is held")
    if rows:
        print(f"{'GPU':44} {'SETTING':12} {'ORIGINAL':12} {'CURRENT':12} HOLDERS")
        for r in rows:
            print(f"{r['gpu']:44} {r['setting']:12} {r['original']:12} {r['current']:12} {', '.join(r['holders'])}")
    for gpu, holder in leases.items():
        print(f"exclusive: {gpu} held by {holder}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from gpuhook.config import load
    from gpuhook.doctor import run_checks

    findings = run_checks(load())
    for f in findings:
        print(f"{f.level:5} {f.what}" + (f"\n      fix: {f.fix}" if f.fix else ""))
    levels = {f.level for f in findings}
    return 2 if "fail" in levels else 1 if "warn" in levels else 0  # as monitoring checks report


def _hook(stage: str | None, folders: list[str]) -> int:
    from gpuhook.hook import main as hook_main

    return hook_main(stage, folders)


def _cdi_generate(args: argparse.Namespace) -> int:
    import json
    import os

    from gpuhook.atomicfile import write_text
    from gpuhook.cdi import CdiError, build, to_yaml
    from gpuhook.config import load
    from gpuhook.configfile import config_path
    from gpuhook.discover import discover
    from gpuhook.request import CAPABILITIES
    from gpuhook.root import Root
    from gpuhook.vendors import all_vendors

    config = load()
    caps = frozenset(CAPABILITIES) if args.capabilities == "all" else frozenset(args.capabilities.split(","))
    inventory = discover(Root(config.host_root))
    wanted = [v for v in all_vendors() if args.vendor in ("all", v.NAME) and inventory.vendor(v.NAME)]
    if not wanted:
        raise CdiError(f"no {'GPU' if args.vendor == 'all' else args.vendor} driver under {config.host_root}")
    if args.output and len(wanted) > 1:
        raise CdiError("--output writes one spec: add --vendor nvidia or --vendor amd (or use --output-dir)")
    gpuhook_bin = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "gpuhook")
    for vendor in wanted:
        spec, warnings = build(vendor, inventory.vendor(vendor.NAME), inventory.root, caps, gpuhook_bin,  # type: ignore[arg-type]
                               config_path()[0], args.cdi_version)
        for w in warnings:
            print(f"gpuhook cdi: warning: {w}", file=sys.stderr)
        text = to_yaml(spec) + "\n" if args.format == "yaml" else json.dumps(spec, indent=2) + "\n"
        if args.output == "-":
            sys.stdout.write(text)
            continue
        path = args.output or os.path.join(args.output_dir, f"gpuhook-{vendor.NAME}.{args.format}")
        write_text(path, text, make_dirs=True)
        print(f"wrote {path}: {spec['kind']} with {len(spec['devices'])} devices (cdiVersion {spec['cdiVersion']})")
    return 0


def _cdi_list(args: argparse.Namespace) -> int:
    import glob
    import json
    import os

    found = 0
    for directory in args.spec_dir or ["/etc/cdi", "/var/run/cdi"]:
        for path in sorted(glob.glob(os.path.join(directory, "gpuhook-*.json"))):
            with open(path) as f:
                spec = json.load(f)
            for device in spec.get("devices", []):
                print(f"{spec['kind']}={device['name']}")
                found += 1
        for path in sorted(glob.glob(os.path.join(directory, "gpuhook-*.yaml"))):
            print(f"{path}: (YAML spec; generate JSON to list its devices here)")
    if not found:
        print("no gpuhook CDI specs found: run `gpuhook cdi generate`")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gpuhook.demo import run_demo

    return run_demo(args.work_dir)
