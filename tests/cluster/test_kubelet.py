"""gpuhook under a real kubelet (v1.36, built from the pinned module set) on a throwaway containerd, its device
plugin registered with it, `[policy] requests = "allocated"`: what the kubelet's own device manager and pod
workers do, in their own order, and what each container then sees in its /dev (from its log)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e import conftest

from .node import Node, node, printed, wait_for

IMAGE = "gpuhook.test/base:1"
SEE = "ls /dev | grep -E '^(nvidia[0-9]+|renderD[0-9]+)$' || true; ls /dev/dri 2>/dev/null | grep render || true"


@pytest.fixture(scope="module")
def kubelet(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Iterator[Node]:
    with node(tmp_path_factory.mktemp("node"), base_rootfs, conftest.SHIM, conftest.GPUHOOK) as n:
        wait_for(lambda: "nvidia.com/gpu: registered with the kubelet" in n.plugin_log.read_text(), 60,
                 lambda: n.plugin_log.read_text() + n.kubelet_log.read_text()[-3000:])
        yield n


def _container(name: str, resource: str, script: str) -> dict[str, object]:
    return {"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script],
            "resources": {"limits": {resource: "1"}}}


def _logs(n: Node, pod: str, container: str, timeout: float = 90) -> list[str]:
    """What the container printed, once it has exited (the kubelet's pod log, CRI's format)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [c for c in n.containers() if c.metadata.name == container and c.labels.get(
            "io.kubernetes.pod.name", "").startswith(pod) and c.state == 2]  # CONTAINER_EXITED
        logs = list((n.d / "pod-logs").glob(f"default_{pod}-gpuhook-node_*/{container}/*.log"))
        if done and logs:
            return printed(n.d, f"default_{pod}-gpuhook-node", container)
        time.sleep(0.5)
    raise AssertionError(f"{pod}/{container} did not run to its end: {n.kubelet_log.read_text()[-4000:]}\n"
                         f"{n.plugin_log.read_text()}")


def test_init_and_app_containers_asking_one_gpu_both_start(kubelet: Node) -> None:
    """The bug a real kubelet found: at admission it allocates the device for the init container, then the same
    device for the app container, before either runs. Both must start, with that one GPU."""
    kubelet.pod("both", {"initContainers": [_container("init", "nvidia.com/gpu", SEE)],
                         "containers": [_container("main", "nvidia.com/gpu", SEE)]})
    try:
        init = _logs(kubelet, "both", "init")
        main = _logs(kubelet, "both", "main")
        assert len(init) == 1 and init == main, (init, main)
    finally:
        kubelet.remove_pod("both")


def test_two_pods_asking_one_gpu_each_get_different_ones(kubelet: Node) -> None:
    for pod in ("one", "two"):
        kubelet.pod(pod, {"containers": [_container("main", "amd.com/gpu", SEE + "; sleep 5")]})
    try:
        seen = [_logs(kubelet, pod, "main") for pod in ("one", "two")]
        assert all(len(s) == 1 for s in seen) and seen[0] != seen[1], seen
    finally:
        for pod in ("one", "two"):
            kubelet.remove_pod(pod)


def test_a_pod_authors_own_gpu_request_is_refused_with_one_line_the_kubelet_reports(kubelet: Node) -> None:
    """On a cluster only the kubelet grants GPUs: a pod's own gpuhook.dev/gpus=all (no resources asked) never
    starts, and the kubelet's log carries gpuhook's one line on why."""
    kubelet.pod("own", {"containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                        "command": ["sh", "-c", SEE]}]}, annotations={"gpuhook.dev/gpus": "all"})
    try:
        wait_for(lambda: "on this node only the kubelet grants GPUs" in kubelet.kubelet_log.read_text(), 60,
                 lambda: kubelet.kubelet_log.read_text()[-4000:])
        mine = [c for c in kubelet.containers() if c.labels.get("io.kubernetes.pod.name", "").startswith("own")]
        assert all(c.state != 1 for c in mine), mine  # never running: the runtime refused its start (StartError)
        printed = [f.read_text() for f in (kubelet.d / "pod-logs").glob("default_own-gpuhook-node_*/main/*.log")]
        assert not any(printed), printed  # its process never ran
    finally:
        kubelet.remove_pod("own")


def test_the_plugin_registers_again_after_the_kubelet_restarts(kubelet: Node) -> None:
    """A restarted kubelet removes every plugin socket; gpuhook's plugin notices and registers again, and a pod
    asking for a GPU starts afterwards (the issue measured 1.7 s; here it must take under 10 s)."""
    said = kubelet.plugin_log.read_text().count("nvidia.com/gpu: registered with the kubelet")
    kubelet.restart_kubelet()
    start = time.monotonic()
    while kubelet.plugin_log.read_text().count("nvidia.com/gpu: registered with the kubelet") <= said:
        assert time.monotonic() - start < 10, kubelet.plugin_log.read_text()
        time.sleep(0.1)
    print(f"re-registered {time.monotonic() - start:.1f} s after the kubelet's restart")
    kubelet.pod("after", {"containers": [_container("main", "nvidia.com/gpu", SEE)]})
    try:
        assert len(_logs(kubelet, "after", "main")) == 1
    finally:
        kubelet.remove_pod("after")
