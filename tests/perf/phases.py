"""Where the Python shim's GPU path spends its time, phase by phase, on a simulated host (run as root).

    .venv/bin/python tests/perf/phases.py [--rounds 30] [--python /usr/bin/python3.11]

bench.py measures whole container starts; this splits the shim's own part. Each round starts fresh
processes (interleaved, shuffled): the bare interpreter, the real gpuhook-runtime-py in front of
/bin/true (so runc's share is left out), and a probe that walks the shim's GPU path with a clock
between phases. Medians in ms. Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hook"))

from gpuhook.cli.launcher import write_launchers  # noqa: E402
from gpuhook.testing.bundle import make_bundle, oci_config  # noqa: E402
from gpuhook.testing.simulate import HostSpec, build_host  # noqa: E402

# the shim's GPU path with a clock between phases (the same calls shim.main and inject.edited_spec make)
_PROBE = """
import time
t = [time.perf_counter()]
import sys
sys.path[:0] = PATH
from gpuhook.configfile import config_path, read_config
from gpuhook.cli import shim
t.append(time.perf_counter())
path, explicit = config_path()
table, validated = read_config(path, explicit)
from gpuhook.gpu_path import inject
from gpuhook import logs
from gpuhook.apply import containers
from gpuhook.apply import spec
from gpuhook.config import from_table
t.append(time.perf_counter())
with open(BUNDLE + "/config.json", "rb") as f:
    s = spec.load_spec(f.read(), "config.json")
config = from_table(table, path, validated)
t.append(time.perf_counter())
prepared = inject.prepare(s, BUNDLE, config, logs.logger(config, "phases", "shim"))
t.append(time.perf_counter())
new = spec.apply_edits(s, prepared.edits, spec.rootfs(s, BUNDLE), config.ldconfig)
containers.save(config.state_dir,
                containers.ContainerRecord(id="phases", drivers=prepared.drivers, runtime_root="/run/runc",
                                           gpus=prepared.gpus))
spec.write_atomic(BUNDLE + "/config.json.out", new)
t.append(time.perf_counter())
print(" ".join(str(b - a) for a, b in zip(t, t[1:])))
"""
PHASES = ("imports: os, the shim, the config reader", "imports: the GPU path (inject, spec, config, vendors, ...)",
          "config.json read, config checked", "request, discovery, plan, procfs copy / compatibility",
          "edits applied, container record, atomic write")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--python", default=sys.executable, help="gpuhook's interpreter (install.sh: /usr/bin/python3)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("phases.py builds a simulated host with device nodes: run it as root")
    work = Path(tempfile.mkdtemp(prefix="gpuhook-phases-"))
    path = [str(REPO / "hook"), sysconfig.get_paths()["purelib"]]
    launcher = write_launchers(str(work), args.python, path)["gpuhook-runtime-py"]
    host = build_host(str(work / "host"), HostSpec(nvidia=8, amd=8))
    config = work / "config.toml"
    config.write_text(f'host_root = "{host}"\nruntime = "/bin/true"\nstate_dir = "{work / "state"}"\n')
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)}
    specs = {}
    for vendor in ("nvidia", "amd"):
        bundle = work / vendor
        make_bundle(str(bundle), oci_config(["true"], annotations={"gpuhook.dev/gpus": "all",
                                                                   "gpuhook.dev/vendor": vendor}))
        specs[vendor] = (bundle, (bundle / "config.json").read_bytes())
    jobs = [("interpreter start (python -I -S)", None, [args.python, "-I", "-S", "-c", "pass"])]
    for vendor, (bundle, _) in specs.items():
        jobs.append((f"gpuhook-runtime-py end to end, {vendor}", vendor,
                     [launcher, "create", "--bundle", str(bundle), "phases"]))
        probe = _PROBE.replace("PATH", repr(path), 1).replace("BUNDLE", repr(str(bundle)))
        jobs.append((f"probe {vendor}", vendor, [args.python, "-I", "-S", "-c", probe]))
    times: dict[str, list[list[float]]] = {name: [] for name, _, _ in jobs}
    for r in range(args.rounds + 1):  # round 0 warms caches (config cache, pyc files) and is dropped
        random.shuffle(jobs)
        for name, vendor, argv in jobs:
            if vendor:
                (specs[vendor][0] / "config.json").write_bytes(specs[vendor][1])
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                sys.exit(f"{name} failed: {done.stderr.strip()}")
            if r:
                parts = [float(x) for x in done.stdout.split()] if name.startswith("probe") else [elapsed]
                times[name].append(parts)
    _report(times, args.rounds, args.python)
    return 0


def _report(times: dict[str, list[list[float]]], rounds: int, python: str) -> None:
    print(f"gpuhook's interpreter: {python}; {rounds} rounds; medians in ms\n")
    print("| phase | nvidia all 8 | amd all 8 |")
    print("|---|---:|---:|")

    def med(name: str, i: int = 0) -> float:
        return statistics.median(row[i] for row in times[name]) * 1000

    start = med("interpreter start (python -I -S)")
    print(f"| interpreter start (python -I -S) | {start:.1f} | {start:.1f} |")
    for i, phase in enumerate(PHASES):
        print(f"| {phase} | {med('probe nvidia', i):.1f} | {med('probe amd', i):.1f} |")
    ends = [med(f"gpuhook-runtime-py end to end, {v}") for v in ("nvidia", "amd")]
    print(f"| gpuhook-runtime-py end to end (in front of /bin/true) | {ends[0]:.1f} | {ends[1]:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
