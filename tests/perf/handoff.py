"""gpuhook's `create` split where the runtime starts: the time until runc runs, and runc's own time after it
(run as root, on the product as installed).

    .venv/bin/python tests/perf/handoff.py --installed PREFIX/bin [--rounds 40] [--vendor nvidia|amd]

bench.py times whole cycles; this says which part of a GPU container's `create` is gpuhook's own work and which
is runc running slower after it. The runtime gpuhook execs is a small C program (compiled here with cc) that
notes the monotonic clock in a file and execs runc, so each sample gives "until runc runs" (the clock before the
call to the note) and "runc's create" (the note to the call's return). Rows, interleaved in shuffled order:

- runc on the very spec gpuhook wrote (its edits and its createContainer hook): the same note, nothing before it;
- C preludes that spend N ms of CPU (a clock loop: no memory, no files, no Python) and then exec the note: what
  CPU spent just before runc costs runc itself on this machine;
- gpuhook as installed: directly (a Python process per call) and through its warm helper (started here).

Every container is deleted through the row's own runtime, as engines do. Medians in ms. Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench  # tests/perf/bench.py: its variants, runtime calls, warm helper start, subreaper, cleanup
from bench import Variant

from gpuhook.testing.bundle import make_bundle, make_rootfs, oci_config
from gpuhook.testing.simulate import HostSpec, build_host

_NOTE = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* spend $HANDOFF_SPIN ms of CPU (none when unset), note the monotonic clock in $HANDOFF_NOTE, then exec runc
   with the same arguments */
int main(int argc, char **argv) {
    struct timespec a, b;
    long spin = getenv("HANDOFF_SPIN") ? atol(getenv("HANDOFF_SPIN")) : 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < spin * 1000000L);
    int fd = open(getenv("HANDOFF_NOTE"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return 125;
    dprintf(fd, "%lld.%09ld\n", (long long)b.tv_sec, b.tv_nsec);
    close(fd);
    argv[0] = "runc";
    execvp("runc", argv);
    return 126;
}
"""
SPINS = (2, 5, 10, 20)
ALONE = "runc on gpuhook's spec (with its hook)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--installed", required=True, metavar="BINDIR", help="install.sh's PREFIX/bin")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--vendor", choices=("nvidia", "amd"), default="nvidia")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("handoff.py runs containers on a simulated host with device nodes: run it as root")
    bench.become_subreaper()
    work = Path(tempfile.mkdtemp(prefix=bench.PREFIX))
    try:
        rows = _rows(work, Path(args.installed), args.vendor)
        _run(rows, args.rounds, work)
        _report(rows, args)
    finally:
        bench.cleanup(work, keep=False)
    return 0


def _rows(work: Path, bindir: Path, vendor: str) -> list[Variant]:
    note = work / "note"
    subprocess.run(["cc", "-O2", "-x", "c", "-", "-o", str(note)], input=_NOTE, text=True, check=True)
    host = build_host(str(work / "host"), HostSpec(nvidia=8, amd=8))
    config = work / "config.toml"
    config.write_text(f'host_root = "{host}"\nruntime = "{note}"\nstate_dir = "{work}/state"\n')
    rootfs = work / "rootfs"
    make_rootfs(str(rootfs))
    base = {"PATH": os.environ["PATH"], "HANDOFF_NOTE": str(work / "noted")}
    gpu = work / "gpu"
    make_bundle(str(gpu), oci_config(["true"], annotations={"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": vendor}),
                str(rootfs))
    shim = str(bindir / "gpuhook-runtime")
    on = {**base, "GPUHOOK_CONFIG": str(config)}
    rows = [_row("gpuhook direct", shim, gpu, {**on, "GPUHOOK_WARM_SOCKET": ""}),
            _row("gpuhook through the warm helper", shim, gpu, {**on, "GPUHOOK_WARM_SOCKET": str(work / "warm.sock")})]
    # the spec gpuhook writes, for runc alone: one create through the shim, its config.json kept
    spec_id = f"{bench.PREFIX}{os.getpid()}-spec"
    _create(rows[0], spec_id, work)
    floor = work / "floor"
    bench.runc_bundle(gpu, floor, rootfs, hooks=True)
    _delete(rows[0], spec_id)
    rows.append(_row(ALONE, str(note), floor, base))
    rows += [_row(f"{ms} ms of CPU, then runc on that spec", str(note), floor, {**base, "HANDOFF_SPIN": str(ms)})
             for ms in SPINS]
    bench.start_warm(work, config, bindir)
    return rows


def _row(name: str, runtime: str, bundle: Path, env: dict[str, str]) -> Variant:
    """One way of reaching runc: the runtime called, its bundle (config.json restored before each call), its env;
    its samples in times["before"] (until runc runs) and times["runc"] (runc's create)."""
    return Variant(name, [runtime], bundle, env, (bundle / "config.json").read_bytes(),
                   times={"before": [], "runc": []})


def _run(rows: list[Variant], rounds: int, work: Path) -> None:
    order = list(rows)
    for r in range(rounds + 1):  # round 0 warms the caches and is dropped
        random.shuffle(order)
        for row in order:
            cid = f"{bench.PREFIX}{os.getpid()}-{r}-{rows.index(row)}"
            start = time.clock_gettime(time.CLOCK_MONOTONIC)
            _create(row, cid, work)
            end = time.clock_gettime(time.CLOCK_MONOTONIC)
            noted = float((work / "noted").read_text())
            _delete(row, cid)
            if r:
                row.times["before"].append(noted - start)
                row.times["runc"].append(end - noted)


def _create(row: Variant, cid: str, work: Path) -> None:
    """`create` through the row's runtime, as bench.py calls it (stderr to a file); a failure ends the run."""
    (row.bundle / "config.json").write_bytes(row.spec)
    try:
        bench.call(row, "create", ["create", "--bundle", str(row.bundle), "--pid-file", str(work / "pid"), cid],
                   work / "stderr")
    except bench.StepFailed as e:
        sys.exit(str(e))


def _delete(row: Variant, cid: str) -> None:
    """Delete through the row's runtime (gpuhook's drops its record), then reap the container's init."""
    subprocess.run([*row.runtime, "delete", "--force", cid], env=row.env, capture_output=True, check=False)
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _report(rows: list[Variant], args: argparse.Namespace) -> None:
    runc = subprocess.run(["runc", "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
    print(f"machine: {os.cpu_count()} CPUs, {runc}; gpuhook as installed in {args.installed}; "
          f"{args.vendor} 1 of 8 GPUs; {args.rounds} rounds, interleaved; medians in ms\n")
    print("| row | until runc runs | runc's create | create in all |")
    print("|---|---:|---:|---:|")
    for row in rows:
        before, runc_ = row.times["before"], row.times["runc"]
        both = [a + b for a, b in zip(before, runc_, strict=True)]
        print(f"| {row.name} | {_ms(before)} | {_ms(runc_)} | {_ms(both)} |")
    alone = statistics.median(next(r for r in rows if r.name == ALONE).times["runc"])
    print("\nrunc's create after the row's work, more than on its own:",
          ", ".join(f"{r.name.split(',')[0]} {(statistics.median(r.times['runc']) - alone) * 1000:+.1f} ms"
                    for r in rows if r.name != ALONE))


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.2f}"


if __name__ == "__main__":
    sys.exit(main())
