"""Peak memory of gpuhook's own processes on a container start, on a simulated host (run as root).

    .venv/bin/python tests/perf/memory.py [--python /usr/bin/python3.11]

Each variant runs `gpuhook-runtime create` with the runtime set to /bin/true, so what is measured is gpuhook's
part alone: the peak resident set of the process the engine starts (GNU time's %M), for the direct path and with
the warm helper (then the native front end's; the work is done by a worker forked from the daemon, whose
memory is reported beside). Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import shutil
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

TIME = "/usr/bin/time"  # GNU time (Debian's `time` package)
ROWS = (("pass-through (no request)", {}),
        ("nvidia 1 of 8 GPUs", {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}),
        ("nvidia all 8 GPUs", {"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": "nvidia"}),
        ("amd 1 of 8 GPUs", {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"}),
        ("amd all 8 GPUs", {"gpuhook.dev/gpus": "all", "gpuhook.dev/vendor": "amd"}))


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--python", default=sys.executable, help="gpuhook's interpreter (install.sh: /usr/bin/python3)")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("memory.py builds a simulated host with device nodes: run it as root")
    work = Path(tempfile.mkdtemp(prefix="gpuhook-memory-"))
    try:
        _measure(work, args.python, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _measure(work: Path, python: str, runs: int) -> None:
    paths = sysconfig.get_paths()
    bindir = work / "bin"
    bindir.mkdir()
    shim = write_launchers(str(bindir), python, [str(REPO / "hook"), paths["purelib"], paths["platlib"]])[
        "gpuhook-runtime"]
    host = build_host(str(work / "host"), HostSpec(nvidia=8, amd=8))
    config = work / "config.toml"
    config.write_text(f'host_root = "{host}"\nruntime = "/bin/true"\nstate_dir = "{work}/state"\n')
    sock = work / "warm.sock"
    daemon = subprocess.Popen([str(bindir / "gpuhook"), "warm", "--socket", str(sock)],
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config)},
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not sock.exists():
            time.sleep(0.05)
        time.sleep(1)
        print(f"gpuhook's interpreter: {python}; medians of {runs} runs; MiB\n")
        print("| variant | direct path: peak RSS | with the warm helper: peak RSS |")
        print("|---|---:|---:|")
        for name, annotations in ROWS:
            bundle = work / f"b-{len(name)}-{abs(hash(name))}"
            make_bundle(str(bundle), oci_config(["true"], annotations=annotations))
            spec = (bundle / "config.json").read_bytes()
            direct = [_peak(shim, bundle, spec, config, "") for _ in range(runs)]
            warm = [_peak(shim, bundle, spec, config, str(sock)) for _ in range(runs)]
            print(f"| {name} | {statistics.median(direct):.1f} | {statistics.median(warm):.1f} |")
        time.sleep(1)
        print(f"\nthe warm helper: the daemon {_status(daemon.pid, 'VmRSS')} RSS; its waiting workers' private "
              f"memory (copied for the next call): {_private_of_spares(daemon.pid)}; the helper and its workers "
              f"in all, proportional set size: {_pss_of_helper(daemon.pid) / 1024:.1f} MiB (target <= 30)")
    finally:
        daemon.terminate()
        daemon.wait()


def _peak(shim: str, bundle: Path, spec: bytes, config: Path, sock: str) -> float:
    """Peak RSS (MiB) of the process an engine would start, counted from its exec: GNU time forks it from its
    own small process (a spawn from this Python would count this interpreter's pages)."""
    (bundle / "config.json").write_bytes(spec)
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config), "GPUHOOK_WARM_SOCKET": sock}
    done = subprocess.run([TIME, "-f", "%M", shim, "create", "--bundle", str(bundle), "memory"], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{bundle}: gpuhook-runtime failed: {done.stderr.strip()}")
    return int(done.stderr.split()[-1]) / 1024


def _status(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return f"{int(line.split()[1]) / 1024:.1f} MiB"
    return "?"


def _children(daemon: int) -> list[str]:
    return Path(f"/proc/{daemon}/task/{daemon}/children").read_text().split()


def _rollup_kib(pid: str, fields: tuple[str, ...]) -> int | None:
    """The sum of `fields` (e.g. "Pss:") of the process's smaps_rollup, in KiB; None once it has ended."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return None  # it took a call and ended meanwhile
    return sum(int(ln.split()[1]) for ln in rollup if ln.startswith(fields))


def _private_of_spares(daemon: int) -> str:
    """The private memory of the daemon's waiting workers (what each costs the host while it waits)."""
    sizes = [_rollup_kib(pid, ("Private_Clean:", "Private_Dirty:")) for pid in _children(daemon)]
    return ", ".join(f"{k / 1024:.1f} MiB" for k in sizes if k is not None) or "none"


def _pss_of_helper(daemon: int) -> int:
    """The proportional set size (KiB) of the daemon and its waiting workers together: what the helper costs the
    host, shared pages counted once."""
    return sum(k or 0 for k in (_rollup_kib(pid, ("Pss:",)) for pid in [str(daemon), *_children(daemon)]))


if __name__ == "__main__":
    sys.exit(main())
