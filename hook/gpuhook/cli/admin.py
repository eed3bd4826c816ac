"""gpuhook: the admin command line (simulate, list, demo, cdi, configure, labels, device-plugin, exporter, warm, gc,
status, doctor, version)
and the `hook` entry runc calls. Every command reports a failure as one line on stderr and exit status 1."""

from __future__ import annotations

import os
import sys

from gpuhook import __version__
from gpuhook.errors import GpuhookError, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `gpuhook`; maps GpuhookError, OSError and ValueError to one stderr line and exit status 1."""
    args_in = sys.argv[1:] if argv is None else list(argv)
    if args_in[:1] == ["hook"]:  # the hot path, run around hooked containers: no argparse
        from gpuhook.cli.hook import parse

        hook_args = parse(args_in)
        if hook_args is not None:
            stage, folders, mounts, claimed = hook_args
            return _hook(stage, folders, list(mounts), claimed)
    if args_in[:1] == ["device-plugin"]:  # a daemon per node: argparse (and the shutil, bz2, lzma it loads) costs RSS
        kubelet_dir = _kubelet_dir(args_in[1:])
        if kubelet_dir is not None:
            return _reported(lambda: _serve_plugin(kubelet_dir))
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return _reported(lambda: args.func(args))


def _reported(command: Callable[[], int]) -> int:
    """Run a command; GpuhookError, OSError and ValueError become one stderr line and exit status 1."""
    try:
        return command()
    except (GpuhookError, OSError, ValueError) as e:
        print(f"gpuhook: {_one_line(e)}", file=sys.stderr)
        return 1


def _kubelet_dir(rest: list[str]) -> str | None:
    """`[--kubelet-dir DIR]` read by hand ("" when not given); None for anything else (argparse then says)."""
    if not rest:
        return ""
    if len(rest) == 1 and rest[0].startswith("--kubelet-dir=") and len(rest[0]) > 14:
        return rest[0][14:]
    if len(rest) == 2 and rest[0] == "--kubelet-dir" and rest[1] and not rest[1].startswith("-"):
        return rest[1]
    return None


def _one_line(e: BaseException) -> str:
    """An error as one line: OSError's own text names the file, and the strerror says what went wrong."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return one_line(f"{e.filename}: {e.strerror}")
    return one_line(e) or type(e).__name__


def _parser() -> argparse.ArgumentParser:
    import argparse

    from gpuhook.cli.hook import STAGES
    from gpuhook.engines import table as engines
    from gpuhook.vendors.registry import names

    p = argparse.ArgumentParser(prog="gpuhook", description="GPUs for containers, without privileges.")
    p.add_argument("--version", action="version", version=f"gpuhook {__version__}")
    sub = p.add_subparsers(metavar="COMMAND")
    s = sub.add_parser("simulate", help="build a fake GPU host tree for testing on machines without GPUs")
    s.add_argument("--root", required=True, help="directory to build the fake host in (new or empty)")
    s.add_argument("--replace", action="store_true", help="rebuild a simulated host already at --root")
    s.add_argument("--nvidia", type=_gpu_count, default=0, metavar="N", help="number of NVIDIA GPUs (0-64)")
    s.add_argument("--amd", type=_gpu_count, default=0, metavar="M", help="number of AMD GPUs (0-64)")
    s.add_argument("--hygon", type=_gpu_count, default=0, metavar="H",
                   help="number of Hygon DCUs (0-64; a host has AMD GPUs or Hygon DCUs, not both)")
    s.add_argument("--hygon-driver", default="6.2.26", help="Hygon DCU driver version to report")
    s.add_argument("--nvidia-driver", default="550.54.15", help="NVIDIA driver version to report")
    s.add_argument("--cuda-version", type=int, default=12040, help="CUDA version the stub libcuda reports")
    s.add_argument("--amd-driver", default="6.7.0", help="amdgpu DKMS version; 'in-tree' for none")
    s.add_argument("--mig", nargs="+", default=[], metavar="PROFILE",
                   help="MIG devices (1g.10gb, 3g.40gb, ...) on every NVIDIA GPU (--mig-gpus: the first K only)")
    s.add_argument("--mig-gpus", type=int, metavar="K", help="how many NVIDIA GPUs are in MIG mode")
    s.add_argument("--partitions", default="SPX", metavar="MODE", help="AMD compute partitions: SPX, DPX, QPX, CPX")
    s.add_argument("--fans", type=int, choices=range(5), default=1, metavar="F",
                   help="fans on each GPU, 0-4 (0: passively cooled, as SXM and OAM boards are)")
    s.add_argument("--numa-nodes", type=int, choices=range(1, 9), default=1, metavar="N",
                   help="NUMA nodes, 1-8: each vendor's GPUs spread evenly over them in sysfs (numa_node; 1: the "
                        "kernel's -1, as on a one-node host)")
    s.set_defaults(func=lambda a: _host().simulate(a))
    ls = sub.add_parser("list", help="list the host's GPUs as gpuhook sees them")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.add_argument("--host-root", help="override host_root from the config")
    ls.set_defaults(func=lambda a: _host().list_gpus(a))
    d = sub.add_parser("demo", help="run a container through gpuhook-runtime (a simulated host if no GPUs)")
    d.add_argument("--work-dir", default="/run/gpuhook/demo", help="where the demo bundle and fake host go")
    d.set_defaults(func=_demo)
    h = sub.add_parser("hook", help="the OCI hook (runc, Podman/CRI-O hooks.d); reads the state on stdin")
    h.add_argument("stage", nargs="?", choices=STAGES,
                   help="hook stage; detected from the state's status when omitted")
    h.add_argument("--folder", action="append", default=[], help="update-ldcache: a library folder to list")
    h.add_argument("--mount", nargs=2, action="append", default=[], metavar=("SOURCE", "DESTINATION"),
                   help="update-ldcache: a library mount (file or directory) the refresh binds back")
    h.set_defaults(func=lambda a: _hook(a.stage, a.folder, [tuple(m) for m in a.mount]))
    cdi = sub.add_parser("cdi", help="Container Device Interface specs for the host's GPUs")
    cdi_sub = cdi.add_subparsers(metavar="ACTION")
    gen = cdi_sub.add_parser("generate", help="write CDI specs (nvidia.com/gpu, amd.com/gpu, ...)")
    gen.add_argument("--vendor", choices=(*names(), "all"), default="all")
    out = gen.add_mutually_exclusive_group()
    out.add_argument("--output", help="one file (with --vendor, where the host has several vendors); - for stdout")
    out.add_argument("--output-dir", default="/etc/cdi", help="one gpuhook-<vendor> file per vendor here")
    gen.add_argument("--format", choices=("json", "yaml"), default="json")
    gen.add_argument("--capabilities", default="compute,utility", help="NVIDIA driver capabilities to mount")
    gen.add_argument("--cdi-version", help="write this cdiVersion (default: the lowest the spec needs, capped at the "
                     "highest every installed CDI consumer parses; drops what it cannot carry and says so)")
    gen.add_argument("--if-changed", action="store_true", help="leave a spec file alone (same mtime) when what it "
                     "holds is what would be written: driver files and version, GPUs, nodes (the systemd unit's mode)")
    engine_help = ("a CDI consumer's release instead of the installed ones (ENGINE: "
                   f"{', '.join(e.name for e in engines.cdi_consumers())}; repeat it; none for no consumer)")
    gen.add_argument("--engine", action="append", metavar="ENGINE=VERSION", help=engine_help)
    gen.set_defaults(func=lambda a: _cdi().generate(a))
    val = cdi_sub.add_parser("validate", help="parse CDI specs as the installed engines do and print the errors they "
                             "hide (unknown fields, versions, kinds, names, missing host files, conflicts)")
    val.add_argument("files", nargs="*", metavar="FILE", help="spec files (default: every spec in /etc/cdi and "
                     "/var/run/cdi)")
    val.add_argument("--engine", action="append", metavar="ENGINE=VERSION", help=engine_help)
    val.set_defaults(func=lambda a: _cdi_validate().validate(a))
    lst = cdi_sub.add_parser("list", help="the CDI devices gpuhook's specs offer")
    lst.add_argument("--spec-dir", action="append", help="where specs are (default /etc/cdi and /var/run/cdi)")
    lst.set_defaults(func=lambda a: _cdi().list_specs(a))
    c = sub.add_parser("configure", help="register gpuhook with a container engine")
    c.add_argument("engine", choices=engines.names())
    c.add_argument("--config-path", help="the engine's config file (default: its usual place)")
    c.add_argument("--set-default", action="store_true", help="make gpuhook the engine's default runtime")
    c.add_argument("--cdi", action="store_true", help=f"also turn on CDI ({engines.cdi_switches()})")
    c.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    c.add_argument("--revert", action="store_true", help="put back the file as it was before gpuhook changed it "
                   "(containerd: remove gpuhook's drop-in and the imports line gpuhook added)")
    c.add_argument("--runtime-path", help="the shim to register (default: gpuhook-runtime next to this gpuhook)")
    c.add_argument("--drop-in", help="containerd: gpuhook's drop-in, which the config then imports (default: "
                   "conf.d/99-gpuhook.toml beside the config)")
    c.add_argument("--in-place", action="store_true", help="containerd: edit the config itself instead of writing a "
                   "drop-in (k3s and RKE2 templates always are)")
    c.set_defaults(func=lambda a: _host().configure(a))
    lab = sub.add_parser("labels", help="write node facts as a Node Feature Discovery feature file")
    lab.add_argument("--output", help="the feature file (default: NFD's features.d/gpuhook); - for stdout")
    lab.set_defaults(func=lambda a: _host().labels(a))
    dp = sub.add_parser("device-plugin", help="the kubelet device plugin (one resource per vendor; run by a "
                        "DaemonSet)")
    dp.add_argument("--kubelet-dir", help="the kubelet's device plugin directory (default: [kubernetes] "
                    "kubelet_dir, /var/lib/kubelet/device-plugins)")
    dp.set_defaults(func=_device_plugin)
    dra = sub.add_parser("dra-driver", help="the Kubernetes DRA driver (gpu.gpuhook.dev): ResourceSlices for the "
                         "node's GPUs, MIG devices and partitions, and the kubelet's node plugin (run by a DaemonSet)")
    dra.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""),
                     help="this node's name in the cluster (default: env NODE_NAME)")
    dra.add_argument("--kubeconfig", help="a JSON kubeconfig (default: the pod's service account)")
    dra.add_argument("--service-account", default="",
                     help="the directory of the service account's token and CA (default: the pod's own, "
                          "/var/run/secrets/kubernetes.io/serviceaccount)")
    dra.add_argument("--driver-name", default="gpu.gpuhook.dev", help="the DRA driver's name (default: "
                     "gpu.gpuhook.dev; DeviceClasses select it)")
    dra.add_argument("--kubelet-plugins-dir", default="/var/lib/kubelet/plugins",
                     help="where the driver's socket goes, in <driver name>/dra.sock")
    dra.add_argument("--kubelet-registry-dir", default="/var/lib/kubelet/plugins_registry",
                     help="the kubelet's plugin registry (default: /var/lib/kubelet/plugins_registry)")
    dra.add_argument("--cdi-dir", default="/var/run/cdi", help="where prepared claims' CDI specs go")
    dra.add_argument("--node-root", default="/",
                     help="where the node's / is mounted, for a driver in a container of its own (default: /, on "
                          "the node): the CDI specs name the node's paths, host_root without this prefix")
    dra.add_argument("--node-bin-dir", default="",
                     help="the node's directory of this same gpuhook build, whose hooks the CDI specs run (default: "
                          "this gpuhook's own directory)")
    dra.add_argument("--partitions", choices=("static", "dynamic"), default=None,
                     help="MIG devices and AMD partitions made when claims are prepared (dynamic: each GPU "
                          "published as every partition it can take, over shared counters) or as laid out (static); "
                          "default: the config's [kubernetes] partitions")
    dra.set_defaults(func=_dra_driver)
    part = sub.add_parser("partition", help="GPU partition layouts (NVIDIA MIG, AMD compute and memory partitions) "
                          "from a file")
    part_sub = part.add_subparsers(dest="action", required=True, metavar="ACTION")
    ap = part_sub.add_parser("apply", help="put the GPUs in the file's layouts (refused while containers use them)")
    ap.add_argument("file", help="the layouts: TOML ([[nvidia]] gpus, mig; [[amd]] gpus, compute, memory), or JSON")
    ap.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    ap.add_argument("--labels", metavar="PATH", help="the node feature file to write anew (default: NFD's, where it "
                    "exists)")
    ap.set_defaults(func=lambda a: _partition().apply(a))
    up = sub.add_parser("upgrade", help="before a driver upgrade: what holds the GPUs, and draining them off")
    up_sub = up.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, helps in (("plan", "the GPU containers, processes and (on a node) pods, and the budgets that would "
                                 "block their eviction"),
                        ("drain", "cordon the node and evict its GPU pods through the Eviction API, budgets "
                                  "honoured (--dry-run unless --no-dry-run)")):
        a = up_sub.add_parser(name, help=helps)
        a.add_argument("--kubeconfig", help="a JSON kubeconfig (default: the pod's service account, where run in a "
                       "pod; neither: this host alone)")
        a.add_argument("--node", default=os.environ.get("NODE_NAME", ""), help="the node (default: env NODE_NAME)")
        a.add_argument("--resource", action="append", metavar="NAME", help="more extended resources that are GPUs "
                       "(default: [kubernetes] resources)")
        a.add_argument("--dra-driver", action="append", default=["gpu.gpuhook.dev"], metavar="NAME",
                       help="DRA drivers whose claims are GPUs (default: gpu.gpuhook.dev)")
        if name == "plan":
            a.add_argument("--json", action="store_true", help="machine-readable output")
            a.set_defaults(func=lambda a: _upgrade().plan(a))
        else:
            a.add_argument("--dry-run", action=argparse.BooleanOptionalAction, default=True,
                           help="say what would be done (the default); --no-dry-run does it")
            a.add_argument("--timeout", type=float, default=300.0, help="seconds to keep retrying evictions a "
                           "budget refuses and to wait for the pods to go (default 300)")
            a.set_defaults(func=lambda a: _upgrade().drain(a))
    ex = sub.add_parser("exporter", help="Prometheus metrics: the GPUs, the containers (and pods) holding them, "
                        "tuning, leases, health, telemetry (run by a DaemonSet or a systemd unit)")
    ex.add_argument("--listen", help="host:port to serve /metrics on (default: [exporter] listen, 127.0.0.1:9835)")
    ex.add_argument("--textfile", metavar="DIR", help="write DIR/gpuhook.prom for node_exporter's textfile "
                    "collector every [exporter] interval instead of serving HTTP (default: [exporter] textfile_dir)")
    ex.add_argument("--once", action="store_true", help="one scrape: write the textfile once, or print the metrics")
    ex.add_argument("--node-root", default="/",
                    help="where the node's / is mounted, for an exporter in a container of its own (default: /, on "
                         "the node): the engine's state the runtime's records name is read under it")
    ex.set_defaults(func=_exporter)
    warm = sub.add_parser("warm", help="the optional warm helper: GPU containers and hooks start without a Python "
                          "start of their own (a root daemon; without it they take the direct path)")
    warm.add_argument("--socket", default="", help="the socket (default: $GPUHOOK_WARM_SOCKET, else "
                      "/run/gpuhook/warm.sock, where gpuhook-runtime and gpuhook-hook look)")
    warm.set_defaults(func=lambda a: _warm(a.socket))
    g = sub.add_parser("gc", help="release tuning held by containers that are gone, and restore the originals")
    g.set_defaults(func=lambda a: _tuning().gc(a))
    st = sub.add_parser("status", help="show the tuning ledger: GPU, setting, original, current, holders")
    st.add_argument("--ledger", help="read this ledger file (e.g. ledger.json.prev) instead of state_dir's")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(func=lambda a: _tuning().status(a))
    cfg = sub.add_parser("config", help="show, set or print the default gpuhook config")
    cfg_sub = cfg.add_subparsers(metavar="ACTION")
    cfg_sub.add_parser("show", help="the config in effect (its file over the defaults)").set_defaults(
        func=lambda a: _config().show(a))
    cset = cfg_sub.add_parser("set", help="set keys (policy.requests=allocated), checked, written atomically")
    cset.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    cset.add_argument("--config", help="the file to change (default: $GPUHOOK_CONFIG, else /etc/gpuhook/config.toml)")
    cset.set_defaults(func=lambda a: _config().set_keys(a))
    cfg_sub.add_parser("default", help="the shipped default config").set_defaults(func=lambda a: _config().default(a))
    doc = sub.add_parser("doctor", help="check the host and the GPU containers gpuhook set up (exit 0 ok, 1 warnings, "
                         "2 failures)")
    doc.set_defaults(func=_doctor)
    sy = sub.add_parser("system", help="host set-up the GPU containers need")
    sy_sub = sy.add_subparsers(metavar="ACTION")
    dcl = sy_sub.add_parser("create-dev-char-links", help="make /dev/char/MAJOR:MINOR links to the GPUs' nodes (as "
                            "udev does; systemd's cgroup driver needs them to keep GPUs across daemon-reload)")
    dcl.add_argument("--dry-run", action="store_true", help="say what would be made, make nothing")
    dcl.set_defaults(func=_dev_char_links)
    v = sub.add_parser("version", help="print the version")
    v.set_defaults(func=lambda _a: print(f"gpuhook {__version__}") or 0)
    return p


def _gpu_count(text: str) -> int:
    """A simulated host's GPU count: 0-64 (argparse says "invalid _gpu_count value" otherwise)."""
    if not text.isdigit() or int(text) > 64:
        import argparse

        raise argparse.ArgumentTypeError(f"{text!r} is not a GPU count from 0 to 64")
    return int(text)


def _device_plugin(args: argparse.Namespace) -> int:
    return _serve_plugin(args.kubelet_dir or "")


def _serve_plugin(kubelet_dir: str) -> int:
    from gpuhook.config import load
    from gpuhook.kubernetes.device_plugin.manager import run

    config = load()
    return run(config, kubelet_dir or config.kubernetes.kubelet_dir)


def _dra_driver(args: argparse.Namespace) -> int:
    from gpuhook.config import load
    from gpuhook.errors import KubernetesError
    from gpuhook.kubernetes import apiserver
    from gpuhook.kubernetes.dra.loop import run

    if not args.node_name:
        raise KubernetesError("dra-driver needs this node's name: --node-name, or env NODE_NAME (a DaemonSet sets "
                              "it from spec.nodeName)")
    if args.kubeconfig:
        api = apiserver.from_kubeconfig(args.kubeconfig)
    else:
        api = apiserver.in_cluster(args.service_account or apiserver.SERVICE_ACCOUNT)
    config = load()
    if args.partitions:  # the chart's dra.partitions
        from gpuhook.frozen import replace

        config = replace(config, kubernetes=replace(config.kubernetes, partitions=args.partitions))
    return run(config, api, args.node_name, args.driver_name, args.kubelet_plugins_dir, args.kubelet_registry_dir,
               args.cdi_dir, args.node_root, args.node_bin_dir)


def _warm(socket_path: str) -> int:
    from gpuhook.cli.warm import serve

    return serve(socket_path)


def _exporter(args: argparse.Namespace) -> int:
    from gpuhook.config import load
    from gpuhook.metrics.exporter import run

    return run(load(), args.listen, args.textfile, args.once, args.node_root)


def _doctor(args: argparse.Namespace) -> int:
    from gpuhook.cli.doctor import run_checks
    from gpuhook.config import load

    try:
        config = load()
    except (GpuhookError, OSError, ValueError) as e:  # nothing else can be checked without it: a failure
        print(f"fail  {_one_line(e)}\n      fix: correct the config (gpuhook config show; gpuhook config default "
              "prints one that is valid)")
        return 2
    findings = run_checks(config)
    for f in findings:
        print(f"{f.level:5} {one_line(f.what)}" + (f"\n      fix: {one_line(f.fix)}" if f.fix else ""))
    levels = {f.level for f in findings}
    return 2 if "fail" in levels else 1 if "warn" in levels else 0  # as monitoring checks report


def _dev_char_links(args: argparse.Namespace) -> int:
    from gpuhook.cli.system_commands import create_dev_char_links

    return create_dev_char_links(args.dry_run)


def _hook(stage: str | None, folders: list[str], mounts: list[tuple[str, ...]], claimed: bool = False) -> int:
    from gpuhook.cli.hook import main as hook_main

    return hook_main(stage, folders, mounts=[(m[0], m[1]) for m in mounts] or None,  # None: a hook naming none
                     claimed=claimed)


def _demo(args: argparse.Namespace) -> int:
    from gpuhook.cli.demo import run_demo

    return run_demo(args.work_dir)


def _host() -> Any:
    from gpuhook.cli import host_commands

    return host_commands


def _partition() -> Any:
    from gpuhook.cli import partition_commands

    return partition_commands


def _upgrade() -> Any:
    from gpuhook.cli import upgrade_commands

    return upgrade_commands


def _tuning() -> Any:
    from gpuhook.cli import tuning_commands

    return tuning_commands


def _config() -> Any:
    from gpuhook.cli import config_commands

    return config_commands


def _cdi() -> Any:
    from gpuhook.cli import cdi_commands

    return cdi_commands


def _cdi_validate() -> Any:
    from gpuhook.cli import cdi_validate

    return cdi_validate
