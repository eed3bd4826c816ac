"""A real Prometheus (Debian's, with its own config and data directory, on loopback) scrapes `gpuhook exporter`
while real runc GPU containers with tuning run through gpuhook, shim and hook mode, on a simulated host whose stub
NVML and amd_smi report set telemetry. Prometheus's HTTP API must show each container on exactly its GPUs with its
pod, the tuning with its original, the lease, the stub's numbers, the counters; the dashboard's queries must run;
after the containers stop, the allocations are gone and the tuning is back to the original. The textfile mode is
read back with prometheus_client's parser."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuhook.testing.bundle import make_bundle, oci_config
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.amd import sim as sim_amd
from gpuhook.vendors.nvidia import sim as sim_nvidia

from . import conftest

REPO = Path(__file__).parents[2]
NV = [f"GPU-{i:08x}-5a1e-4000-8000-{0xD00D0000 + i:012x}" for i in range(2)]
AMD1 = "0x5a1e000000000001"
Series = list[dict[str, Any]]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as r:
        data: bytes = r.read()
        return data


def _until(what: str, probe: Callable[[], Any], timeout: float = 15.0) -> Any:
    """probe() once it returns something true; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = probe()
        except OSError:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


class Prometheus:
    """Debian's prometheus, scraping one target every second."""

    def __init__(self, tmp: Path, target: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            if os.environ.get("CI"):
                pytest.fail("CI must run the exporter's Prometheus test: apt-get install prometheus")
            pytest.skip("needs Debian's prometheus package")
        (tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: gpuhook\n    static_configs: [{{targets: ['{target}']}}]\n")
        self.url = f"http://127.0.0.1:{_port()}"
        self.log = open(tmp / "prometheus.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen([binary, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/data",
                                      f"--web.listen-address={self.url.removeprefix('http://')}", "--log.level=warn"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        _until("prometheus to be ready", lambda: _get(f"{self.url}/-/ready"), 30)

    def query(self, expr: str) -> Series:
        """An instant query's result (vector: [{"metric": labels, "value": [t, "v"]}])."""
        reply = json.loads(_get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert reply["status"] == "success", reply
        result: Series = reply["data"]["result"]
        return result

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)
        self.log.close()


def _labels(series: Series, drop: tuple[str, ...] = ("instance", "job", "__name__")) -> list[dict[str, str]]:
    return _sorted([{k: v for k, v in s["metric"].items() if k not in drop} for s in series])


def _sorted(labels: list[dict[str, str]]) -> list[dict[str, str]]:
    return sorted(labels, key=lambda d: sorted(d.items()))


def _value(series: Series) -> float:
    assert len(series) == 1, series
    return float(series[0]["value"][1])


class Node:
    """A simulated 2 NVIDIA + 2 AMD host, gpuhook's config and its exporter."""

    def __init__(self, tmp: Path, base_rootfs: str) -> None:
        self.tmp, self.base = tmp, base_rootfs
        self.host = build_host(str(tmp / "host"), HostSpec(nvidia=2, amd=2))
        self.listen = f"127.0.0.1:{_port()}"
        self.config = tmp / "config.toml"
        self.config.write_text(f'host_root = "{self.host}"\nstate_dir = "{tmp}/state"\nlog_file = "{tmp}/log"\n'
                               f'[exporter]\nlisten = "{self.listen}"\n')
        self.env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(self.config)}
        self.started: list[str] = []
        self.err = open(tmp / "exporter.err", "w")  # noqa: SIM115 (closed in close)
        self.exporter = subprocess.Popen([conftest.GPUHOOK, "exporter"], env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=self.err, stderr=self.err)
        _until("the exporter", lambda: _get(f"http://{self.listen}/metrics"))

    def start(self, annotations: dict[str, str], hook_mode: bool = False) -> tuple[str, int, str]:
        """A detached `sleep 60` through the shim (or plain runc with gpuhook's hooks): id, status, stderr."""
        cid = "x-" + uuid.uuid4().hex[:10]
        bundle = self.tmp / cid
        spec = oci_config(["sleep", "60"], annotations=annotations)
        if hook_mode:
            hook = {"path": conftest.GPUHOOK, "env": [f"GPUHOOK_CONFIG={self.config}"]}
            spec["hooks"] = {"prestart": [{**hook, "args": ["gpuhook", "hook", "prestart"]}],
                             "poststop": [{**hook, "args": ["gpuhook", "hook", "poststop"]}]}
        make_bundle(str(bundle), spec, self.base)
        with open(bundle / "stderr", "w") as err:  # a pipe would stay open as long as the container lives
            rc = subprocess.run(["runc" if hook_mode else conftest.SHIM, "run", "-d", "--bundle", str(bundle), cid],
                                env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                timeout=60, check=False).returncode
        if rc == 0:
            self.started.append(cid)
        return cid, rc, (bundle / "stderr").read_text()

    def stop(self, cid: str) -> None:
        subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True, check=False)
        _until(f"{cid} to stop", lambda: '"status": "stopped"' in subprocess.run(
            ["runc", "state", cid], capture_output=True, text=True, check=False).stdout, 10)
        subprocess.run(["runc", "delete", cid], capture_output=True, check=False)  # poststop restores
        self.started.remove(cid)

    def textfile(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """`gpuhook exporter --textfile DIR --once`, read back with prometheus_client's parser."""
        out = self.tmp / "textfile"
        done = subprocess.run([conftest.GPUHOOK, "exporter", "--textfile", str(out), "--once"], env=self.env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in out.iterdir()) == ["gpuhook.prom"]
        got: dict[str, list[tuple[dict[str, str], float]]] = {}
        for fam in text_string_to_metric_families((out / "gpuhook.prom").read_text()):
            for s in fam.samples:
                got.setdefault(s.name, []).append((s.labels, s.value))
        return got

    def close(self) -> None:
        for cid in list(self.started):
            self.stop(cid)
        self.exporter.send_signal(signal.SIGTERM)
        assert self.exporter.wait(20) == 0
        self.err.close()


@pytest.fixture
def node(tmp_path: Path, base_rootfs: str) -> Iterator[Node]:
    n = Node(tmp_path / "node", base_rootfs)
    try:
        yield n
    finally:
        n.close()


@pytest.fixture
def prometheus(tmp_path: Path, node: Node) -> Iterator[Prometheus]:
    p = Prometheus(tmp_path, node.listen)
    try:
        yield p
    finally:
        p.stop()


def _dashboard_queries() -> list[str]:
    dash = json.loads((REPO / "packaging/grafana/gpuhook.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    subst = {"$instance": ".*", "$vendor": ".*", "$namespace": ".*", "$__range": "1m", "$__rate_interval": "1m"}
    return [re.sub(r"\$\w+", lambda m: subst[m.group(0)], e) for e in exprs]


def test_prometheus_sees_who_holds_which_gpu_the_tuning_and_the_telemetry(node: Node, prometheus: Prometheus) -> None:
    sim_nvidia.set_telemetry(node.host, 0, utilization=42, memory_used=12 << 30, power_mw=312500, temperature=64,
                             clock_mhz=1755)
    sim_amd.set_telemetry(node.host, 1, utilization=77, power_mw=455000, temperature=71)
    trainer, rc, err = node.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia",
                                   "gpuhook.dev/clocks": "1500", "gpuhook.dev/power-limit": "400",
                                   "io.kubernetes.cri.container-type": "container",
                                   "io.kubernetes.cri.sandbox-name": "trainer-0",
                                   "io.kubernetes.cri.sandbox-namespace": "ml",
                                   "io.kubernetes.cri.container-name": "main"})
    assert rc == 0, err
    server, rc, err = node.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "amd",
                                  "gpuhook.dev/perf-level": "high", "io.kubernetes.cri-o.ContainerType": "container",
                                  "io.kubernetes.pod.name": "infer-0",
                                  "io.kubernetes.pod.namespace": "serving",
                                  "io.kubernetes.container.name": "server"})  # CRI-O's annotations
    assert rc == 0, err
    alone, rc, err = node.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia",
                                 "gpuhook.dev/exclusive": "true"}, hook_mode=True)
    assert rc == 0, err
    _, rc, err = node.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/clocks": "1200"})
    assert rc != 0 and "clocks" in err  # a conflict: refused by the shim, PolicyError
    _, rc, err = node.start({"gpuhook.dev/gpus": "banana"})
    assert rc != 0  # RequestError

    _until("three allocations", lambda: len(prometheus.query("gpuhook_gpu_allocated")) == 3)
    assert _value(prometheus.query('up{job="gpuhook"}')) == 1
    assert _labels(prometheus.query(f'gpuhook_gpu_allocated{{container_id="{trainer}"}}')) == [
        {"vendor": "nvidia", "uuid": NV[0], "container_id": trainer, "pod": "trainer-0", "namespace": "ml",
         "container": "main"}]
    assert _labels(prometheus.query(f'gpuhook_gpu_allocated{{container_id="{server}"}}')) == [
        {"vendor": "amd", "uuid": AMD1, "container_id": server, "pod": "infer-0", "namespace": "serving",
         "container": "server"}]
    assert _labels(prometheus.query(f'gpuhook_gpu_allocated{{container_id="{alone}"}}')) == [
        {"vendor": "nvidia", "uuid": NV[1], "container_id": alone}]  # no pod: Prometheus keeps no empty label
    assert _labels(prometheus.query("gpuhook_tuning_setting")) == _sorted([
        {"vendor": "nvidia", "uuid": NV[0], "setting": "clocks", "current": "1500-1500", "original": "unlocked"},
        {"vendor": "nvidia", "uuid": NV[0], "setting": "power_limit", "current": "400000", "original": "700000"},
        {"vendor": "amd", "uuid": AMD1, "setting": "perf_level", "current": "high", "original": "auto"}])
    assert [float(s["value"][1]) for s in prometheus.query("gpuhook_tuning_holders")] == [1.0, 1.0, 1.0]
    assert _labels(prometheus.query("gpuhook_gpu_exclusive")) == [{"vendor": "nvidia", "uuid": NV[1],
                                                                   "container_id": alone}]
    telemetry = {"utilization_ratio": 0.42, "memory_used_bytes": 12 << 30, "power_watts": 312.5,
                 "temperature_celsius": 64, "sm_clock_hertz": 1500e6, "power_limit_watts": 400}  # clocks locked
    for name, value in telemetry.items():
        assert _value(prometheus.query(f'gpuhook_gpu_{name}{{uuid="{NV[0]}"}}')) == value, name
    for name, value in {"utilization_ratio": 0.77, "power_watts": 455, "temperature_celsius": 71}.items():
        assert _value(prometheus.query(f'gpuhook_gpu_{name}{{uuid="{AMD1}"}}')) == value, name
    assert [float(s["value"][1]) for s in prometheus.query("gpuhook_gpu_healthy")] == [1.0] * 4
    assert _value(prometheus.query("gpuhook_ledger_ok")) == 1
    counted = {(s["metric"].get("vendor") or s["metric"]["reason"]): float(s["value"][1]) for s in
               prometheus.query("gpuhook_containers_prepared_total or gpuhook_containers_refused_total")}
    assert counted == {"nvidia": 2, "amd": 1, "PolicyError": 1, "RequestError": 1}  # the shim's hook counts no twice
    for expr in _dashboard_queries():
        prometheus.query(expr)  # every panel's PromQL runs against the exporter's real series
    by_pod = prometheus.query(_dashboard_queries()[6])  # "GPU utilisation by pod"
    assert {(s["metric"].get("pod", ""), s["metric"]["container_id"], float(s["value"][1])) for s in by_pod} == {
        ("trainer-0", trainer, 0.42), ("infer-0", server, 0.77), ("", alone, 0.0)}

    written = node.textfile()  # the textfile mode sees the same
    held = sorted(lbl["container_id"] for lbl, _ in written["gpuhook_gpu_allocated"])
    assert held == sorted([trainer, server, alone])
    assert ({"vendor": "nvidia", "uuid": NV[0]}, 0.42) in written["gpuhook_gpu_utilization_ratio"]

    for cid in (trainer, server, alone):
        node.stop(cid)
    _until("the allocations to go", lambda: prometheus.query("gpuhook_gpu_allocated") == []
           and prometheus.query("gpuhook_tuning_setting") == [] and prometheus.query("gpuhook_gpu_exclusive") == [])
    restored = {"power_limit_watts": 700, "sm_clock_hertz": 1755e6}
    _until("the original tuning", lambda: all(_value(prometheus.query(f'gpuhook_gpu_{n}{{uuid="{NV[0]}"}}')) == v
                                              for n, v in restored.items()))
    assert sim_nvidia.set_telemetry(node.host, 0).clock_mhz == 1755
    assert Path(f"{node.host}/var/lib/gpuhook-sim/nvml").read_text().splitlines()[0] == "0 0 0 700000 0"
    assert Path(f"{node.host}/var/lib/gpuhook-sim/amdsmi").read_text().splitlines()[1].split()[:2] == ["1", "0"]
    assert "gpuhook_gpu_allocated" not in node.textfile()
