"""The Kubernetes manifests parse and fit together: the handler containerd gets is the RuntimeClass's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from gpuhook.engines.containerd import edit
from gpuhook.engines.wanted import Wanted
from tests.unit.parsing import parse_request

K8S = Path(__file__).parents[2] / "packaging/kubernetes"
CHART = Path(__file__).parents[2] / "packaging/helm/gpuhook"


def _load(name: str) -> dict:  # type: ignore[type-arg]
    loaded: dict = yaml.safe_load((K8S / name).read_text())  # type: ignore[type-arg]
    return loaded


def _all(name: str) -> list[dict]:  # type: ignore[type-arg]
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def test_runtimeclass_names_the_handler_configure_registers() -> None:
    rc = _load("runtimeclass.yaml")
    assert rc["scheduling"]["nodeSelector"] == {"gpuhook.dev/gpu-node": "true"}
    assert (rc["kind"], rc["metadata"]["name"], rc["handler"]) == ("RuntimeClass", "gpuhook", "gpuhook")
    toml = tomllib.loads(edit("version = 2\n", Wanted(shim="/usr/local/bin/gpuhook-runtime", gpuhook="/g",
                                                      config="/c")))
    assert rc["handler"] in toml["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]


@pytest.mark.parametrize("name", ["example-pod.yaml", "example-amd-pod.yaml", "mixed-cluster.yaml"])
def test_example_pods_ask_the_kubelet_and_pass_the_cluster_policy(name: str) -> None:
    """Every example pod asks for GPUs through resources.limits, on the gpuhook RuntimeClass, and its
    annotations are ones a pod author may set under requests = "allocated" (tuning, never GPUs)."""
    from gpuhook.config import from_table
    from gpuhook.plan.authority import authorize

    config = from_table(tomllib.loads(_configmap()), "/etc/gpuhook/config.toml")
    assert config.policy.requests == "allocated"
    for pod in _all(name):
        assert pod["spec"]["runtimeClassName"] == "gpuhook"
        limits = [c["resources"]["limits"] for c in pod["spec"]["containers"]]
        assert all(set(lim) & {"nvidia.com/gpu", "amd.com/gpu"} for lim in limits), pod["metadata"]["name"]
        request = parse_request(pod["metadata"].get("annotations") or {}, {})
        assert not request.selections
        authorize(request, _alloc(), config)  # tuning on the allocated GPUs passes


def _alloc():  # type: ignore[no-untyped-def]
    from gpuhook.plan.authority import Allocation

    return Allocation(id="0" * 32, resource="nvidia.com/gpu", vendor="nvidia", gpus=("GPU-1",), devices=("GPU-1",),
                      shared=False, created=0.0, expires=1.0)


def _configmap() -> str:
    cm = next(d for d in _all("daemonset.yaml") if d["kind"] == "ConfigMap")
    text: str = cm["data"]["config.toml"]
    return text


def test_the_cluster_config_is_valid() -> None:
    from gpuhook.config import from_table

    from_table(tomllib.loads(_configmap()), "/etc/gpuhook/config.toml")  # validates against the schema


@pytest.mark.parametrize("manifest", ["daemonset.yaml", "daemonset-dra.yaml"])
@pytest.mark.parametrize("key", ["config.toml", "container.toml"])
def test_no_shipped_cluster_config_takes_tuning_from_an_images_env(manifest: str, key: str) -> None:
    """An image's own ENV GPUHOOK_EXCLUSIVE / GPUHOOK_POWER_LIMIT must tune nothing on a cluster node."""
    from gpuhook.config import from_table

    cm = next(d for d in _all(manifest) if d["kind"] == "ConfigMap")
    policy = from_table(tomllib.loads(cm["data"][key]), "/etc/gpuhook/config.toml").policy
    assert policy.requests == "allocated" and not policy.env_tuning()


def test_daemonset_installs_configures_containerd_and_runs_the_device_plugin() -> None:
    """The init container runs node.sh (from the ConfigMap) to copy the image's build to the node, write the config,
    register with containerd and restart it, start the warm helper and write the labels; the node container undoes
    that when the pod ends; the device plugin runs from the image, reading the node through /host."""
    docs = _all("daemonset.yaml")
    pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
    script = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["node.sh"]
    env = {e["name"]: e["value"] for e in pod["initContainers"][0]["env"]}
    assert env["GPUHOOK_ENGINE"] == "containerd" and env["GPUHOOK_RESTART_ENGINE"] and env["GPUHOOK_LABELS"]
    assert env["GPUHOOK_WARM"] and env["GPUHOOK_HOST_DIR"] == "/usr/local/gpuhook"
    assert pod["initContainers"][0]["command"] == ["/bin/sh", "/config/node.sh", "install"]
    assert 'configure "$engine" --runtime-path "$dir/bin/gpuhook-runtime"' in script
    assert 'configure "$engine" --revert' in script and 'systemctl restart "$engine"' in script
    assert 'cp -a "$build" "$host$dir.new"' in script and "/etc/gpuhook/config.toml" in script
    assert '"$dir/bin/gpuhook" labels' in script and '"$dir/bin/gpuhook" doctor' in script
    for never in ("apt-get", "pip", "python3 ", "install.sh", "gcc"):  # the node needs nothing of its own
        assert never not in script, never
    node = next(c for c in pod["containers"] if c["name"] == "node")
    assert node["command"] == ["/bin/sh", "/config/node.sh", "hold"] and pod["terminationGracePeriodSeconds"] >= 30
    plugin = next(c for c in pod["containers"] if c["name"] == "device-plugin")
    assert plugin["command"][:2] == ["/opt/gpuhook/bin/gpuhook", "device-plugin"] and pod["hostPID"] is True


def test_the_containers_config_reads_the_node_through_host() -> None:
    from gpuhook.config import from_table

    cm = next(d for d in _all("daemonset.yaml") if d["kind"] == "ConfigMap")
    config = from_table(tomllib.loads(cm["data"]["container.toml"]), "/etc/gpuhook/config.toml")
    assert config.host_root == "/host" and config.policy.requests == "allocated"


def test_the_exporter_runs_beside_the_device_plugin_and_its_service_scrapes_it() -> None:
    import tomllib

    from gpuhook.config import from_table
    from gpuhook.metrics.exporter import parse_listen

    docs = _all("daemonset.yaml")
    pod = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]
    exporter = next(c for c in pod["spec"]["containers"] if c["name"] == "exporter")
    assert exporter["command"] == ["/opt/gpuhook/bin/gpuhook", "exporter", "--node-root=/host"]
    port = next(p for p in exporter["ports"] if p["name"] == "metrics")["containerPort"]
    config = from_table(tomllib.loads(_configmap()), "/etc/gpuhook/config.toml")
    assert parse_listen(config.exporter.listen) == ("0.0.0.0", port)  # the pod's address, not the loopback
    service = next(d for d in docs if d["kind"] == "Service")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["clusterIP"] == "None"  # every node's pod is its own target
    annotations = service["metadata"]["annotations"]
    assert (annotations["prometheus.io/scrape"], annotations["prometheus.io/port"]) == ("true", str(port))
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["metrics"]


def test_the_dra_vendor_classes_serve_the_device_plugins_resource_names() -> None:
    """KEP-5004: each vendor's DeviceClass carries its device plugin's resource (the vendor's RESOURCE) as
    extendedResourceName, so an unchanged pod asking nvidia.com/gpu is served by the DRA driver; the classes of
    any vendor, MIG devices and partitions serve none (a resource names one kind of device)."""
    from gpuhook.vendors.registry import resources

    classes = {d["metadata"]["name"]: d["spec"] for d in _all("daemonset-dra.yaml") if d["kind"] == "DeviceClass"}
    named = {name: spec["extendedResourceName"] for name, spec in classes.items() if "extendedResourceName" in spec}
    assert named == {f"{vendor}.gpu.gpuhook.dev": resource for vendor, resource in resources()}
    for name in named:
        vendor = name.split(".")[0]
        (selector,) = classes[name]["selectors"]
        assert f"device.attributes['gpu.gpuhook.dev'].vendor == '{vendor}'" in selector["cel"]["expression"]
        assert "device.attributes['gpu.gpuhook.dev'].type == 'gpu'" in selector["cel"]["expression"]


def test_every_label_and_annotation_the_chart_fills_in_is_quoted() -> None:
    """A label's or annotation's value from a template expression is quoted: YAML reads an unquoted digest of
    digits (or digits, e, digits) as a number, and the API server then refuses the whole object (CI saw the
    DaemonSet's config digest do so once). Keys with a prefix (name/key) are labels and annotations."""
    entry = re.compile(r"^\s*([\w.-]+/[\w.-]+):\s*(\{\{.*\}\})\s*$")
    unquoted = []
    for template in sorted((CHART / "templates").iterdir()):
        for n, line in enumerate(template.read_text().splitlines(), 1):
            found = entry.match(line)
            if found and not re.search(r"\|\s*quote\s*\}\}$|\bquote\b", found.group(2)):
                unquoted.append(f"{template.name}:{n}: {line.strip()}")
    assert unquoted == []
    assert any("config-digest" in line for line in (CHART / "templates/daemonset.yaml").read_text().splitlines()
               if entry.match(line))  # the rule sees the line it is for
