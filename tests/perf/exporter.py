"""The exporter's cost on a node with 16 simulated GPUs (run as root): a scrape as Prometheus sees it (HTTP GET
/metrics of the real `gpuhook exporter`, with 16 running containers' records and a ledger of 32 tuned settings),
for NVIDIA (NVML), AMD (amdsmi, and amdgpu's sysfs files) and a mixed node; the exporter's memory; and what the
counters cost the short-lived shim and hooks (one append per container start).

    .venv/bin/python tests/perf/exporter.py [--scrapes 100] [--gpus 16]

Target (issue #18): a scrape with 16 GPUs <= 50 ms. Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hook"))

from gpuhook.apply import containers, counters  # noqa: E402
from gpuhook.cli.launcher import write_launchers  # noqa: E402
from gpuhook.host.processes import start_time  # noqa: E402
from gpuhook.host.root import Root  # noqa: E402
from gpuhook.testing.simulate import HostSpec, build_host  # noqa: E402
from gpuhook.vendors.discover import discover  # noqa: E402


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _state(work: Path, host: str) -> str:
    """16 live containers (one GPU each, pod names), a ledger with two tuned settings per GPU held by them."""
    state, runtime = work / "state", work / "runc"
    me = {"pid": os.getpid(), "start": start_time(os.getpid())}
    gpus = [g for v in discover(Root(host)).vendors for g in v.gpus]
    settings = {}
    for i, g in enumerate(gpus):
        cid = f"bench-{i}"
        (runtime / cid).mkdir(parents=True)
        (runtime / cid / "state.json").write_text("{}")
        containers.save(str(state), containers.ContainerRecord(
            id=cid, drivers=((g.vendor, "x"),), runtime_root=str(runtime), gpus=(g.uuid or g.pci,), pod=f"job-{i}",
            namespace="bench", container="main"))
        for name, value in (("clocks", "1500-1500"), ("power_limit", "400000")):
            settings[f"{g.vendor}:{g.uuid}:{name}"] = {
                "vendor": g.vendor, "gpu": g.uuid or g.pci, "index": g.index, "pci": g.pci, "device": g.uuid,
                "name": name, "original": "unlocked", "value": value, "holders": [{"id": cid, **me}], "seq": i}
        counters.bump(str(state), counters.PREPARED, g.vendor)
    (state / "ledger.json").write_text(json.dumps({"version": 1, "seq": 1, "settings": settings, "leases": {}}))
    return str(state)


def _variant(name: str, spec: HostSpec, scrapes: int, gpuhook: str, work: Path) -> None:
    host = build_host(str(work / name / "host"), spec)
    state = _state(work / name, host)
    port = 19835 + len(name)
    config = work / name / "gpuhook.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{state}"\n[exporter]\nlisten = "127.0.0.1:{port}"\n')
    exporter = subprocess.Popen([gpuhook, "exporter"], env={**os.environ, "GPUHOOK_CONFIG": str(config)},
                                stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=10).read()  # the first scrape opens NVML / amdsmi
                break
            except OSError:
                time.sleep(0.1)
        times, own = [], []
        for _ in range(scrapes):
            t0 = time.perf_counter()
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            times.append((time.perf_counter() - t0) * 1000)
            own += [float(ln.split()[-1]) * 1000 for ln in text.splitlines()
                    if ln.startswith("gpuhook_exporter_scrape_duration_seconds ")]
        allocated = sum(1 for ln in text.splitlines() if ln.startswith("gpuhook_gpu_allocated{"))
        times.sort()
        print(f"{name:28} median {statistics.median(times):5.1f} ms  p90 {times[int(len(times) * 0.9)]:5.1f} ms  "
              f"max {times[-1]:5.1f} ms  (gathering {statistics.median(own):4.1f} ms; {allocated} allocations, "
              f"{len(text) // 1024} KiB)  RSS {_rss_kib(exporter.pid) // 1024} MiB")
    finally:
        exporter.terminate()
        exporter.wait(10)


def _counter_cost(work: Path, n: int = 20000) -> None:
    state = str(work / "counter-state")
    counters.bump(state, counters.PREPARED, "nvidia")
    t0 = time.perf_counter()
    for _ in range(n):
        counters.bump(state, counters.PREPARED, "nvidia")
    per = (time.perf_counter() - t0) / n * 1e6
    t0 = time.perf_counter()
    for _ in range(1000):
        counters.totals(state)
    read = (time.perf_counter() - t0) / 1000 * 1e6
    probe = ("import time, sys; sys.path[:0] = {p!r}; import gpuhook.apply.state_dir; t = time.perf_counter(); "
             "from gpuhook.apply import counters; print((time.perf_counter() - t) * 1000)").format(
        p=[str(REPO / "hook")])
    imports = sorted(float(subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True,
                                          check=True).stdout) for _ in range(9))[4]
    print(f"counter bump (open O_APPEND, write 1 byte, close): {per:.1f} us; reading all counters: {read:.1f} us; "
          f"importing apply.counters on the GPU path (state_dir already loaded): {imports:.2f} ms")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scrapes", type=int, default=100)
    p.add_argument("--gpus", type=int, default=16)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuhook-exporter-bench-") as tmp:
        work = Path(tmp)
        (work / "bin").mkdir()
        gpuhook = write_launchers(str(work / "bin"), sys.executable,
                                  [str(REPO / "hook"), sysconfig.get_paths()["purelib"]])["gpuhook"]
        n = args.gpus
        for name, spec in ((f"nvidia {n} (NVML)", HostSpec(nvidia=n)), (f"amd {n} (amdsmi)", HostSpec(amd=n)),
                           (f"amd {n} (sysfs)", HostSpec(amd=n, amdsmi=False)),
                           (f"nvidia {n // 2} + amd {n - n // 2}", HostSpec(nvidia=n // 2, amd=n - n // 2))):
            _variant(name, spec, args.scrapes, gpuhook, work)
        _counter_cost(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
