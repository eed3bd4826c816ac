"""The Helm chart (packaging/helm/gpuhook) with helm built from the pinned module set: `helm lint`, what it renders
(the node's config.toml is one gpuhook accepts, with what the values asked), the rendering accepted by a real API
server (server-side dry run), and install, upgrade and uninstall against it."""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import conftest

from .control_plane import ControlPlane, control_plane
from .node import REPO, components, wait_for

CHART = REPO / "packaging/helm/gpuhook"


def helm(env: dict[str, str], *args: str, plane: ControlPlane | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    kube = ["--kubeconfig", str(plane.admin)] if plane else []
    done = subprocess.run([str(components() / "helm"), *args, *kube], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: {done.stdout}{done.stderr}")
    return done


def render(env: dict[str, str], *sets: str) -> list[dict[str, Any]]:
    out = helm(env, "template", "gpu", str(CHART), "--namespace", "gpuhook-system",
               *(f"--set={s}" for s in sets)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, [d["kind"] for d in docs]
    return found[0]


def config_show(docs: list[dict[str, Any]], tmp_path: Path) -> tuple[str, subprocess.CompletedProcess[str]]:
    """The node's config.toml as the chart renders it, and `gpuhook config show` on it (which validates it against
    gpuhook's schema and fails on any key or value it does not take)."""
    path = tmp_path / "config.toml"
    path.write_text(one(docs, "ConfigMap")["data"]["config.toml"])
    return path.read_text(), subprocess.run([conftest.GPUHOOK, "config", "show"], capture_output=True, text=True,
                                            check=False, env={"GPUHOOK_CONFIG": str(path), "PATH": "/usr/bin:/bin"})


def config_in_effect(docs: list[dict[str, Any]], tmp_path: Path) -> str:
    """The node's config.toml as the chart renders it, once gpuhook has accepted it."""
    text, done = config_show(docs, tmp_path)
    assert done.returncode == 0, done.stderr
    return text


def test_the_chart_lints_clean(helm_env: dict[str, str]) -> None:
    done = helm(helm_env, "lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in done.stdout, done.stdout


def test_a_value_outside_the_charts_schema_is_refused(helm_env: dict[str, str]) -> None:
    for bad in ("devicePlugin.migStrategy=half", "devicePlugin.timeSlicing.replicas=0", "engine=lxc",
                "hostDir=gpuhook", "hostDir=/usr", "hostDir=/opt/../usr", "hostDir=/opt/gpu hook", "hostDir=/"):
        done = helm(helm_env, "template", "gpu", str(CHART), f"--set={bad}", check=False)
        assert done.returncode != 0 and "values don't meet the specifications of the schema" in done.stderr, bad


def test_the_defaults_render_a_cluster_nodes_config_with_the_warm_helper_on(helm_env: dict[str, str],
                                                                         tmp_path: Path) -> None:
    docs = render(helm_env)
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "DaemonSet", "RuntimeClass", "Service"]
    text = config_in_effect(docs, tmp_path)
    assert all(x in text for x in ('requests = "allocated"', 'mig_strategy = "none"', "replicas = 1"))
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["initContainers"][0]["env"]}
    assert env == {"GPUHOOK_HOST_DIR": "/usr/local/gpuhook", "GPUHOOK_ENGINE": "containerd", "GPUHOOK_WARM": "1",
                   "GPUHOOK_RESTART_ENGINE": "1", "GPUHOOK_LABELS": "1"}
    assert pod["initContainers"][0]["command"] == ["/bin/sh", "/config/node.sh", "install"]
    containers = {c["name"]: c for c in pod["containers"]}
    assert list(containers) == ["node", "device-plugin", "exporter"]
    assert containers["node"]["command"] == ["/bin/sh", "/config/node.sh", "hold"]
    # the daemons from the image, in their own containers (no nsenter), the node's / at /host read-only
    assert containers["device-plugin"]["command"][:2] == ["/opt/gpuhook/bin/gpuhook", "device-plugin"]
    assert containers["exporter"]["command"] == ["/opt/gpuhook/bin/gpuhook", "exporter", "--node-root=/host"]
    for name in ("device-plugin", "exporter"):
        mounts = {m["mountPath"]: m for m in containers[name]["volumeMounts"]}
        assert mounts["/host"]["readOnly"] is True and "/run/gpuhook" in mounts and "/etc/gpuhook" in mounts
    assert pod["hostPID"] is True  # nsenter -t 1: the node's mount namespace, for the install and its undoing
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["host"]["hostPath"]["path"] == "/"


def test_the_containers_read_the_node_through_host(helm_env: dict[str, str], tmp_path: Path) -> None:
    """The pod's containers' config is the node's with host_root under /host (where the node's / is mounted) and
    no log file of the node's; gpuhook accepts it."""
    docs = render(helm_env, "config.top.host_root=/run/nvidia/driver", "config.top.log_file=/var/log/gpuhook.log",
                  "devicePlugin.timeSlicing.replicas=3")
    data = one(docs, "ConfigMap")["data"]
    node, pods = tomllib.loads(data["config.toml"]), tomllib.loads(data["container.toml"])
    assert (node["host_root"], pods["host_root"]) == ("/run/nvidia/driver", "/host/run/nvidia/driver")
    assert node["log_file"] == "/var/log/gpuhook.log" and "log_file" not in pods
    assert {k: v for k, v in node.items() if k not in ("host_root", "log_file")} == {
        k: v for k, v in pods.items() if k != "host_root"}
    path = tmp_path / "container.toml"
    path.write_text(data["container.toml"])
    done = subprocess.run([conftest.GPUHOOK, "config", "show"], capture_output=True, text=True, check=False,
                          env={"GPUHOOK_CONFIG": str(path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert tomllib.loads(one(render(helm_env), "ConfigMap")["data"]["container.toml"])["host_root"] == "/host"


def test_the_dra_driver_names_the_nodes_paths(helm_env: dict[str, str]) -> None:
    """hostDir reaches the installer and the DRA driver, whose CDI specs name the build copied there."""
    docs = render(helm_env, "dra.enabled=true", "devicePlugin.enabled=false", "hostDir=/var/lib/gpuhook")
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    driver = next(c for c in pod["containers"] if c["name"] == "dra-driver")
    assert "--node-root=/host" in driver["command"] and "--node-bin-dir=/var/lib/gpuhook/bin" in driver["command"]
    mounts = {m["mountPath"] for m in driver["volumeMounts"]}
    assert {"/host", "/etc/gpuhook", "/run/gpuhook", "/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry",
            "/var/run/cdi"} <= mounts
    env = {e["name"]: e["value"] for e in pod["initContainers"][0]["env"]}
    assert env["GPUHOOK_HOST_DIR"] == "/var/lib/gpuhook"


def test_values_reach_the_nodes_config(helm_env: dict[str, str], tmp_path: Path) -> None:
    docs = render(helm_env, "devicePlugin.migStrategy=mixed", "devicePlugin.timeSlicing.replicas=4",
                  "devicePlugin.resources.amd=example.com/rocm-gpu", "devicePlugin.allocateWith={annotation,cdi}",
                  "warm.enabled=false", "exporter.port=9400", "runtimeClass.enabled=false",
                  "config.tuning.power_watts={100,300}", "config.top.log_level=debug",
                  "config.policy.rocm_compatibility=strict")
    text = config_in_effect(docs, tmp_path)
    for line in ('mig_strategy = "mixed"', "replicas = 4", 'amd = "example.com/rocm-gpu"',
                 'allocate_with = ["annotation","cdi"]', 'listen = "0.0.0.0:9400"', "power_watts = [100,300]",
                 'log_level = "debug"', 'rocm_compatibility = "strict"', 'requests = "allocated"'):
        assert line in text, (line, text)
    assert "RuntimeClass" not in [d["kind"] for d in docs]
    pod = one(docs, "DaemonSet")["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["initContainers"][0]["env"]}
    assert env["GPUHOOK_WARM"] == ""
    assert one(docs, "Service")["spec"]["ports"][0]["port"] == 9400


def test_a_config_value_gpuhook_refuses_fails_on_the_node_not_silently(helm_env: dict[str, str],
                                                                     tmp_path: Path) -> None:
    """config is gpuhook's own: a key gpuhook does not know is caught by gpuhook's validation, in one line."""
    _, done = config_show(render(helm_env, "config.tuning.turbo=true"), tmp_path)
    assert done.returncode != 0 and "turbo" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_service_monitor_needs_the_operators_crd(helm_env: dict[str, str]) -> None:
    done = helm(helm_env, "template", "gpu", str(CHART), "--set=exporter.serviceMonitor.enabled=true", check=False)
    assert done.returncode != 0 and "no monitoring.coreos.com/v1 ServiceMonitor" in done.stderr
    # a cluster with the operator's CRD (helm template has no cluster: --api-versions says what it would have)
    out = helm(helm_env, "template", "gpu", str(CHART), "--set=exporter.serviceMonitor.enabled=true",
               "--api-versions=monitoring.coreos.com/v1/ServiceMonitor").stdout
    monitor = one([d for d in yaml.safe_load_all(out) if d], "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with control_plane(tmp_path_factory.mktemp("helm-plane"), components()) as p:
        yield p


def test_install_upgrade_uninstall_on_a_live_api_server(helm_env: dict[str, str], plane: ControlPlane) -> None:
    """What the chart renders, the API server accepts (a server-side dry run validates every field against the
    real schemas); install creates it, upgrade changes the node's config and rolls the pods (the config digest),
    uninstall removes every object."""
    rendered = helm(helm_env, "template", "gpu", str(CHART), "--namespace", "gpuhook-system").stdout
    plane.kubectl("create", "namespace", "gpuhook-system")
    plane.kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered)
    helm(helm_env, "install", "gpu", str(CHART), "--namespace", "gpuhook-system", plane=plane)
    ds = plane.get("daemonset", "gpu", "gpuhook-system")
    before = ds["spec"]["template"]["metadata"]["annotations"]["gpuhook.dev/config-digest"]
    assert plane.get("runtimeclass", "gpuhook", None)["handler"] == "gpuhook"
    helm(helm_env, "upgrade", "gpu", str(CHART), "--namespace", "gpuhook-system",
         "--set=devicePlugin.timeSlicing.replicas=2", plane=plane)
    config = plane.get("configmap", "gpu-config", "gpuhook-system")["data"]["config.toml"]
    assert "replicas = 2" in config
    after = plane.get("daemonset", "gpu", "gpuhook-system")["spec"]["template"]["metadata"]["annotations"]
    assert after["gpuhook.dev/config-digest"] != before
    assert json.loads(helm(helm_env, "history", "gpu", "--namespace", "gpuhook-system", "-o", "json",
                           plane=plane).stdout)[-1]["revision"] == 2
    helm(helm_env, "uninstall", "gpu", "--namespace", "gpuhook-system", "--wait", plane=plane)
    wait_for(lambda: not plane.kubectl("get", "daemonsets,configmaps,services", "-n", "gpuhook-system",
                                       "-l", "app.kubernetes.io/instance=gpu", "-o", "name").stdout.strip(), 30,
             lambda: "the release's objects stayed")
    assert plane.kubectl("get", "runtimeclass", "gpuhook", check=False).returncode != 0


@pytest.mark.parametrize(("manifest", "sets"), [
    ("daemonset.yaml", ()), ("daemonset-dra.yaml", ("dra.enabled=true", "devicePlugin.enabled=false"))])
def test_the_kubectl_manifest_is_the_charts_rendering(helm_env: dict[str, str], manifest: str,
                                                      sets: tuple[str, ...]) -> None:
    """packaging/kubernetes/daemonset.yaml (and daemonset-dra.yaml) is what render.sh makes of the chart: the two
    ways to install cannot drift apart."""
    shipped = (REPO / "packaging/kubernetes" / manifest).read_text()
    rendered = helm(helm_env, "template", "gpuhook", str(CHART), "--namespace", "kube-system",
                    "--set=runtimeClass.enabled=false", *(f"--set={s}" for s in sets)).stdout
    head = 3 if manifest == "daemonset-dra.yaml" else 2  # render.sh's comment lines
    assert shipped.split("\n", head)[head] == rendered, \
        "run bash packaging/kubernetes/render.sh after changing the chart"


EXTENDED = {"nvidia.gpu.gpuhook.dev": "nvidia.com/gpu", "amd.gpu.gpuhook.dev": "amd.com/gpu",
            "hygon.gpu.gpuhook.dev": "hygon.com/dcu"}


@pytest.mark.parametrize(("args", "named"), [
    ((), EXTENDED), (("--kube-version=1.34.0",), EXTENDED), (("--kube-version=1.33.0",), {}),
    (("--set=dra.extendedResources=false",), {})], ids=["default", "1.34", "1.33", "off"])
def test_the_vendor_classes_serve_extended_resources_where_the_cluster_has_the_field(
        helm_env: dict[str, str], args: tuple[str, ...], named: dict[str, str]) -> None:
    """KEP-5004: extendedResourceName on the vendor classes from Kubernetes 1.34 (the field's first version), unless
    dra.extendedResources=false."""
    out = helm(helm_env, "template", "gpu", str(CHART), "--set=dra.enabled=true", "--set=devicePlugin.enabled=false",
               *args).stdout
    classes = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "DeviceClass"]
    assert len(classes) == 6
    assert {c["metadata"]["name"]: c["spec"]["extendedResourceName"] for c in classes
            if "extendedResourceName" in c["spec"]} == named


def test_the_dra_rendering_is_accepted_by_the_api_server(helm_env: dict[str, str], plane: ControlPlane) -> None:
    """The DRA driver's objects, DeviceClasses with extendedResourceName among them, pass a server-side dry run."""
    rendered = helm(helm_env, "template", "gpu", str(CHART), "--namespace", "gpuhook-dra", "--set=dra.enabled=true",
                    "--set=devicePlugin.enabled=false").stdout
    plane.kubectl("create", "namespace", "gpuhook-dra")
    plane.kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered)
