"""Container cost of gpuhook, side by side with bare runc, on simulated hosts (run as root).

    .venv/bin/python tests/perf/bench.py [--rounds 30] [--mode cycle|run|both] [--json out.json]

The headline is what a container engine does for each container (containerd-shim, CRI-O's conmon): one
create/start/delete cycle of a busybox bundle running `true`, every call through the runtime under test:
`R create --bundle B --pid-file P ID`, `R start ID`, a wait for the container's init (this process is a
child subreaper, so the init is reparented to it once `create` returns), `R delete ID` (poststop hooks).
`--mode run` times one `R run` instead (the reference of earlier runs); `both` prints both tables. The GPU
rows run twice: directly (Python started per call) and, named "warm: ...", through the warm helper
(`gpuhook warm`, started for the run; `--warm only|off` keeps one set). Variants
are interleaved round by round in a shuffled order, so machine drift hits all alike; the tables give medians,
p90 and each median's ratio to bare runc's in the same run, and split each GPU row into what bare runc costs on the
spec gpuhook wrote, without and with its hooks, and the rest (the floor and "hooks kept" rows). `--cdi` adds the
CDI path (tests/perf/cdi_engines.py: containerd 2 over CRI and Podman, on gpuhook's CDI specs, no shim, each
engine with its own no-device row); the "#46 targets" table gives every row in ms over the floor of the same row.
Not part of the test run (tests/installed/test_perf_tools.py runs it for two rounds and checks its rows, never its
timings).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import itertools
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hook"))
sys.path.insert(0, str(REPO))

from tests.perf import cdi_engines  # noqa: E402
from tests.support import nvidia_ctk  # noqa: E402

from gpuhook.cli.launcher import write_launchers  # noqa: E402
from gpuhook.testing.bundle import make_bundle, make_rootfs, oci_config  # noqa: E402
from gpuhook.testing.simulate import HostSpec, build_host  # noqa: E402

PREFIX = "gpuhook-bench-"  # the work dir's and every container id's prefix (cleanup finds them by it)
PR_SET_CHILD_SUBREAPER = 36
BASELINE = "runc (baseline)"
PASS_THROUGH = "gpuhook pass-through (no request)"
LOG_FILE = "gpuhook nvidia 1 of 8 GPUs, log_file set (debug)"
WARM = "warm: "  # the prefix of the rows through the warm helper
FLOOR = "floor, runc on gpuhook's spec: "  # the prefix of the floor rows (_floors)
KEPT = "runc on gpuhook's spec, hooks kept: "  # and of those that keep its hooks
VENDORS = ("nvidia", "amd")
_IDS = itertools.count()


@dataclass
class Variant:
    name: str
    runtime: list[str]  # the runtime command: every call of a sample goes through it
    bundle: Path
    env: dict[str, str]
    spec: bytes = b""
    optional: bool = False  # a vendor's own runtime: dropped with a note when its warm-up sample fails
    sampler: Callable[[], float] | None = None  # an engine's own sample (the CDI rows): seconds, RuntimeError
    times: dict[str, list[float]] = field(default_factory=dict)  # mode -> seconds per sample


class StepFailed(Exception):
    """A runtime call of a sample failed; the message names the variant, the step and the runtime's stderr."""


AddVariant = Callable[..., None]


def main() -> int:
    """Parse the arguments, build the variants in a work dir, measure, report; removes what it made."""
    args = _arguments()
    if os.geteuid() != 0:
        sys.exit("bench.py runs real containers and makes device nodes: run it as root")
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix=PREFIX))
    try:
        _bench(args, work)
    finally:
        cleanup(work, args.keep)
    return 0


def _arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--mode", choices=("cycle", "run", "both"), default="cycle",
                   help="cycle: create/start/wait/delete (what engines do); run: one `runc run`; both tables")
    p.add_argument("--scale", default="1,8,64", help="GPU counts per vendor for the scaling rows")
    p.add_argument("--json", help="also write the raw results here ({mode: {variant: [seconds]}})")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="measure only the variants whose name contains TEXT (repeatable; the baseline always runs)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter for gpuhook's launchers (install.sh uses the distribution's /usr/bin/python3)")
    p.add_argument("--warm", choices=("both", "only", "off"), default="both",
                   help="GPU rows through the warm helper (gpuhook warm, rows named 'warm: ...'), directly, or both")
    p.add_argument("--keep", action="store_true", help="leave the work dir (bundles, configs, state, log) in place")
    p.add_argument("--installed", metavar="BINDIR",
                   help="measure gpuhook as installed there (install.sh's PREFIX/bin, the .deb's /opt/gpuhook) instead "
                        "of launchers written from this checkout")
    p.add_argument("--peers", metavar="DIR",
                   help="look for NVIDIA's and AMD's runtimes (and nvidia-ctk, nvidia-cdi-hook) here before PATH: "
                        "the directory `bash tools/components/build.sh` prints")
    p.add_argument("--cdi", action="store_true",
                   help="add the CDI path's rows: containerd 2 (CRI) and Podman on gpuhook's CDI specs, no shim")
    p.add_argument("--containerd", metavar="PATH",
                   help="containerd 2 for the CDI rows (default: the one in --peers, tools/components' v2.4.2)")
    args = p.parse_args()
    if args.rounds < 2:
        p.error("--rounds must be at least 2 (p90 needs two samples)")
    return args


def become_subreaper() -> None:
    """Make this process a child subreaper (what containerd-shim does), so a container's init, orphaned when
    `create` returns, is reparented here and can be waited for. Changes this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")


def _bench(args: argparse.Namespace, work: Path) -> None:
    modes = ("cycle", "run") if args.mode == "both" else (args.mode,)
    variants, notes = _variants(work, [int(n) for n in args.scale.split(",")], args.python, args.warm,
                                args.installed, args.peers)
    with contextlib.ExitStack() as engines:
        if args.cdi:
            gpuhook = os.path.join(args.installed, "gpuhook") if args.installed else str(work / "bin" / "gpuhook")
            variants += _cdi_variants(engines, work, gpuhook, args, notes)
        if args.only:
            variants = [v for v in variants if v.name == BASELINE or any(t in v.name for t in args.only)]
        if any(v.name.startswith((WARM, "NVIDIA's runtime")) for v in variants) or (args.cdi and args.warm != "off"):
            start_warm(work, work / "config8.toml", Path(args.installed) if args.installed else work / "bin")
        _measure(variants, modes, work, notes, args)


def _measure(variants: list[Variant], modes: tuple[str, ...], work: Path, notes: list[str],
             args: argparse.Namespace) -> None:
    """Warm up, add the floors, run the interleaved rounds, report."""
    variants = _warm_up(variants, modes, work, notes)
    variants += _warm_up(_floors(variants, work), modes, work, notes)
    order = {v.name: i for i, v in enumerate(variants)}
    averages, before = os.getloadavg(), _cpu_times()
    for _ in range(args.rounds):
        random.shuffle(variants)
        for v in variants:
            for mode in modes:
                v.times.setdefault(mode, []).append(_measured(v, mode, work))
    used = [b - a for a, b in zip(before, _cpu_times(), strict=True)]
    notes.insert(0, f"load: {'/'.join(f'{a:.2f}' for a in averages)} (1, 5, 15 min) before the rounds; during them "
                    f"the CPUs were {_share(used):.0f} % busy, {_share(used, steal=True):.1f} % stolen by "
                    "the hypervisor")
    variants.sort(key=lambda v: order[v.name])
    _report(variants, modes, args, notes)
    if args.json:
        Path(args.json).write_text(json.dumps({m: {v.name: v.times[m] for v in variants} for m in modes}, indent=1))


def _cdi_variants(engines: contextlib.ExitStack, work: Path, gpuhook: str, args: argparse.Namespace,
                  notes: list[str]) -> list[Variant]:
    """The CDI path's rows (cdi_engines.py) on gpuhook's specs of the 8-GPU host, each engine started in
    `engines` (stopped when it closes); notes on an engine left out."""
    specs = work / "cdi-engines"
    warm = str(work / "warm.sock") if args.warm != "off" else ""  # where the spec's hook finds the helper
    problem = cdi_engines.write_specs(gpuhook, work / "config8.toml", specs, warm)
    if problem:
        notes.append(f"dropped the CDI rows: {problem}")
        return []
    rows: list[cdi_engines.Row] = []
    containerd = args.containerd or (os.path.join(args.peers, "containerd") if args.peers else None)
    if containerd and os.access(containerd, os.X_OK):
        try:
            rows += engines.enter_context(cdi_engines.containerd_rows(containerd, work / "containerd",
                                                                      work / "rootfs", specs))
        except Exception as e:  # an engine that does not come up loses its rows, with a note
            notes.append(f"dropped the containerd 2 CDI rows: {str(e).splitlines()[0][:300]}")
    else:
        notes.append("dropped the containerd 2 CDI rows: no containerd 2 (--containerd, or --peers from "
                     "`bash tools/components/build.sh`)")
    if shutil.which("podman"):
        try:
            rows += engines.enter_context(cdi_engines.podman_rows(work / "podman", work / "rootfs", specs))
        except (RuntimeError, subprocess.SubprocessError) as e:
            notes.append(f"dropped the Podman CDI rows: {str(e).splitlines()[0][:300]}")
    else:
        notes.append("dropped the Podman CDI rows: podman is not installed")
    return [Variant(name, runtime, work, {}, optional=True, sampler=sampler) for name, runtime, sampler in rows]


def _cpu_times() -> list[int]:
    """The machine's CPU time so far by state (/proc/stat's first line: user, nice, system, idle, iowait, irq,
    softirq, steal, ...), in clock ticks."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def _share(used: list[int], steal: bool = False) -> float:
    """Of the ticks `used` (a difference of _cpu_times), the percentage busy (neither idle nor iowait) or, with
    `steal`, stolen."""
    total = sum(used[:8]) or 1
    return 100 * used[7] / total if steal else 100 * (total - used[3] - used[4]) / total


def _warm_up(variants: list[Variant], modes: tuple[str, ...], work: Path, notes: list[str]) -> list[Variant]:
    """One untimed sample per variant and mode (config cache, page cache, stub compiles); a vendor runtime whose
    sample fails is dropped with a note, any other failure ends the benchmark."""
    kept = []
    for v in variants:
        try:
            for mode in modes:
                _sample(v, mode, work)
        except StepFailed as e:
            if not v.optional:
                sys.exit(str(e))
            notes.append(f"dropped: {e}")
            continue
        kept.append(v)
    return kept


def _floors(variants: list[Variant], work: Path) -> list[Variant]:
    """The rows that split each GPU row's time (the direct and the warm row share them), from the spec the shim
    wrote in that row's warm-up (its edits applied): a "floor" row, bare runc on it with no hooks (the cost no
    injector can avoid), and for an injection row whose spec has hooks a "hooks kept" row, bare runc on it as
    written (what runc's running gpuhook's hooks adds). A hook-mode row gets a floor: its spec without its hooks."""
    out: list[Variant] = []

    def add(name: str, source: Path, hooks: bool) -> None:
        if not any(f.name == name for f in out):
            bundle = work / f"floor-{len(out)}"
            out.append(Variant(name, ["runc"], bundle, {"PATH": os.environ["PATH"]},
                               runc_bundle(source, bundle, work / "rootfs", hooks)))

    for v in variants:
        row = v.name.removeprefix(WARM)
        if v.runtime[0] == "runc" and row.startswith("hook mode "):
            add(f"{FLOOR}{row}", v.bundle, False)
        if v.runtime[0] == "runc" or not row.startswith("gpuhook ") or "GPUs" not in row or "+" in row \
                or "log_file" in row:
            continue
        name = row.removeprefix("gpuhook ")
        add(f"{FLOOR}{name}", v.bundle, False)
        if json.loads((v.bundle / "config.json").read_bytes()).get("hooks"):  # else the floor is all of it
            add(f"{KEPT}{name}", v.bundle, True)
    return out


def runc_bundle(source: Path, bundle: Path, rootfs: Path, hooks: bool) -> bytes:
    """A bundle at `bundle` for bare runc, of the spec in `source` (as gpuhook left it), its root a copy of the
    source's root as gpuhook left it too (the linker cache gpuhook writes there is part of what the container gets;
    `rootfs` where the source has none): its hooks dropped, or kept as written, the createContainer hook's root
    then this bundle's and the procfs copies it mounts (`--proc SOURCE TARGET`) copied beside it (gpuhook removes a
    copy no container of its own uses). Its config.json's bytes. Writes files."""
    spec = json.loads((source / "config.json").read_bytes())
    if not hooks:
        spec.pop("hooks", None)
    for hook in spec.get("hooks", {}).get("createContainer", []):
        args = hook["args"]
        for i, arg in enumerate(args):
            if arg == str(source / "rootfs"):
                args[i] = str(bundle / "rootfs")
            elif i and args[i - 1] == "--proc":
                args[i] = str(shutil.copytree(arg, bundle.parent / f"{bundle.name}-procfs-{os.path.basename(arg)}"))
    make_bundle(str(bundle), spec, str(source / "rootfs" if (source / "rootfs").is_dir() else rootfs))
    return (bundle / "config.json").read_bytes()


def _measured(v: Variant, mode: str, work: Path) -> float:
    try:
        return _sample(v, mode, work)
    except StepFailed as e:
        sys.exit(str(e))


def _sample(v: Variant, mode: str, work: Path) -> float:
    """One timed sample of `v` in `mode` (seconds), under a fresh container id; raises StepFailed. Restores
    config.json first (the shim rewrote it last time; not timed). An engine's row (the CDI path) samples itself,
    the same in both modes."""
    if v.sampler is not None:
        try:
            return v.sampler()
        except Exception as e:  # the engine's RuntimeError, or its gRPC error
            raise StepFailed(f"{v.name}: {str(e).strip()[:800]}") from e
    (v.bundle / "config.json").write_bytes(v.spec)
    cid = f"{PREFIX}{os.getpid()}-{next(_IDS)}"
    err = work / "stderr"
    if mode == "run":
        start = time.perf_counter()
        call(v, "run", ["run", "--bundle", str(v.bundle), cid], err)
        return time.perf_counter() - start
    pid_file = work / "init.pid"
    start = time.perf_counter()
    call(v, "create", ["create", "--bundle", str(v.bundle), "--pid-file", str(pid_file), cid], err)
    call(v, "start", ["start", cid], err)
    _wait_init(v, int(pid_file.read_text()))
    call(v, "delete", ["delete", cid], err)
    return time.perf_counter() - start


def call(v: Variant, step: str, args: list[str], err: Path) -> None:
    """Run `R args` with /dev/null for stdin and stdout and a file for stderr: the container's init inherits
    them, and a pipe would keep its reader waiting until the container ends. Raises StepFailed."""
    with err.open("w+b") as f:
        done = subprocess.run([*v.runtime, *args], env=v.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=f, check=False)
        if done.returncode != 0:
            f.seek(0)
            message = f.read().decode(errors="replace").strip()
            raise StepFailed(f"{v.name}: {step} failed (exit {done.returncode}): {message}")


def _wait_init(v: Variant, pid: int) -> None:
    """Wait for the container's init, reparented to this subreaper; raises StepFailed unless it exited 0."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError as e:
        raise StepFailed(f"{v.name}: wait failed: init {pid} is not a child of the benchmark ({e})") from e
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise StepFailed(f"{v.name}: wait failed: the container's `true` ended with {code}")


def _variants(work: Path, scale: list[int], python: str, warm: str,
              installed: str | None = None, peers: str | None = None) -> tuple[list[Variant], list[str]]:
    """Every variant's bundle, config and environment under `work` (gpuhook from `installed`, else launchers
    written from this checkout), and notes on rows left out. Writes files."""
    rootfs = work / "rootfs"
    make_rootfs(str(rootfs))
    if installed:
        names = ("gpuhook", "gpuhook-runtime", "gpuhook-hook", "gpuhook-createhook")
        launchers = {n: os.path.join(installed, n) for n in names if os.path.exists(os.path.join(installed, n))}
    else:
        bindir = work / "bin"
        bindir.mkdir()
        paths = sysconfig.get_paths()
        launchers = write_launchers(str(bindir), python, [str(REPO / "hook"), paths["purelib"], paths["platlib"]])
    shim, gpuhook = launchers["gpuhook-runtime"], launchers["gpuhook"]
    hosts = {n: build_host(str(work / f"host{n}"), HostSpec(nvidia=n, amd=n)) for n in sorted({8, *scale})}
    configs = {n: _config(work, f"config{n}", root) for n, root in hosts.items()}
    debug = _config(work, "config-debug", hosts[8], f'log_file = "{work}/gpuhook.log"\nlog_level = "debug"\n')
    out: list[Variant] = []

    def add(name: str, runtime: list[str], env: dict[str, str], annotations: dict[str, str] | None = None,
            process_env: dict[str, str] | None = None, hook: tuple[str, dict[str, str]] | None = None,
            optional: bool = False) -> None:
        bundle = work / f"b{len(out)}"
        spec = oci_config(["true"], env=process_env, annotations=annotations)
        if hook is not None:  # as users install hook mode (both stages); poststop drops the record, restores tuning
            path, hook_env = hook
            spec["hooks"] = {stage: [{"path": path, "args": ["gpuhook", "hook", stage],
                                      "env": [f"{k}={v}" for k, v in hook_env.items()]}]
                             for stage in ("prestart", "poststop")}
        make_bundle(str(bundle), spec, str(rootfs))
        out.append(Variant(name, runtime, bundle, {"PATH": os.environ["PATH"], **env},
                           (bundle / "config.json").read_bytes(), optional))

    def gpus(vendor: str, which: str, **more: str) -> dict[str, str]:
        return {"gpuhook.dev/gpus": which, "gpuhook.dev/vendor": vendor, **more}

    def rows(prefix: str, socket: str, hook_bin: str) -> None:
        """The GPU rows, through the warm helper at `socket` or (socket "") directly."""
        def on(config: Path) -> dict[str, str]:
            return {"GPUHOOK_CONFIG": str(config), "GPUHOOK_WARM_SOCKET": socket}

        for vendor in VENDORS:
            add(f"{prefix}gpuhook {vendor} 1 of 8 GPUs", [shim], on(configs[8]), gpus(vendor, "0"))
            add(f"{prefix}gpuhook {vendor} all 8 GPUs", [shim], on(configs[8]), gpus(vendor, "all"))
            add(f"{prefix}hook mode {vendor} 1 of 8 GPUs", ["runc"], {}, gpus(vendor, "0"),
                hook=(hook_bin, on(configs[8])))
            add(f"{prefix}gpuhook {vendor} 1 of 8 GPUs + clocks=1500", [shim], on(configs[8]),
                gpus(vendor, "0", **{"gpuhook.dev/clocks": "1500"}))
        add(f"{prefix}{LOG_FILE}", [shim], on(debug), gpus("nvidia", "0"))
        for vendor in VENDORS:
            for n in scale:
                add(f"{prefix}scaling: {vendor} all of {n}", [shim], on(configs[n]), gpus(vendor, "all"))

    add(BASELINE, ["runc"], {})
    add(PASS_THROUGH, [shim], {"GPUHOOK_CONFIG": str(configs[8]), "GPUHOOK_WARM_SOCKET": ""})
    pip_shim = Path(sys.executable).parent / "gpuhook-runtime"
    if pip_shim.exists() and not installed:
        add("gpuhook pass-through, pip's wrapper", [str(pip_shim)], {"GPUHOOK_CONFIG": str(configs[8])})
    if warm != "only":
        rows("", "", gpuhook)
    if warm != "off":
        rows(WARM, str(work / "warm.sock"), launchers.get("gpuhook-hook", gpuhook))
    binary = _self_contained()  # bash packaging/build-bundle.sh
    if binary:
        add("self-contained build pass-through (no request)", [str(binary)],
            {"GPUHOOK_CONFIG": str(configs[8]), "GPUHOOK_WARM_SOCKET": ""})
        for vendor in VENDORS:
            add(f"self-contained build {vendor} 1 of 8 GPUs", [str(binary)],
                {"GPUHOOK_CONFIG": str(configs[8]), "GPUHOOK_WARM_SOCKET": ""}, gpus(vendor, "0"))
    notes = _vendor_runtimes(add, work, gpuhook, configs[8], hosts[8], peers)
    return out, notes


def _self_contained() -> Path | None:
    """The self-contained build's runtime front end for this machine, where packaging/build-bundle.sh made one."""
    found = sorted(REPO.glob(f"dist/gpuhook-*-{os.uname().machine}/bin/gpuhook-runtime"))
    return found[-1] if found else None


def start_warm(work: Path, config: Path, bindir: Path) -> None:
    """The warm helper on work/warm.sock, from the benchmark's launchers, with the 8-GPU host's config as a
    host's daemon has the host's (it binds amdsmi to that host's library ahead), until the benchmark ends
    (cleanup stops it). Starts a daemon."""
    sock = work / "warm.sock"
    daemon = subprocess.Popen([str(bindir / "gpuhook"), "warm", "--socket", str(sock)],
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (work / "warm.pid").write_text(str(daemon.pid))
    for _ in range(100):
        if sock.exists():
            time.sleep(0.5)  # its first spares populate their memory
            return
        time.sleep(0.05)
    sys.exit("the warm helper did not come up")


def _config(work: Path, name: str, host: str, extra: str = "") -> Path:
    """A gpuhook config for a simulated host; its state (records, tuning ledger) in its own dir under `work`."""
    path = work / f"{name}.toml"
    path.write_text(f'host_root = "{host}"\nruntime = "runc"\nstate_dir = "{work}/state-{name}"\n{extra}')
    return path


def _vendor_runtimes(add: AddVariant, work: Path, gpuhook: str, config: Path, host: str,
                     peers: str | None) -> list[str]:
    """Rows for NVIDIA's and AMD's own runtimes, where they are on PATH or in `peers` (never a dependency);
    notes on what is left out. NVIDIA's runs in CDI mode twice: on gpuhook's spec of the simulated host, and on
    the spec its own nvidia-ctk writes of that host. AMD's reads the host's real GPUs (it cannot be pointed at a
    simulated host): its rows mean something only on a real AMD host."""
    notes = []
    path = os.pathsep.join(p for p in (peers, os.environ["PATH"]) if p)
    nvidia = shutil.which("nvidia-container-runtime", path=path)
    if nvidia:
        problem = _cdi_spec(work, gpuhook, config)
        if problem:
            notes.append(f"dropped NVIDIA's runtime rows on gpuhook's spec: {problem}")
        else:
            env = {"XDG_CONFIG_HOME": str(nvidia_ctk.cdi_mode(work / "xdg-cdi", work / "cdi"))}
            add("NVIDIA's runtime (CDI) pass-through", [nvidia], env, optional=True)
            for name, device in (("1 of 8 GPUs", "0"), ("all 8 GPUs", "all")):
                add(f"NVIDIA's runtime (CDI) on gpuhook's spec, {name}", [nvidia], env,
                    {"cdi.k8s.io/gpuhook-bench": f"nvidia.com/gpu={device}"}, optional=True)
        problem = _nvidia_own_spec(work, host, path)
        if problem:
            notes.append(f"dropped NVIDIA's runtime rows on its own spec: {problem}")
        else:
            env = {"XDG_CONFIG_HOME": str(nvidia_ctk.cdi_mode(work / "xdg-nvidia", work / "cdi-nvidia"))}
            for name, device in (("1 of 8 GPUs", "0"), ("all 8 GPUs", "all")):
                add(f"NVIDIA's runtime (CDI) on NVIDIA's spec, {name}", [nvidia], env,
                    {"cdi.k8s.io/gpuhook-bench": f"nvidia.com/gpu={device}"}, optional=True)
    amd = shutil.which("amd-container-runtime", path=path)
    if amd:
        add("AMD's runtime pass-through", [amd], {}, optional=True)
        for device in ("0", "all"):
            add(f"AMD's runtime AMD_VISIBLE_DEVICES={device}", [amd], {},
                process_env={"AMD_VISIBLE_DEVICES": device}, optional=True)
    return notes


def _cdi_spec(work: Path, gpuhook: str, config: Path) -> str | None:
    """gpuhook's CDI spec of the simulated host's NVIDIA GPUs in work/cdi; what went wrong, or None. Runs
    `gpuhook cdi generate`."""
    output = work / "cdi" / "gpuhook-nvidia.json"
    output.parent.mkdir()
    done = subprocess.run([gpuhook, "cdi", "generate", "--vendor", "nvidia", "--output", str(output)],
                          env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"gpuhook cdi generate failed: {done.stderr.strip()}"
    cdi_engines.tell_warm(output, str(work / "warm.sock"))  # its hook takes the direct path while none runs
    return None


def _nvidia_own_spec(work: Path, host: str, path: str) -> str | None:
    """NVIDIA's CDI spec of the simulated host, by its nvidia-ctk, in work/cdi-nvidia; what went wrong, or None."""
    ctk, hook = shutil.which("nvidia-ctk", path=path), shutil.which("nvidia-cdi-hook", path=path)
    if not ctk or not hook:
        return "nvidia-ctk or nvidia-cdi-hook is not there (tools/components/build.sh builds both)"
    done = nvidia_ctk.own_spec(ctk, hook, host, work / "cdi-nvidia" / "nvidia.json")
    if done.returncode != 0:
        return f"nvidia-ctk cdi generate failed: {done.stderr.strip()[-500:]}"
    return None


def _report(variants: list[Variant], modes: tuple[str, ...], args: argparse.Namespace, notes: list[str]) -> None:
    """The header, a table per mode (the cycle's followed by the targets), the log_file and scaling lines."""
    runc = subprocess.run(["runc", "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "CPU model unknown")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"machine: {os.cpu_count()} CPUs ({model}), {memory:.0f} GiB, {platform.platform()}, "
          f"Python {platform.python_version()}, {runc}")
    which = f"as installed in {args.installed}" if args.installed else f"from this checkout, interpreter {args.python}"
    print(f"gpuhook {which}; rounds: {args.rounds}, variants interleaved in shuffled order")
    for note in notes:
        print(f"note: {note}")
    titles = {"cycle": "create, start, wait for init, delete (each call through the runtime)",
              "run": "`run` (reference: one call; the runtime waits for the container)"}
    medians = {v.name: statistics.median(v.times[modes[0]]) for v in variants}
    for mode in modes:
        print(f"\n{titles[mode]}:\n")
        _table(variants, mode)
        if mode == modes[0]:
            for prefix in (p for p in ("", WARM) if any(n.startswith(f"{p}gpuhook nvidia") for n in medians)):
                _targets(medians, mode, prefix)
    if not _self_contained():
        print("\nself-contained build: not built (bash packaging/build-bundle.sh)")
    _report_split(medians)
    _report_over_floor(medians)
    _report_specs(medians)
    for prefix in ("", WARM):
        added = _log_file_ms(_rows(medians, prefix))
        if added is not None:
            print(f"\n{prefix}log_file adds {added:.1f} ms per GPU container (median difference)")
        _report_scaling(medians, prefix)


def _report_split(medians: dict[str, float]) -> None:
    """Where each GPU row's time goes, in ms over bare runc's cycle: the floor (runc on what the container gets),
    the hooks runc runs, the tuning hooks (a clocks row against its 1-GPU row), and the rest, before runc; beside
    it what the row's aim allows."""
    runc = medians[BASELINE]
    split: list[tuple[str, float, float, float, float | None, float | None, float]] = []
    for prefix in ("", WARM):
        aims = dict(zip(("inject", "hook", "clocks"), _aims(prefix), strict=True))
        for name, med in _rows(medians, prefix).items():
            floor_of = name.removeprefix("gpuhook ").removesuffix(" + clocks=1500")
            floor = medians.get(f"{FLOOR}{floor_of}")
            if floor is None or name.startswith("scaling"):
                continue
            kept = medians.get(f"{KEPT}{floor_of}", floor)  # no such row: gpuhook wrote no hook
            if name.startswith("hook mode "):  # runc itself, hooks and all: nothing before it
                split.append((prefix + name, med, floor, med - floor, None, None, aims["hook"]))
            elif name.endswith(" + clocks=1500"):
                inject = medians.get(f"{prefix}gpuhook {floor_of}")
                if inject is None:  # its 1-GPU row was left out (--only)
                    continue
                split.append((prefix + name, med, floor, kept - floor, med - inject, inject - kept, aims["clocks"]))
            else:
                split.append((prefix + name, med, floor, kept - floor, None, med - kept, aims["inject"]))
    if not split:
        return
    print(f"\nwhere the time goes, ms over bare runc's cycle ({runc * 1000:.1f} ms): floor = runc on the spec gpuhook "
          "wrote, no hooks (what the container gets); hooks = the same spec with the hooks gpuhook wrote (a hook-mode "
          "row: all of its own); tuning = a clocks row against its 1-GPU row (its prestart and poststop); before "
          "runc = the rest (gpuhook's own work and hand-over, and runc slowed by it); the aim's allowance\n")
    print("| row | over runc | floor | hooks | tuning | before runc | aim allows |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, med, floor, hooks, tuning, before, aim in split:
        cells = [med - runc, floor - runc, hooks, tuning, before, (aim - 1) * runc]
        text = " | ".join("" if c is None else f"{c * 1000:.1f}" for c in cells)
        print(f"| {name} | {text} (x{aim}) |")


def over_floor_rows(medians: dict[str, float]) -> list[tuple[str, str, float, float | None]]:
    """#46's targets, each a (what, row, ms over the floor of the same row, limit in ms or None: a peer, for
    reading) for every row of this run that has both: warm injection (1 and all 8 GPUs) over runc on its own spec;
    hook mode over its spec without its hooks; clocks over its injection row; the CDI path over its engine's
    no-device row; direct injection; NVIDIA's runtime over the floor of the same GPUs."""
    out = []

    def add(what: str, row: str, floor: str, limit: float | None) -> None:
        if row in medians and floor in medians:
            out.append((what, row, (medians[row] - medians[floor]) * 1000, limit))

    for vendor in VENDORS:
        for gpus in ("1 of 8 GPUs", "all 8 GPUs"):
            add("warm injection", f"{WARM}gpuhook {vendor} {gpus}", f"{FLOOR}{vendor} {gpus}", 3.0)
        add("hook mode (warm)", f"{WARM}hook mode {vendor} 1 of 8 GPUs", f"{FLOOR}hook mode {vendor} 1 of 8 GPUs", 5.0)
        add("clocks over injection (warm)", f"{WARM}gpuhook {vendor} 1 of 8 GPUs + clocks=1500",
            f"{WARM}gpuhook {vendor} 1 of 8 GPUs", 8.0)
    for engine in (cdi_engines.CONTAINERD, cdi_engines.PODMAN):
        floor = f"{engine}{cdi_engines.NO_DEVICE}"
        for row in (name for name in medians if name.startswith(engine) and name != floor):
            add("CDI path over the engine's no device", row, floor, 1.0)
    for vendor in VENDORS:
        for gpus in ("1 of 8 GPUs", "all 8 GPUs"):
            add("direct injection", f"gpuhook {vendor} {gpus}", f"{FLOOR}{vendor} {gpus}", 15.0)
    for spec in ("gpuhook's", "NVIDIA's"):
        for gpus in ("1 of 8 GPUs", "all 8 GPUs"):
            add("peer: NVIDIA's runtime", f"NVIDIA's runtime (CDI) on {spec} spec, {gpus}", f"{FLOOR}nvidia {gpus}",
                None)
    return out


def _report_over_floor(medians: dict[str, float]) -> None:
    """The "#46 targets" table: each target's rows in ms over the floor of the same row, met or missed."""
    rows = over_floor_rows(medians)
    if not rows:
        return
    print("\n#46 targets, ms over the floor of the same row (medians; for reading, never enforced):\n")
    print("| target | row | over its floor, ms | limit, ms | |")
    print("|---|---|---:|---:|---|")
    for what, row, ms, limit in rows:
        verdict = "" if limit is None else "met" if ms <= limit else "missed"
        print(f"| {what} | {row} | {ms:.1f} | {'' if limit is None else f'{limit:g}'} | {verdict} |")
    print("(AMD's container runtime: not built here, its module is not served by the proxy; docs/performance.md "
          "quotes its earlier figures with their date)")


def _report_specs(medians: dict[str, float]) -> None:
    """NVIDIA's runtime on gpuhook's CDI spec against the same runtime on NVIDIA's own spec (#27: at least as fast)."""
    for name in ("1 of 8 GPUs", "all 8 GPUs"):
        ours = medians.get(f"NVIDIA's runtime (CDI) on gpuhook's spec, {name}")
        theirs = medians.get(f"NVIDIA's runtime (CDI) on NVIDIA's spec, {name}")
        if ours is not None and theirs is not None:
            print(f"\nNVIDIA's runtime, {name}: on gpuhook's spec {ours * 1000:.1f} ms, on NVIDIA's own "
                  f"{theirs * 1000:.1f} ms ({(ours - theirs) * 1000:+.1f} ms, "
                  f"{'ok' if ours <= theirs else 'MISS'}: gpuhook's spec is to be at least as fast)")


def _table(variants: list[Variant], mode: str) -> None:
    base = statistics.median(next(v for v in variants if v.name == BASELINE).times[mode])
    print("| variant | median ms | p90 ms | ratio to runc |")
    print("|---|---:|---:|---:|")
    for v in variants:
        med = statistics.median(v.times[mode])
        p90 = statistics.quantiles(v.times[mode], n=10)[-1]
        print(f"| {v.name} | {med * 1000:.1f} | {p90 * 1000:.1f} | {med / base:.2f} |")


def _targets(medians: dict[str, float], mode: str, prefix: str) -> None:
    """The aims, each against this run's medians of the rows named with `prefix` (the warm helper's, or the
    direct path's): one `target  measured  ok|MISS` line each (never fails)."""
    ratio = {name.removeprefix(prefix): med / medians[BASELINE] for name, med in medians.items()
             if name.startswith(prefix) or name == PASS_THROUGH}
    own = _rows(medians, prefix)
    inject, hook, clocks = _aims(prefix)
    checks = [("pass-through ratio <= 1.03", ratio.get(PASS_THROUGH), 1.03)]
    for vendor in VENDORS:
        checks += [(f"{vendor} 1 of 8 ratio <= {inject}", ratio.get(f"gpuhook {vendor} 1 of 8 GPUs"), inject),
                   (f"{vendor} all 8 ratio <= {inject}", ratio.get(f"gpuhook {vendor} all 8 GPUs"), inject),
                   (f"hook mode {vendor} ratio <= {hook}", ratio.get(f"hook mode {vendor} 1 of 8 GPUs"), hook),
                   (f"{vendor} + clocks ratio <= {clocks}", ratio.get(f"gpuhook {vendor} 1 of 8 GPUs + clocks=1500"),
                    clocks)]
        points = _scaling(own, vendor)
        if len(points) > 1:
            (low, t_low), (high, t_high) = points[0], points[-1]
            checks.append((f"{vendor} ratio({high})/ratio({low}) <= 1.10", t_high / t_low, 1.10))
    checks.append(("log_file ms <= 3", _log_file_ms(own), 3.0))
    which = "through the warm helper" if prefix else "direct path"
    print(f"\ntargets, {which} ({mode} medians; for reading, never enforced):")
    measured = [(label, value, limit) for label, value, limit in checks if value is not None]
    for label, value, limit in measured:
        print(f"  {label:<36} {value:6.2f}  {'ok' if value <= limit else 'MISS'}")
    if not measured:
        print("  (no target's row was measured)")


def _aims(prefix: str) -> tuple[float, float, float]:
    """#27's aims for injection, hook mode and tuning (ratios to runc): through the warm helper (`prefix` WARM, the
    installed default), and on the direct path (the helper stopped)."""
    return (1.25, 1.25, 1.6) if prefix else (1.6, 1.6, 3.0)


def _rows(medians: dict[str, float], prefix: str) -> dict[str, float]:
    """The medians of the rows named with `prefix` (the warm helper's, or "" for all), by name without it."""
    return {name.removeprefix(prefix): med for name, med in medians.items() if name.startswith(prefix)}


def _log_file_ms(own: dict[str, float]) -> float | None:
    """What a log_file adds to the NVIDIA 1-GPU row (ms), where both rows ran."""
    if LOG_FILE in own and "gpuhook nvidia 1 of 8 GPUs" in own:
        return (own[LOG_FILE] - own["gpuhook nvidia 1 of 8 GPUs"]) * 1000
    return None


def _scaling(medians: dict[str, float], vendor: str) -> list[tuple[int, float]]:
    """The (GPU count, median) points of a vendor's scaling rows, by count."""
    head = f"scaling: {vendor} all of "
    return sorted((int(name.removeprefix(head)), med) for name, med in medians.items() if name.startswith(head))


def _report_scaling(medians: dict[str, float], prefix: str) -> None:
    """Per vendor: the ratio of the largest scaling point's ratio to the smallest's, and the cost of each added
    GPU between the points (linear growth keeps it flat), for the rows named with `prefix`."""
    own = _rows(medians, prefix)
    for vendor in VENDORS:
        points = _scaling(own, vendor)
        if len(points) < 2:
            continue
        (low, t_low), (high, t_high) = points[0], points[-1]
        print(f"\n{prefix}scaling, {vendor}: ratio({high})/ratio({low}) = {t_high / t_low:.2f}")
        steps = [f"{a}->{b}: {(tb - ta) / (b - a) * 1000:.2f}" for (a, ta), (b, tb) in itertools.pairwise(points)]
        print(f"{prefix}scaling, {vendor}: ms per added GPU " + ", ".join(steps))


def cleanup(work: Path, keep: bool) -> None:
    """Best effort: stop the warm helper, force-delete this run's containers runc still lists, then remove `work`
    unless `keep`."""
    pid_file = work / "warm.pid"
    if pid_file.exists():
        os.kill(int(pid_file.read_text()), 15)
        os.waitpid(int(pid_file.read_text()), 0)
    listed = subprocess.run(["runc", "list", "-q"], capture_output=True, text=True, check=False).stdout.split()
    for cid in listed:
        if cid.startswith(f"{PREFIX}{os.getpid()}-"):
            subprocess.run(["runc", "delete", "--force", cid], capture_output=True, check=False)
    if keep:
        print(f"work dir kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
