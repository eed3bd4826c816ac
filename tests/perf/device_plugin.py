"""The device plugin's cost on a node with 16 simulated GPUs (run as root): Allocate latency as the kubelet
sees it (one container, one GPU, over the real gRPC socket, record written) and the plugin's memory.

    .venv/bin/python tests/perf/device_plugin.py [--calls 200] [--gpus 16] [--replicas 1]

Targets (issue #14): Allocate median <= 5 ms, RSS <= 40 MiB. Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hook"))
sys.path.insert(0, str(REPO))

from tests.support.kubelet import FakeKubelet  # noqa: E402

from gpuhook.cli.launcher import write_launchers  # noqa: E402
from gpuhook.testing.simulate import HostSpec, build_host  # noqa: E402


def _rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--gpus", type=int, default=16)
    p.add_argument("--replicas", type=int, default=1)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuhook-dp-bench-") as tmp:
        work = Path(tmp)
        host = build_host(str(work / "host"), HostSpec(nvidia=args.gpus, numa_nodes=2))
        config = work / "gpuhook.toml"
        config.write_text(f'host_root = "{host}"\nstate_dir = "{work}/state"\n'
                          f"[kubernetes]\nreplicas = {args.replicas}\n")
        (work / "bin").mkdir()
        gpuhook = write_launchers(str(work / "bin"), sys.executable,
                                  [str(REPO / "hook"), sysconfig.get_paths()["purelib"]])["gpuhook"]
        env = {**os.environ, "GPUHOOK_CONFIG": str(config)}
        # As the DaemonSet's init container does before the plugin starts: `gpuhook labels` reads (validates and
        # caches) the config, so the plugin starts on the cached table.
        subprocess.run([gpuhook, "labels", "--output", "-"], env=env, stdout=subprocess.DEVNULL, check=True)
        kubelet = FakeKubelet(str(work / "device-plugins")).start()
        plugin = subprocess.Popen([gpuhook, "device-plugin", "--kubelet-dir", kubelet.directory],
                                  env=env, stderr=subprocess.DEVNULL)
        try:
            client = kubelet.plugin(kubelet.wait_registered("nvidia.com/gpu", timeout=30)).watch()
            ids = sorted(client.wait_for(lambda d: len(d) == args.gpus * args.replicas))
            times = []
            for i in range(args.calls):
                t0 = time.perf_counter()
                client.allocate([ids[i % len(ids)]])
                times.append((time.perf_counter() - t0) * 1000)
            pref = []
            for _ in range(args.calls // 4):
                t0 = time.perf_counter()
                client.preferred(ids, 4)
                pref.append((time.perf_counter() - t0) * 1000)
            rss, anon, files = (_rss_kib(plugin.pid, f) / 1024 for f in ("VmRSS", "RssAnon", "RssFile"))
            client.close()
        finally:
            plugin.terminate()
            plugin.wait(10)
            kubelet.stop()
    times.sort()
    print(f"device plugin, {args.gpus} GPUs x {args.replicas} shares, {args.calls} calls, {os.cpu_count()} CPUs")
    print("| measure | median | p90 | target |\n|---|---:|---:|---:|")
    print(f"| Allocate (1 GPU, record written) | {statistics.median(times):.2f} ms | "
          f"{times[int(len(times) * 0.9)]:.2f} ms | <= 5 ms |")
    pref.sort()
    print(f"| GetPreferredAllocation (4 of {len(ids)}) | {statistics.median(pref):.2f} ms | "
          f"{pref[int(len(pref) * 0.9)]:.2f} ms | |")
    print(f"| plugin RSS (VmRSS) | {rss:.1f} MiB | | <= 40 MiB |")
    print(f"| of which anonymous / file-backed (shared libraries) | {anon:.1f} / {files:.1f} MiB | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
