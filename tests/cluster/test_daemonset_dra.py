"""The DRA driver as a cluster operator installs it: the Helm chart with dra.enabled (and the device plugin off) onto
a node with no gpuhook (box.py), on containerd 2 with CDI. The chart's container runs the driver the install put on
the node, in the node's mount namespace, with the pod's own service account token (read through the /proc of the
process that keeps it); its RBAC, DeviceClasses and the node's ResourceSlices are the chart's and the installed
driver's. A claim's pod gets its GPU through the installed runtime and through plain runc.

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
from .test_daemonset import NAMESPACE, _why
from .test_helm import CHART, helm

DRIVER = "gpu.gpuhook.dev"


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
            wait_for(lambda: plane.get("daemonset", "gpu", NAMESPACE)["status"].get("numberReady") == 1, 300,
                     lambda: _why(plane, n))
            yield plane, n
        finally:  # the DaemonSet's pod gone before the node's teardown, whose removals would race the kubelet's
            helm(helm_env, "uninstall", "gpu", "--namespace", NAMESPACE, "--wait", plane=plane, check=False)
            wait_for(lambda: not plane.get("pods", "", NAMESPACE)["items"], 90, lambda: "the DaemonSet's pod stayed")


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


@pytest.mark.parametrize("runtime", ["gpuhook", "plain"])
def test_a_claims_pod_gets_its_gpu_from_the_installed_driver_and_runtime(
        installed: tuple[ControlPlane, InstalledNode], runtime: str) -> None:
    plane, n = installed
    name = f"claimed-{runtime}"
    plane.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                 "metadata": {"name": name, "namespace": "default"},
                 "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": f"amd.{DRIVER}"}}]}}}})
    spec = {"runtimeClassName": runtime, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", SEE], "resources": {"claims": [{"name": "gpu"}]}}]}
    plane.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    try:
        wait_for(lambda: plane.get("pod", name)["status"].get("phase") in ("Succeeded", "Failed"), 120,
                 lambda: f"{json.dumps(plane.get('pod', name)['status'])}\n{_why(plane, n)}")
        assert plane.get("pod", name)["status"]["phase"] == "Succeeded", _why(plane, n)
        seen = printed(n.d, f"default_{name}", "main")
        assert len(seen) == 1 and seen[0].startswith("renderD"), seen
    finally:
        plane.kubectl("delete", "pod", name, "--wait", "--timeout", "60s", check=False, timeout=90)
