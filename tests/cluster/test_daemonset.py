"""gpuhook installed as a cluster operator installs it: the Helm chart's DaemonSet, from an image of gpuhook's
self-contained build (what packaging/kubernetes/Dockerfile.installer builds: the build and a static busybox), onto a
node that has no gpuhook and nothing gpuhook could lean on: no Python, no C compiler, no apt-get or dpkg, a read-only
/usr (box.py's bare box: containerd and a kubelet in a PID and mount namespace of their own, so the installer's
nsenter -t 1 -m and its writes stay there). The init container copies the build to the node's hostDir, registers the
runtime with containerd and restarts it, starts the warm helper from there and writes the labels; the device plugin
and the exporter run from the image in their own containers, reading the node through /host. What is asserted is
what the cluster, a pod and the node see: the Node's allocatable, a pod's own /dev through the RuntimeClass, the
labels file, the exporter's metrics; and that uninstalling takes the plugin away and leaves the node as it was."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from .control_plane import NODE, ControlPlane, control_plane
from .node import INSTALLER_IMAGE, InstalledNode, components, installed_node, printed, wait_for
from .test_cluster import SEE, _allocatable, _ready, container
from .test_helm import CHART, helm

NAMESPACE = "gpuhook-system"
HOST_DIR = "/opt/gpuhook"  # the chart's hostDir: /usr is read-only on this node
UNIT = "/etc/systemd/system/gpuhook-warm.service"
LABELS = "/etc/kubernetes/node-feature-discovery/features.d/gpuhook"
DROP_IN = "/etc/containerd/conf.d/99-gpuhook.toml"  # gpuhook configure containerd's registration


@pytest.fixture(scope="module", params=["containerd-1.6", "containerd-2"])
def installed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, base_rootfs: str,
              helm_env: dict[str, str]) -> Iterator[tuple[ControlPlane, InstalledNode]]:
    built = components()
    binary = "containerd" if request.param == "containerd-1.6" else str(built / "containerd")
    d = tmp_path_factory.mktemp(f"installed-{request.param}")
    with control_plane(d / "plane", built) as plane, installed_node(d / "node", base_rootfs, plane, binary) as n:
        wait_for(lambda: _ready(plane), 90, lambda: n.kubelet_log.read_text()[-3000:])
        plane.kubectl("label", "node", NODE, "gpuhook.dev/gpu-node=true")
        repository, tag = INSTALLER_IMAGE.rsplit(":", 1)
        values = {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"}, "hostDir": HOST_DIR,
                  "config": {"top": {"host_root": n.env.host_root, "state_dir": str(d / "state"),
                                     "log_file": str(d / "gpuhook.log")},
                             "kubernetes": {"health_interval": 0.5}}}
        (d / "values.json").write_text(json.dumps(values))
        plane.kubectl("create", "namespace", NAMESPACE)
        helm(helm_env, "install", "gpu", str(CHART), "--namespace", NAMESPACE, "-f", str(d / "values.json"),
             plane=plane)
        try:
            wait_for(lambda: plane.get("daemonset", "gpu", NAMESPACE)["status"].get("numberReady") == 1, 300,
                     lambda: _why(plane, n))
        except BaseException:
            helm(helm_env, "uninstall", "gpu", "--namespace", NAMESPACE, plane=plane, check=False)
            raise
        yield plane, n


def _why(plane: ControlPlane, n: InstalledNode) -> str:
    pods = plane.get("pods", "", NAMESPACE)["items"]
    logs = "\n".join(f"--- {f} ---\n{f.read_text()[-3000:]}" for f in sorted((n.d / "pod-logs").glob("*/*/*.log")))
    return f"the DaemonSet's pod is not ready: {json.dumps([p['status'] for p in pods])[:4000]}\n{logs}"


def _pod_log(n: InstalledNode, container_name: str) -> str:
    return "\n".join(printed(n.d, f"{NAMESPACE}_gpu-*", container_name))


def on_node(n: InstalledNode, script: str) -> subprocess.CompletedProcess[str]:
    """A shell line run on the node (in its mount and PID namespaces), as an admin would, with the usual PATH."""
    return subprocess.run(["nsenter", "-t", str(n.box.pid), "-m", "-p", "--", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})


def test_the_node_has_nothing_gpuhook_could_lean_on_and_runs_the_copied_build(
        installed: tuple[ControlPlane, InstalledNode]) -> None:
    """What the install ran on: no Python, compiler or package manager runs on the node and /usr is read-only;
    the build the DaemonSet copied runs there all the same."""
    _, n = installed
    for program in ("python3", "python3.11", "cc", "gcc", "apt-get", "dpkg"):
        assert on_node(n, f"{program} --version").returncode != 0, program
    assert "Read-only file system" in on_node(n, "touch /usr/local/bin/x").stderr
    done = on_node(n, f"{HOST_DIR}/bin/gpuhook --version && {HOST_DIR}/bin/gpuhook-runtime --version")
    assert done.returncode == 0 and done.stdout.startswith("gpuhook "), done.stdout + done.stderr


def test_the_daemonset_installs_gpuhook_and_registers_it_with_containerd(
        installed: tuple[ControlPlane, InstalledNode]) -> None:
    _, n = installed
    config = n.box.path("/etc/containerd/config.toml").read_text()
    assert "conf.d/*.toml" in config and "gpuhook-runtime" not in config, config  # the one edit: imports
    drop_in = n.box.path(DROP_IN).read_text()  # gpuhook configure containerd's drop-in, from the copy
    assert f"{HOST_DIR}/bin/gpuhook-runtime" in drop_in, drop_in
    assert "restart containerd" in n.box.asked and n.box.services["containerd"].restarts >= 1, n.box.asked
    assert n.box.path(f"{HOST_DIR}/share/gpuhook/BUILD").is_file()
    assert not n.box.path("/usr/local/bin/gpuhook").exists()  # not linked where /usr is read-only
    install = _pod_log(n, "install")
    assert "installed gpuhook" in install and "paths:" in install, install


def _doctor_paths(n: InstalledNode) -> str:
    """`gpuhook doctor`'s paths line, run on the node as an admin would."""
    done = on_node(n, f"{HOST_DIR}/bin/gpuhook doctor")
    return next((line for line in done.stdout.splitlines() if "paths:" in line), done.stdout + done.stderr)


def test_the_warm_helper_runs_as_the_nodes_service_and_serves(installed: tuple[ControlPlane, InstalledNode]) -> None:
    """The installer saw systemd and started gpuhook-warm.service from the copied build (the chart's default): the
    node runs it, and doctor says GPU containers are served by it."""
    _, n = installed
    assert "restart gpuhook-warm" in n.box.asked, n.box.asked
    assert f"ExecStart={HOST_DIR}/bin/gpuhook warm" in n.box.path(UNIT).read_text().splitlines()
    wait_for(lambda: "served by the warm helper" in _doctor_paths(n), 20, lambda: _doctor_paths(n))


def test_the_daemonsets_device_plugin_advertises_the_nodes_gpus(installed: tuple[ControlPlane, InstalledNode]) -> None:
    plane, _ = installed
    wait_for(lambda: _allocatable(plane).get("nvidia.com/gpu") == "2" and _allocatable(plane).get(
        "amd.com/gpu") == "2", 60, lambda: f"allocatable {_allocatable(plane)}")


@pytest.mark.parametrize("helper", ["warm", "stopped"])
def test_a_pod_on_the_runtime_class_gets_its_gpu_through_the_installed_runtime(
        installed: tuple[ControlPlane, InstalledNode], helper: str) -> None:
    """containerd has only the gpuhook the DaemonSet installed (the test registered none): the pod's one GPU in its
    /dev comes from that install, with the warm helper serving and with it stopped (the direct path)."""
    plane, n = installed
    if helper == "stopped":
        n.box.services["gpuhook-warm"].stop()
        wait_for(lambda: "direct path" in _doctor_paths(n), 20, lambda: _doctor_paths(n))
    spec = {"runtimeClassName": "gpuhook", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [container("main", SEE, "nvidia.com/gpu")]}
    plane.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "through", "namespace": "default"},
                 "spec": spec})
    try:
        wait_for(lambda: plane.get("pod", "through")["status"].get("phase") in ("Succeeded", "Failed"), 90,
                 lambda: json.dumps(plane.get("pod", "through")["status"]))
        assert plane.get("pod", "through")["status"]["phase"] == "Succeeded"
        seen = printed(n.d, "default_through", "main")
        assert len(seen) == 1 and seen[0].startswith("nvidia"), seen
    finally:
        plane.kubectl("delete", "pod", "through", "--wait", "--timeout", "60s", check=False, timeout=90)


def test_the_labels_and_the_exporter_come_from_the_installed_product(
        installed: tuple[ControlPlane, InstalledNode]) -> None:
    plane, n = installed
    labels = n.box.path(LABELS).read_text()
    assert "nvidia.com/gpu.count=2" in labels.splitlines(), labels
    metrics = _metrics(plane)
    info = [line for line in metrics.splitlines() if line.startswith("gpuhook_gpu_info{")]
    assert len(info) == 4, metrics[:3000]  # 2 NVIDIA + 2 AMD on the simulated host


def _metrics(plane: ControlPlane) -> str:
    pod: Any = next(iter(plane.get("pods", "", NAMESPACE)["items"]))
    with urllib.request.urlopen(f"http://{pod['status']['podIP']}:9835/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def test_the_exporter_names_the_pod_namespace_and_container_holding_a_gpu(
        installed: tuple[ControlPlane, InstalledNode]) -> None:
    """The exporter, in its own container, reads the records the runtime on the node wrote (state_dir)."""
    plane, _ = installed
    spec = {"runtimeClassName": "gpuhook", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [container("main", SEE + "; sleep 60", "nvidia.com/gpu")]}
    plane.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "watched", "namespace": "default"},
                 "spec": spec})
    try:
        wait_for(lambda: plane.get("pod", "watched")["status"].get("phase") == "Running", 60,
                 lambda: json.dumps(plane.get("pod", "watched")["status"]))

        def series() -> list[str]:
            return [line for line in _metrics(plane).splitlines() if line.startswith("gpuhook_gpu_allocated{")
                    and 'pod="watched"' in line]
        wait_for(lambda: bool(series()), 30, lambda: _metrics(plane)[:3000])
        assert len(series()) == 1 and 'namespace="default"' in series()[0] and 'container="main"' in series()[0]
    finally:
        plane.kubectl("delete", "pod", "watched", "--wait", "--timeout", "60s", check=False, timeout=90)


def test_time_slicing_set_by_helm_upgrade_reaches_the_nodes_capacity(
        installed: tuple[ControlPlane, InstalledNode], helm_env: dict[str, str]) -> None:
    """helm upgrade with devicePlugin.timeSlicing.replicas=2: the changed config rolls the DaemonSet's pod (the old
    one undoes its install as it ends, the new one installs anew), the node gets the new config, and the plugin
    advertises two shares per GPU."""
    plane, n = installed
    restarts = n.box.services["containerd"].restarts
    helm(helm_env, "upgrade", "gpu", str(CHART), "--namespace", NAMESPACE, "--reuse-values",
         "--set=devicePlugin.timeSlicing.replicas=2", plane=plane)
    wait_for(lambda: _allocatable(plane).get("nvidia.com/gpu") == "4" and _allocatable(plane).get(
        "amd.com/gpu") == "4", 300, lambda: f"allocatable {_allocatable(plane)}\n{_why(plane, n)}")
    wait_for(lambda: plane.get("daemonset", "gpu", NAMESPACE)["status"].get("numberReady") == 1, 120,
             lambda: _why(plane, n))
    labels = n.box.path(LABELS).read_text().splitlines()
    assert "nvidia.com/gpu.replicas=2" in labels and "nvidia.com/gpu.sharing-strategy=time-slicing" in labels
    assert "replicas = 2" in n.box.path("/etc/gpuhook/config.toml").read_text()
    assert n.box.services["containerd"].restarts >= restarts + 2  # unregistered, then registered anew
    assert f"{HOST_DIR}/bin/gpuhook-runtime" in n.box.path(DROP_IN).read_text()
    assert not n.box.path(f"{HOST_DIR}.old").exists() and not n.box.path(f"{HOST_DIR}.new").exists()


def test_uninstalling_leaves_the_node_as_it_was(installed: tuple[ControlPlane, InstalledNode],
                                               helm_env: dict[str, str]) -> None:
    """Last in this module: the chart goes, its pod ends, the kubelet stops advertising the GPUs, and the node is
    as it was before the DaemonSet came."""
    plane, n = installed
    helm(helm_env, "uninstall", "gpu", "--namespace", NAMESPACE, "--wait", plane=plane)
    wait_for(lambda: not plane.get("pods", "", NAMESPACE)["items"], 90, lambda: "the DaemonSet's pods stayed")
    wait_for(lambda: _allocatable(plane).get("nvidia.com/gpu", "0") == "0", 90,
             lambda: f"allocatable {_allocatable(plane)}")
    assert_left_as_it_was(n)


def assert_left_as_it_was(n: InstalledNode) -> None:
    """containerd's config byte for byte as before and containerd restarted on it, then the warm helper stopped (its
    unit gone), and no build, config or labels of gpuhook's left on the node."""
    assert n.box.path("/etc/containerd/config.toml").read_bytes() == n.engine_config
    assert n.box.asked[-2:] == ["restart containerd", "stop gpuhook-warm"], n.box.asked
    warm = n.box.services["gpuhook-warm"]
    assert warm.stopped and warm.poll() is not None
    left = [p for p in (HOST_DIR, f"{HOST_DIR}.new", f"{HOST_DIR}.old", UNIT, LABELS, DROP_IN,
                        "/etc/gpuhook/config.toml", "/etc/containerd/config.toml.gpuhook-orig",
                        "/etc/containerd/config.toml.gpuhook-orig.absent")
            if n.box.path(p).exists()]
    assert not left, left
