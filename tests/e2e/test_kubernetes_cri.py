"""A Kubernetes GPU node, end to end: real containerd's CRI plugin with the gpuhook handler under
`requests = "allocated"`, the real `gpuhook device-plugin`, and the kubelet's part played over both real
protocols (registration, ListAndWatch, GetPreferredAllocation, Allocate; then RunPodSandbox, CreateContainer
with the Allocate answer's annotations, env, devices and mounts, StartContainer). Every check is on what the
containers see, the stub NVML's state, or the error containerd reports."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.cri_client import CriDevice, CriMount
from tests.support.kubelet import FakeKubelet, PluginClient

from . import conftest
from .cri_env import CriEnv, CriError, PodRun, start

pytestmark = pytest.mark.skipif((shutil.which("containerd") is None or shutil.which("ctr") is None)
                                and not os.environ.get("CI"), reason="containerd not installed")

CLUSTER = '[policy]\nrequests = "allocated"\n[kubernetes]\nhealth_interval = 0.5\n'


class Kubelet:
    """The kubelet's device manager and pod workers, as far as these tests need them."""

    def __init__(self, env: CriEnv, fake: FakeKubelet) -> None:
        self.env = env
        self.fake = fake
        self.plugins: dict[str, PluginClient] = {}
        self.given: set[str] = set()

    def plugin(self, resource: str) -> PluginClient:
        if resource not in self.plugins:
            self.plugins[resource] = self.fake.plugin(self.fake.wait_registered(resource, timeout=30)).watch()
            self.plugins[resource].wait_for(lambda d: len(d) >= 2 and set(d.values()) == {"Healthy"})
        return self.plugins[resource]

    def allocate(self, resource: str, count: int = 1) -> tuple[Any, list[str]]:
        """Admission: the preferred devices among the free healthy ones, then Allocate (one container); the
        answer and the devices, which stay given until `release`."""
        plugin = self.plugin(resource)
        free = sorted(i for i, h in plugin.devices.items() if h == "Healthy" and i not in self.given)
        chosen = plugin.preferred(free, count)
        assert len(chosen) == count, f"{resource}: {count} wanted, the node has {free}"
        self.given.update(chosen)
        return plugin.allocate(chosen).container_responses[0], chosen

    def release(self, devices: list[str]) -> None:
        """The pod is gone: its devices are free for the next admission."""
        self.given.difference_update(devices)

    def run(self, script: str, resource: str, count: int = 1, pod_annotations: Mapping[str, str] | None = None,
            keep_specs: bool = False) -> PodRun:
        """A pod asking resources.limits {resource: count}, its container created as the kubelet does."""
        answer, devices = self.allocate(resource, count)
        try:
            return self.start(answer, script, pod_annotations, keep_specs)
        finally:
            self.release(devices)

    def start(self, answer: Any, script: str, pod_annotations: Mapping[str, str] | None = None,
              keep_specs: bool = False) -> PodRun:
        """The pod's container created with the Allocate answer's annotations, env, devices and mounts."""
        return self.env.run_to_completion(
            script, handler="gpuhook", pod_annotations=pod_annotations, annotations=dict(answer.annotations),
            envs=dict(answer.envs), keep_specs=keep_specs,
            devices=[CriDevice(d.host_path, d.container_path, d.permissions) for d in answer.devices],
            mounts=[CriMount(m.host_path, m.container_path, m.read_only) for m in answer.mounts])


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Iterator[Kubelet]:
    d = tmp_path_factory.mktemp("k8s-node")
    with start(d, base_rootfs, conftest.SHIM, conftest.GPUHOOK, gpuhook_extra=CLUSTER) as env:
        fake = FakeKubelet(str(d / "device-plugins")).start()
        log = open(d / "device-plugin.log", "w")  # noqa: SIM115 (the plugin's stderr for its lifetime)
        plugin = subprocess.Popen([conftest.GPUHOOK, "device-plugin", "--kubelet-dir", fake.directory],
                                  env={**os.environ, "GPUHOOK_CONFIG": env.gpuhook_config}, stderr=log)
        kubelet = Kubelet(env, fake)
        try:
            yield kubelet
        finally:
            for p in kubelet.plugins.values():
                p.close()
            plugin.send_signal(signal.SIGTERM)
            plugin.wait(10)
            log.close()
            fake.stop()


def _devices(output: str) -> list[str]:
    return output.split()


def test_two_pods_asking_one_amd_gpu_each_get_different_render_nodes(node: Kubelet) -> None:
    admitted = [node.allocate("amd.com/gpu") for _ in range(2)]  # both pods admitted before either runs
    seen = []
    try:
        for answer, _ in admitted:
            r = node.start(answer, "ls /dev/dri")
            assert r.exit_code == 0, f"{r.output}\n{node.env.log_tail()}"
            renders = [n for n in _devices(r.output) if n.startswith("renderD")]
            assert len(renders) == 1, r.output
            seen.append(renders[0])
    finally:
        for _, devices in admitted:
            node.release(devices)
    assert seen[0] != seen[1], f"both pods got {seen[0]}"


def test_an_nvidia_pod_gets_exactly_its_gpu_and_a_working_libcuda(node: Kubelet) -> None:
    r = node.run("ls /dev; dlopen-probe libcuda.so.1", "nvidia.com/gpu")
    assert r.exit_code == 0, f"{r.output}\n{node.env.log_tail()}"
    gpus = [n for n in _devices(r.output) if n.startswith("nvidia") and n[6:].isdigit()]
    assert len(gpus) == 1, f"one /dev/nvidia<N>, not {gpus}"
    assert "dlopen libcuda.so.1 ok cuDriverGetVersion=12040" in r.output, r.output


def test_an_exclusive_pod_starts_because_the_pause_container_took_nothing(node: Kubelet) -> None:
    r = node.run("ls /dev; sleep 1", "nvidia.com/gpu", pod_annotations={"gpuhook.dev/exclusive": "true"},
                 keep_specs=True)
    assert r.exit_code == 0, f"{r.output}\n{node.env.log_tail()}"
    pause = r.sandbox_spec
    assert not (pause.get("linux") or {}).get("devices") and "hooks" not in pause, pause.get("hooks")
    assert any(n.startswith("nvidia") and n[6:].isdigit() for n in _devices(r.output))


def test_a_pod_authors_own_gpu_request_is_refused_and_the_reason_reaches_cri(node: Kubelet) -> None:
    with pytest.raises(CriError) as refused:
        node.env.run_to_completion("ls /dev", handler="gpuhook", pod_annotations={"gpuhook.dev/gpus": "all"})
    text = str(refused.value)
    assert "on this node only the kubelet grants GPUs" in text and "resources.limits" in text, text
    # A pod annotation cannot pose as an allocation: containerd's filter does not pass the key from a pod.
    r = node.env.run_to_completion("ls /dev", handler="gpuhook",
                                   pod_annotations={"gpuhook.dev/allocation": "0" * 32})
    assert not any(n.startswith("nvidia") for n in _devices(r.output)), r.output


def _nvml(host: str) -> dict[int, list[int]]:
    """The stub NVML's state per GPU (clocks min, max, power limit, compute mode); {} before its first write."""
    path = Path(f"{host}/var/lib/gpuhook-sim/nvml")
    text = path.read_text() if path.exists() else ""
    return {int(f[0]): [int(x) for x in f[1:]] for f in (ln.split() for ln in text.splitlines())}


def test_tuning_on_an_allocated_pod_is_applied_and_restored(node: Kubelet) -> None:
    host = node.env.host_root
    seen: list[dict[int, list[int]]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(_nvml(host))
            time.sleep(0.1)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        r = node.run("sleep 2", "nvidia.com/gpu", pod_annotations={"gpuhook.dev/clocks": "1500"})
    finally:
        stop.set()
        t.join()
    assert r.exit_code == 0, f"{r.output}\n{node.env.log_tail()}"
    locked = [gpu for snapshot in seen for gpu, v in snapshot.items() if v[:2] == [1500, 1500]]
    assert len(set(locked)) == 1, f"clocks locked on {set(locked)} while it ran"
    assert all(v[:2] == [0, 0] for v in _nvml(host).values()), _nvml(host)  # restored once the pod went
