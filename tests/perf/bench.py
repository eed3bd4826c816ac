"""Container start cost of gpuhook, side by side with bare runc, on simulated hosts (run as root).

    .venv/bin/python tests/perf/bench.py [--rounds 30] [--json out.json]

Every variant starts a real `runc run` of a busybox bundle running `true`. Variants are interleaved
round by round (in a shuffled order each round) so machine drift hits all of them alike; the table
gives medians and the ratio of each median to bare runc's in the same run. Not part of the test run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hook"))

from gpuhook.cli.launcher import write_launchers  # noqa: E402
from gpuhook.testing.bundle import make_bundle, make_rootfs, oci_config  # noqa: E402
from gpuhook.testing.simulate import HostSpec, build_host  # noqa: E402


@dataclass
class Variant:
    name: str
    argv0: list[str]  # the runtime command before `run --bundle B ID`
    bundle: Path
    config: Path | None = None
    times: list[float] = field(default_factory=list)
    spec: bytes = b""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--scale", default="1,8,64", help="GPU counts per vendor for the scaling rows")
    p.add_argument("--json", help="also write the raw results here")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="measure only the variants whose name contains TEXT (repeatable; the baseline always runs)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter for gpuhook's launchers (install.sh uses the distribution's /usr/bin/python3)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench.py runs real containers and makes device nodes: run it as root")
    work = Path(tempfile.mkdtemp(prefix="gpuhook-bench-"))
    variants = _variants(work, [int(n) for n in args.scale.split(",")], args.python)
    if args.only:
        variants = [v for v in variants if v.name.startswith("runc") or any(t in v.name for t in args.only)]
    for v in variants:  # warm caches (config cache, page cache, stub compiles) before measuring
        _once(v, work)
    for _ in range(args.rounds):
        random.shuffle(variants)
        for v in variants:
            v.times.append(_once(v, work))
    variants.sort(key=lambda v: _order(v.name))
    _report(variants, args.rounds, args.python)
    if args.json:
        Path(args.json).write_text(json.dumps({v.name: v.times for v in variants}, indent=1))
    return 0


def _variants(work: Path, scale: list[int], python: str) -> list[Variant]:
    rootfs = work / "rootfs"
    make_rootfs(str(rootfs))
    bindir = work / "bin"
    bindir.mkdir()
    launchers = write_launchers(str(bindir), python, [str(REPO / "hook"), sysconfig.get_paths()["purelib"],
                                                      sysconfig.get_paths()["platlib"]])
    shim, gpuhook = launchers["gpuhook-runtime"], launchers["gpuhook"]
    pip_shim = str(Path(sys.executable).parent / "gpuhook-runtime")
    hosts = {n: build_host(str(work / f"host{n}"), HostSpec(nvidia=n, amd=n)) for n in sorted({8, *scale})}
    configs = {}
    for n, root in hosts.items():
        configs[n] = work / f"config{n}.toml"
        configs[n].write_text(f'host_root = "{root}"\nruntime = "runc"\n')
    out: list[Variant] = []

    def add(name: str, argv0: list[str], n: int | None, annotations: dict[str, str] | None = None,
            hook: bool = False) -> None:
        bundle = work / f"b{len(out)}"
        spec = oci_config(["true"], annotations=annotations)
        if hook:
            spec["hooks"] = {"prestart": [{"path": gpuhook, "args": ["gpuhook", "hook", "prestart"],
                                           "env": [f"GPUHOOK_CONFIG={configs[n or 8]}"]}]}
        make_bundle(str(bundle), spec, str(rootfs))
        v = Variant(name, argv0, bundle, configs[n] if n else None)
        v.spec = (bundle / "config.json").read_bytes()
        out.append(v)

    add("runc (baseline)", ["runc"], None)
    add("shim pass-through (no request)", [shim], 8)
    if os.path.exists(pip_shim):
        add("shim pass-through, pip's wrapper", [pip_shim], 8)
    for vendor in ("nvidia", "amd"):
        add(f"shim {vendor} 1 of 8 GPUs", [shim], 8, {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor})
        add(f"shim {vendor} all 8 GPUs", [shim], 8, {"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": vendor})
        add(f"hook mode {vendor} 1 of 8 GPUs (runc + gpuhook hook prestart)", ["runc"], 8,
            {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor}, hook=True)
        add(f"shim {vendor} 1 of 8 GPUs + clocks (prestart applies, poststop restores)", [shim], 8,
            {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor, "gpuhook.dev/clocks": "1500"})
    binary = REPO / "dist/gpuhook/gpuhook-runtime"  # bash packaging/build-binary.sh
    if binary.exists():
        for vendor in ("nvidia", "amd"):
            add(f"PyInstaller binary {vendor} 1 of 8 GPUs", [str(binary)], 8,
                {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor})
    for n in scale:
        for vendor in ("nvidia", "amd"):
            add(f"scaling: {vendor} all of {n}", [shim], n, {"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": vendor})
    return out


def _once(v: Variant, work: Path) -> float:
    (v.bundle / "config.json").write_bytes(v.spec)  # the shim rewrote it last time; restoring is not timed
    env = {"PATH": os.environ["PATH"]}
    if v.config:
        env["GPUHOOK_CONFIG"] = str(v.config)
    cid = f"bench-{os.getpid()}-{random.randrange(1 << 30)}"
    start = time.perf_counter()
    done = subprocess.run([*v.argv0, "run", "--bundle", str(v.bundle), cid], env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{v.name} failed: {done.stderr.decode().strip()}")
    return elapsed


def _order(name: str) -> tuple[int, str, int]:
    if name.startswith("scaling"):
        vendor, _, count = name.removeprefix("scaling: ").partition(" all of ")
        return (2, vendor, int(count))
    return (0 if name.startswith("runc") else 1, name, 0)


def _report(variants: list[Variant], rounds: int, python: str) -> None:
    base = statistics.median(variants[0].times)
    runc = subprocess.run(["runc", "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
    print(f"machine: {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}, {runc}")
    print(f"gpuhook's interpreter: {python}; rounds: {rounds}, variants interleaved in shuffled order\n")
    print("| variant | median ms | p90 ms | ratio to runc |")
    print("|---|---:|---:|---:|")
    for v in variants:
        med = statistics.median(v.times)
        p90 = statistics.quantiles(v.times, n=10)[-1]
        print(f"| {v.name} | {med * 1000:.1f} | {p90 * 1000:.1f} | {med / base:.2f} |")
    if not (REPO / "dist/gpuhook/gpuhook-runtime").exists():
        print("| PyInstaller binary | not built (bash packaging/build-binary.sh) | | |")
    _report_scaling(variants)


def _report_scaling(variants: list[Variant]) -> None:
    """The cost of each added GPU between the scaling points: linear growth keeps it flat."""
    points: dict[str, list[tuple[int, float]]] = {}
    for v in variants:
        if v.name.startswith("scaling"):
            _, vendor, count = _order(v.name)
            points.setdefault(vendor, []).append((count, statistics.median(v.times)))
    for vendor, pts in points.items():
        steps = [f"{a}->{b}: {(tb - ta) / (b - a) * 1000:.2f}" for (a, ta), (b, tb) in itertools.pairwise(pts)]
        if steps:
            print(f"\nscaling, {vendor}: ms per added GPU " + ", ".join(steps))


if __name__ == "__main__":
    sys.exit(main())
