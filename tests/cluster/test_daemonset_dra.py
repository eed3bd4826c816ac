"""The DRA driver as a cluster operator installs it: the Helm chart with dra.enabled (and the device plugin off) onto
a node with no gpuhook and no Python, compiler or package manager, /usr read-only (box.py's bare box), on
containerd 2 with CDI. The driver runs from the image in its own container with the pod's service account, reading
the node through /host; the CDI specs it writes name the node's paths (the devices under the node's host_root, the
hooks of the build the init container copied to hostDir), which the node's containerd and runc use. Its RBAC,
DeviceClasses and the node's ResourceSlices are the chart's and the driver's. A claim's pod gets its GPU through the
installed runtime and through plain runc; uninstalling leaves the node as it was.

This test cluster has no kube-proxy, so the kubernetes Service's address leads nowhere: the pod takes the node's
network and is told the API server's address (dra.env, hostNetwork), as on a cluster without kube-proxy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from .control_plane import NODE, ControlPlane, control_plane
from .node import INSTALLER_IMAGE, InstalledNode, components, installed_node, printed, wait_for
from .test_cluster import IMAGE, SEE, _ready
from .test_daemonset import HOST_DIR, NAMESPACE, _pod_log, _why, assert_left_as_it_was
from .test_helm import CHART, helm

DRIVER = "gpu.gpuhook.dev"
REFUSED: list[str] = []  # the first install's log and containerd's config after it (the default hostDir)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str,
              helm_env: dict[str, str]) -> Iterator[tuple[ControlPlane, InstalledNode]]:
    built = components()
    d = tmp_path_factory.mktemp("installed-dra")
    cdi = d / "cdi"
    cdi.mkdir()
    with control_plane(d / "plane", built) as plane, \
            installed_node(d / "node", base_rootfs, plane, str(built / "containerd"), cdi_dirs=(str(cdi),)) as n:
        wait_for(lambda: _ready(plane), 90, lambda: n.kubelet_log.read_text()[-3000:])
        plane.kubectl("label", "node", NODE, "gpuhook.dev/gpu-node=true")
        repository, tag = INSTALLER_IMAGE.rsplit(":", 1)
        api = urlsplit(plane.server)
        values = {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
                  "devicePlugin": {"enabled": False}, "hostNetwork": True,
                  "dra": {"enabled": True, "kubeletDir": str(d / "node" / "kubelet"), "cdiDir": str(cdi),
                          "env": [{"name": "KUBERNETES_SERVICE_HOST", "value": api.hostname},
                                  {"name": "KUBERNETES_SERVICE_PORT", "value": str(api.port)}]},
                  "exporter": {"port": 19835},
                  "config": {"top": {"host_root": n.env.host_root, "state_dir": str(d / "state"),
                                     "log_file": str(d / "gpuhook.log")},
                             "kubernetes": {"health_interval": 0.5}}}
        (d / "values.json").write_text(json.dumps(values))
        plane.kubectl("create", "namespace", NAMESPACE)
        helm(helm_env, "install", "gpu", str(CHART), "--namespace", NAMESPACE, "-f", str(d / "values.json"),
             plane=plane)
        plane.apply({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "plain"},
                     "handler": "runc"})
        try:
            # first with the default hostDir, under the node's read-only /usr: refused in one line, nothing done
            wait_for(lambda: "read-only on this node" in _pod_log(n, "install"), 120, lambda: _why(plane, n))
            REFUSED.append(_pod_log(n, "install"))
            REFUSED.append(n.box.path("/etc/containerd/config.toml").read_text())
            helm(helm_env, "upgrade", "gpu", str(CHART), "--namespace", NAMESPACE, "--reuse-values",
                 f"--set=hostDir={HOST_DIR}", plane=plane)
            wait_for(lambda: plane.get("daemonset", "gpu", NAMESPACE)["status"].get("numberReady") == 1, 300,
                     lambda: _why(plane, n))
            yield plane, n
        finally:  # the DaemonSet's pod gone before the node's teardown, whose removals would race the kubelet's
            helm(helm_env, "uninstall", "gpu", "--namespace", NAMESPACE, "--wait", plane=plane, check=False)
            wait_for(lambda: not plane.get("pods", "", NAMESPACE)["items"], 90, lambda: "the DaemonSet's pod stayed")


def test_the_default_host_dir_on_a_read_only_usr_is_refused_in_one_line_and_the_node_left_alone(
        installed: tuple[ControlPlane, InstalledNode]) -> None:
    """The chart's default hostDir (/usr/local/gpuhook) on this node's read-only /usr: the init container says what
    to set instead and leaves the node as it was (checked before the upgrade with hostDir that followed)."""
    _, n = installed
    log, containerd_config = REFUSED
    said = [line for line in log.splitlines() if "read-only" in line]
    assert len(said) == 1 and "hostDir=/var/lib/gpuhook or /opt/gpuhook" in said[0], log
    assert containerd_config.encode() == n.engine_config and "installed gpuhook" not in log


def test_the_drivers_cdi_specs_name_the_nodes_paths(installed: tuple[ControlPlane, InstalledNode]) -> None:
    """What the driver wrote from its container is what the node's engine reads: no path of the container's
    (/host, /opt/gpuhook in the image) in a prepared claim's CDI spec."""
    plane, n = installed
    name = "named"
    _claimed_pod(plane, name, "plain", "sleep 60")
    try:
        wait_for(lambda: plane.get("pod", name)["status"].get("phase") == "Running", 120,
                 lambda: f"{json.dumps(plane.get('pod', name)['status'])}\n{_why(plane, n)}")
        cdi = n.d.parent / "cdi"
        specs = [json.loads(f.read_text()) for f in cdi.glob("gpuhook.dev-claim_*.json")]
        assert len(specs) == 1, specs
        edits = specs[0]["devices"][0]["containerEdits"]
        nodes = [d["hostPath"] for d in edits["deviceNodes"]]
        assert nodes and all(p.startswith(n.env.host_root + "/dev/") for p in nodes), nodes
        hooks = {h["path"] for h in edits["hooks"]}
        assert f"{HOST_DIR}/bin/gpuhook-hook" in hooks and all(h.startswith(HOST_DIR + "/bin/") for h in hooks), hooks
    finally:
        plane.kubectl("delete", "pod", name, "--wait", "--timeout", "60s", check=False, timeout=90)


def _devices(plane: ControlPlane) -> list[str]:
    listed = json.loads(plane.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    return sorted(d["name"] for s in listed if s["spec"]["driver"] == DRIVER for d in s["spec"].get("devices", []))


def test_the_installed_driver_publishes_the_nodes_gpus(installed: tuple[ControlPlane, InstalledNode]) -> None:
    plane, n = installed
    wait_for(lambda: _devices(plane) == ["amdgpu-128", "amdgpu-129", "gpu-0", "gpu-1"], 90,
             lambda: f"{_devices(plane)}\n{_why(plane, n)}")
    classes = json.loads(plane.kubectl("get", "deviceclasses", "-o", "json").stdout)["items"]
    assert {c["metadata"]["name"] for c in classes} >= {DRIVER, f"nvidia.{DRIVER}", f"amd.{DRIVER}",
                                                       f"mig.{DRIVER}", f"partition.{DRIVER}"}


def _claimed_pod(plane: ControlPlane, name: str, runtime: str, script: str) -> None:
    """A pod on `runtime` whose one container claims one AMD GPU of the driver's (a template of its own)."""
    plane.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": name, "namespace": "default"},
                 "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": f"amd.{DRIVER}"}}]}}}})
    spec = {"runtimeClassName": runtime, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", script], "resources": {"claims": [{"name": "gpu"}]}}]}
    plane.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})


@pytest.mark.parametrize("runtime", ["gpuhook", "plain"])
def test_a_claims_pod_gets_its_gpu_from_the_installed_driver_and_runtime(
        installed: tuple[ControlPlane, InstalledNode], runtime: str) -> None:
    plane, n = installed
    name = f"claimed-{runtime}"
    _claimed_pod(plane, name, runtime, SEE)
    try:
        wait_for(lambda: plane.get("pod", name)["status"].get("phase") in ("Succeeded", "Failed"), 120,
                 lambda: f"{json.dumps(plane.get('pod', name)['status'])}\n{_why(plane, n)}")
        assert plane.get("pod", name)["status"]["phase"] == "Succeeded", _why(plane, n)
        seen = printed(n.d, f"default_{name}", "main")
        assert len(seen) == 1 and seen[0].startswith("renderD"), seen
    finally:
        plane.kubectl("delete", "pod", name, "--wait", "--timeout", "60s", check=False, timeout=90)


def test_uninstalling_leaves_the_node_as_it_was(installed: tuple[ControlPlane, InstalledNode],
                                               helm_env: dict[str, str]) -> None:
    """Last in this module: the chart goes, its pod ends (its node container undoes the install), the driver's
    sockets go, and the node is as it was before the DaemonSet came."""
    plane, n = installed
    helm(helm_env, "uninstall", "gpu", "--namespace", NAMESPACE, "--wait", plane=plane)
    wait_for(lambda: not plane.get("pods", "", NAMESPACE)["items"], 90, lambda: "the DaemonSet's pod stayed")
    assert not (n.d / "kubelet" / "plugins_registry" / f"{DRIVER}-reg.sock").exists()
    assert_left_as_it_was(n)
