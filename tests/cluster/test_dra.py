"""gpuhook's DRA driver on the one-node cluster with containerd 2 (CDI from the test's spec directory): the real
scheduler allocates from the ResourceSlices the driver publishes, the real kubelet calls its node plugin, and
containerd injects the CDI devices it names. What each container sees in its /dev is what is asserted.

The host: four NVIDIA GPUs, the first in MIG mode (two 1g.10gb devices), over two NUMA nodes, and two AMD GPUs.
The device plugin is stopped: a node publishes its GPUs one way. The driver runs as the chart's DaemonSet would,
with the chart's service account rights (a token of the rendered ServiceAccount) and DeviceClasses."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuhook.testing.simulate import HostSpec, build_host
from tests.e2e import conftest

from .control_plane import NODE, ControlPlane, control_plane, stop
from .node import REPO, Node, components, node, wait_for
from .test_cluster import IMAGE, SEE, Cluster, _ready, _unschedulable

DRIVER = "gpu.gpuhook.dev"
HOST = HostSpec(nvidia=4, amd=2, mig=("1g.10gb", "1g.10gb"), mig_gpus=1, numa_nodes=2)


class Dra(Cluster):
    def __init__(self, plane: ControlPlane, n: Node, specs: Path, argv: list[str], env: dict[str, str]) -> None:
        super().__init__(plane, n)
        self.specs, self.argv, self.env = specs, argv, env
        self.log = n.d / "dra-driver.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start_driver(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def stop_driver(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None

    @property
    def state(self) -> Path:
        return self.node.d / "gpuhook-state"

    def records(self) -> list[str]:
        return sorted(p.stem for p in (self.state / "claims").glob("*.json"))

    def slices(self) -> list[dict[str, Any]]:
        listed = json.loads(self.plane.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
        return [s for s in listed if s["spec"]["driver"] == DRIVER]

    def devices(self) -> dict[str, dict[str, Any]]:
        return {d["name"]: d for s in self.slices() for d in s["spec"].get("devices", [])}

    def claim_pod(self, name: str, claim: dict[str, Any], script: str, containers: tuple[str, ...] = ("main",),
                  runtime: str = "", namespace: str = "default", template: bool = True,
                  restart: str = "Never") -> None:
        """A pod whose containers share one claim: from a template of `claim` (made here), or the claim named."""
        if template:
            self.plane.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                              "metadata": {"name": name, "namespace": namespace}, "spec": {"spec": claim}})
            source = {"resourceClaimTemplateName": name}
        else:
            source = {"resourceClaimName": claim["name"]}
        spec: dict[str, Any] = {
            "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", **source}],
            "containers": [{"name": c, "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script],
                            "resources": {"claims": [{"name": "gpu"}]}} for c in containers]}
        if runtime:
            spec["runtimeClassName"] = runtime
        self.plane.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                          "spec": spec})

    def allocated(self, pod: str, namespace: str = "default") -> list[str]:
        """The devices the scheduler allocated to the pod's claim."""
        status = self.plane.get("pod", pod, namespace)["status"]
        claim = next(c["resourceClaimName"] for c in status.get("resourceClaimStatuses", []))
        got = self.plane.get("resourceclaim", claim, namespace)
        return sorted(r["device"] for r in got["status"]["allocation"]["devices"]["results"])


def exactly(device_class: str, count: int = 1, selectors: tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    """A claim's spec: one request, `gpu`, of `count` devices of the class, CEL selectors, and more of the spec."""
    request: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selectors:
        request["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"devices": {"requests": [{"name": "gpu", "exactly": request}], **more}}


def driver_argv(plane: ControlPlane, n: Node, d: Path, specs: Path) -> list[str]:
    """The chart's RBAC and DeviceClasses applied, and `gpuhook dra-driver`'s command line as the chart's service
    account (a token's kubeconfig in `d`), serving node `n` with its CDI specs in `specs`."""
    rendered = [o for o in yaml.safe_load_all((REPO / "packaging/kubernetes/daemonset-dra.yaml").read_text())
                if o and o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DeviceClass")]
    plane.apply(*rendered)
    token = plane.kubectl("create", "token", "gpuhook-dra", "-n", "kube-system", "--duration", "2h").stdout
    kubeconfig = d / "dra.kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dra",
        "clusters": [{"name": "c", "cluster": {"server": plane.server,
                                               "certificate-authority": str(d / "plane/pki/ca.crt")}}],
        "users": [{"name": "dra", "user": {"token": token.strip()}}],
        "contexts": [{"name": "dra", "context": {"cluster": "c", "user": "dra"}}]}))
    return [conftest.GPUHOOK, "dra-driver", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
            "--kubelet-plugins-dir", str(n.d / "kubelet/plugins"),
            "--kubelet-registry-dir", str(n.d / "kubelet/plugins_registry"), "--cdi-dir", str(specs)]


@pytest.fixture(scope="module")
def dra(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str, kube_version: str,
        kube_gates_off: tuple[str, ...]) -> Iterator[Dra]:
    built = components(kube_version)  # 1.36; test_dra_versions.py runs some of these on 1.34 and 1.37
    d = tmp_path_factory.mktemp("dra-cluster")
    specs = d / "cdi"
    specs.mkdir()
    with control_plane(d / "plane", built, kube_gates_off) as plane, \
            node(d / "node", base_rootfs, conftest.SHIM, conftest.GPUHOOK, plane, str(built / "containerd"),
                 host_spec=HOST, cdi_dirs=(str(specs),)) as n:
        n.stop_plugin()  # one way to publish a node's GPUs
        plane.apply({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "plain"},
                     "handler": "runc"})
        argv = driver_argv(plane, n, d, specs)
        cluster = Dra(plane, n, specs, argv, {**os.environ, "GPUHOOK_CONFIG": n.env.gpuhook_config})
        cluster.start_driver()
        try:
            wait_for(lambda: _ready(plane) and len(cluster.devices()) == 7, 90,
                     lambda: f"devices {sorted(cluster.devices())}\n{cluster.log.read_text()}\n"
                     f"{n.kubelet_log.read_text()[-3000:]}")
            wait_for(lambda: "registered with the kubelet" in cluster.log.read_text(), 30,
                     lambda: f"{cluster.log.read_text()}\n{n.kubelet_log.read_text()[-3000:]}")
            yield cluster
        finally:
            plane.kubectl("delete", "pods", "--all", "--all-namespaces", "--wait", "--timeout", "60s", check=False,
                          timeout=90)
            cluster.stop_driver()


def _nvidia(seen: list[str]) -> list[str]:
    return sorted(s for s in seen if s.startswith("nvidia"))


def test_the_slices_list_the_hosts_devices_by_the_vendors_names(dra: Dra) -> None:
    """Whole GPUs not in MIG mode, each MIG device, the AMD GPUs; gpuhook's attributes, the vendor driver's copies,
    the standard ones, memory; all in one pool named after the node, owned by the Node."""
    devices = dra.devices()
    assert sorted(devices) == ["amdgpu-128", "amdgpu-129", "gpu-0-mig-1g10gb-1-0", "gpu-0-mig-1g10gb-2-0",
                               "gpu-1", "gpu-2", "gpu-3"]
    gpu = devices["gpu-2"]["attributes"]
    assert gpu["type"] == {"string": "gpu"} and gpu["vendor"] == {"string": "nvidia"}
    assert gpu["gpu.nvidia.com/type"] == {"string": "gpu"}
    assert gpu["productName"] == gpu["gpu.nvidia.com/productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert gpu["cudaComputeCapability"] == {"version": "9.0.0"} and gpu["driverVersion"] == {"version": "550.54.15"}
    assert gpu["resource.kubernetes.io/numaNode"] == {"int": 1}
    assert gpu["resource.kubernetes.io/pciBusID"]["string"].endswith(":00.0")
    mig = devices["gpu-0-mig-1g10gb-1-0"]["attributes"]
    assert mig["type"] == {"string": "mig"} and mig["profile"] == {"string": "1g.10gb"}
    assert mig["parentUUID"]["string"].startswith("GPU-")
    amd = devices["amdgpu-128"]["attributes"]
    assert amd["gpu.amd.com/type"] == {"string": "amdgpu"} and amd["architecture"] == {"string": "gfx942"}
    assert int(devices["gpu-2"]["capacity"]["memory"]["value"]) == 81559 * 2**20  # the stub NVML's H100
    pools = {(s["spec"]["pool"]["name"], s["spec"]["pool"]["resourceSliceCount"]) for s in dra.slices()}
    assert pools == {(NODE, 1)}
    assert dra.slices()[0]["metadata"]["ownerReferences"][0]["kind"] == "Node"


@pytest.mark.parametrize("runtime", ["gpuhook", "plain"])
def test_a_claim_template_gives_the_pod_exactly_its_gpu(dra: Dra, runtime: str) -> None:
    """One NVIDIA GPU from a template; the container sees that GPU alone, on gpuhook's runtime (the shim verifies
    the claim) and on plain runc (containerd's CDI, and the claim's hooks)."""
    name = f"one-{runtime}"
    dra.claim_pod(name, exactly("nvidia.gpu.gpuhook.dev"), SEE + "; sleep 300",
                  runtime="" if runtime == "gpuhook" else "plain")
    try:  # while it runs: a pod that ended has its claim unprepared and deleted, sooner or later
        wait_for(lambda: dra.logs_so_far(name, "main"), 90, lambda: json.dumps(dra.status(name))[:3000])
        seen = dra.logs_so_far(name, "main")
        (device,) = dra.allocated(name)
        assert seen == [f"nvidia{device.removeprefix('gpu-')}"], (seen, device)
        assert len(dra.records()) == 1
    finally:
        dra.delete(name)
    wait_for(lambda: not dra.records() and not list(dra.specs.glob("gpuhook.dev-claim_*")), 60,
             lambda: f"left: {dra.records()} {list(dra.specs.iterdir())}\n{dra.log.read_text()[-2000:]}")


def test_a_cel_selector_written_for_nvidias_driver_selects_ours(dra: Dra) -> None:
    """The attributes under gpu.nvidia.com: a claim's CEL written for NVIDIA's driver, with only its class
    changed; and memory as a capacity."""
    claim = exactly(DRIVER, selectors=(
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
        "device.capacity['gpu.gpuhook.dev'].memory.compareTo(quantity('64Gi')) >= 0"))
    dra.claim_pod("cel", claim, SEE)
    try:
        seen = dra.logs("cel", "main")
        assert len(seen) == 1 and seen[0].startswith("nvidia") and seen[0] != "nvidia0", seen  # not the MIG GPU
    finally:
        dra.delete("cel")


def test_two_gpus_on_one_numa_node(dra: Dra) -> None:
    """gpu-1 is on NUMA node 0, gpu-2 and gpu-3 on node 1: two whole NVIDIA GPUs on one node are those two."""
    claim = exactly("nvidia.gpu.gpuhook.dev", 2, constraints=[
        {"requests": ["gpu"], "matchAttribute": "resource.kubernetes.io/numaNode"}])
    dra.claim_pod("numa", claim, SEE)
    try:
        assert _nvidia(dra.logs("numa", "main")) == ["nvidia2", "nvidia3"]
    finally:
        dra.delete("numa")


def test_a_claim_that_cannot_be_met_stays_pending_with_the_schedulers_reason(dra: Dra) -> None:
    dra.claim_pod("three-amd", exactly("amd.gpu.gpuhook.dev", 3), SEE)
    try:
        wait_for(lambda: "cannot allocate all claims" in _unschedulable(dra, "three-amd"), 60,
                 lambda: json.dumps(dra.status("three-amd")))
        assert dra.status("three-amd")["phase"] == "Pending"
    finally:
        dra.delete("three-amd")


def test_a_mig_device_by_profile(dra: Dra) -> None:
    """The MIG class and a profile selector: the container gets the MIG device's capability nodes, on its GPU."""
    dra.claim_pod("mig", exactly("mig.gpu.gpuhook.dev", selectors=(
        "device.attributes['gpu.gpuhook.dev'].profile == '1g.10gb'",)),
        "ls /dev | grep -E '^nvidia[0-9]+$'; ls /dev/nvidia-caps")
    try:
        seen = dra.logs("mig", "main")
        assert seen[0] == "nvidia0" and len(seen) == 3 and all(s.startswith("nvidia-cap") for s in seen[1:]), seen
    finally:
        dra.delete("mig")


def test_one_claim_shared_by_two_containers_and_two_pods(dra: Dra) -> None:
    dra.plane.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": "shared", "namespace": "default"}, "spec": exactly("amd.gpu.gpuhook.dev")})
    try:
        dra.claim_pod("share-a", {"name": "shared"}, SEE + "; sleep 300", ("one", "two"), template=False)
        wait_for(lambda: dra.logs_so_far("share-a", "one") and dra.logs_so_far("share-a", "two"), 90,
                 lambda: json.dumps(dra.status("share-a")))
        dra.claim_pod("share-b", {"name": "shared"}, SEE, template=False)
        seen = dra.logs("share-b", "main")
        assert seen == dra.logs_so_far("share-a", "one") == dra.logs_so_far("share-a", "two"), seen
        assert len(seen) == 1 and seen[0].startswith("renderD")
    finally:
        dra.delete("share-a", "share-b")
        dra.plane.kubectl("delete", "resourceclaim", "shared", "--wait", check=False)


def test_an_admin_access_claim_sees_a_gpu_another_pod_holds(dra: Dra) -> None:
    """A monitoring pod in a namespace labelled for admin access gets the GPU a running pod holds, while it
    holds it; a claim with a configuration on such a device is refused at prepare."""
    dra.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "monitoring", "labels": {"resource.kubernetes.io/admin-access": "true"}}})
    dra.claim_pod("holder", exactly("amd.gpu.gpuhook.dev", 2), SEE + "; sleep 300")
    try:
        wait_for(lambda: len(dra.logs_so_far("holder", "main")) == 2, 90, lambda: json.dumps(dra.status("holder")))
        admin = exactly("amd.gpu.gpuhook.dev")
        admin["devices"]["requests"][0]["exactly"]["adminAccess"] = True
        dra.claim_pod("watcher", admin, SEE, namespace="monitoring")
        seen = _logs_in(dra, "monitoring", "watcher")
        assert len(seen) == 1 and seen[0] in dra.logs_so_far("holder", "main"), seen
    finally:
        dra.plane.kubectl("delete", "pod", "watcher", "-n", "monitoring", "--wait", check=False)
        dra.delete("holder")


def test_tuning_from_the_claims_configuration_is_applied_and_restored(dra: Dra) -> None:
    config = [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": "resource.gpuhook.dev/v1alpha1", "kind": "GpuConfig", "clocks": "1500", "powerLimit": 300}}}]
    dra.claim_pod("tuned", exactly("nvidia.gpu.gpuhook.dev", config=config), SEE + "; sleep 300")
    try:
        wait_for(lambda: dra.logs_so_far("tuned", "main"), 90, lambda: json.dumps(dra.status("tuned")))
        index = int(dra.logs_so_far("tuned", "main")[0].removeprefix("nvidia"))
        assert _nvml(dra)[index][:3] == [1500, 1500, 300000], _nvml(dra)
    finally:
        dra.delete("tuned")
    wait_for(lambda: _nvml(dra)[index][:2] == [0, 0], 30, lambda: str(_nvml(dra)))


def test_a_device_classs_configuration_applies_and_the_claims_overrides_it(dra: Dra) -> None:
    """A class an admin made with a GpuConfig (clocks 1200, 250 W): a claim of it gets both, and its own clocks
    replace the class's, field by field."""
    params = {"apiVersion": "resource.gpuhook.dev/v1alpha1", "kind": "GpuConfig"}
    dra.plane.apply({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nvidia-capped"},
                     "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}' && device.attributes"
                                                                   f"['{DRIVER}'].vendor == 'nvidia'"}}],
                              "config": [{"opaque": {"driver": DRIVER, "parameters": {
                                  **params, "clocks": "1200", "powerLimit": 250}}}]}})
    own = [{"opaque": {"driver": DRIVER, "parameters": {**params, "clocks": "1500"}}}]
    dra.claim_pod("capped", exactly("nvidia-capped", config=own), SEE + "; sleep 300")
    try:
        wait_for(lambda: dra.logs_so_far("capped", "main"), 90, lambda: json.dumps(dra.status("capped")))
        index = int(dra.logs_so_far("capped", "main")[0].removeprefix("nvidia"))
        assert _nvml(dra)[index][:3] == [1500, 1500, 250000], _nvml(dra)
    finally:
        dra.delete("capped")
        dra.plane.kubectl("delete", "deviceclass", "nvidia-capped", check=False)


def test_an_invalid_configuration_fails_preparation_with_one_line_in_the_pods_events(dra: Dra) -> None:
    config = [{"opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": "resource.gpuhook.dev/v1alpha1", "kind": "GpuConfig", "clock": "1500"}}}]
    dra.claim_pod("typo", exactly("nvidia.gpu.gpuhook.dev", config=config), SEE)
    try:
        wanted = "unknown field 'clock' in GpuConfig"
        wait_for(lambda: wanted in _events(dra, "typo"), 60, lambda: _events(dra, "typo"))
        assert dra.status("typo")["phase"] == "Pending" and not dra.records()
    finally:
        dra.delete("typo")


def test_a_pod_authors_own_env_or_annotation_gets_nothing(dra: Dra) -> None:
    """Only a claim grants: NVIDIA_VISIBLE_DEVICES=all in a pod with no claim is refused with gpuhook's line, and
    gpuhook.dev/gpus beside a claim is refused too."""
    dra.pod("env", {"containers": [{"name": "main", "image": IMAGE, "imagePullPolicy": "Never",
                                    "command": ["sh", "-c", SEE], "env": [{"name": "NVIDIA_VISIBLE_DEVICES",
                                                                           "value": "all"}]}]})
    try:
        wait_for(lambda: "only the kubelet grants GPUs" in json.dumps(dra.status("env")), 60,
                 lambda: json.dumps(dra.status("env")))
    finally:
        dra.delete("env")


def test_the_driver_restarting_keeps_prepared_claims(dra: Dra) -> None:
    """A running pod's claim survives the driver's restart (its record is the checkpoint); the pod's end is
    unprepared by the new driver, and a new claim is served by it."""
    dra.claim_pod("kept", exactly("amd.gpu.gpuhook.dev"), SEE + "; sleep 300")
    try:
        wait_for(lambda: dra.logs_so_far("kept", "main"), 90, lambda: json.dumps(dra.status("kept")))
        before = dra.records()
        dra.stop_driver()
        dra.start_driver()
        wait_for(lambda: dra.log.read_text().count("registered with the kubelet") >= 2, 30, dra.log.read_text)
        assert dra.records() == before and len(before) == 1
    finally:
        dra.delete("kept")
    wait_for(lambda: not dra.records(), 60, lambda: dra.log.read_text()[-2000:])
    dra.claim_pod("after", exactly("amd.gpu.gpuhook.dev"), SEE)
    try:
        assert len(dra.logs("after", "main")) == 1
    finally:
        dra.delete("after")


def test_a_reboot_keeps_prepared_claims_from_the_drivers_checkpoint(dra: Dra) -> None:
    """/run emptied under a pod (its claim's record and CDI spec gone), the kubelet and the driver restarted, as
    after a reboot. The kubelet does not prepare the claim again (its checkpoint says it is); the driver restores
    the record and the CDI spec from its own, and the pod's container, started anew, gets its GPU."""
    dra.claim_pod("reboot", exactly("nvidia.gpu.gpuhook.dev"), SEE + "; sleep 300", restart="Always")
    try:
        wait_for(lambda: dra.logs_so_far("reboot", "main"), 90, lambda: json.dumps(dra.status("reboot")))
        before = dra.logs_so_far("reboot", "main")
        (uid,) = dra.records()
        dra.stop_driver()
        (dra.state / "claims" / f"{uid}.json").unlink()
        for spec in dra.specs.glob("gpuhook.dev-claim_*"):
            spec.unlink()
        dra.node.restart_kubelet()
        dra.start_driver()
        wait_for(lambda: dra.records() == [uid] and list(dra.specs.glob("gpuhook.dev-claim_*")), 60,
                 lambda: f"{dra.log.read_text()[-2000:]}\n{dra.node.kubelet_log.read_text()[-2000:]}")
        assert "restored prepared claim default/" in dra.log.read_text() and f"({uid}) from the checkpoint" in \
            dra.log.read_text()
        (running,) = [c for c in dra.node.containers() if c.metadata.name == "main" and c.state == 1]
        dra.node.env.client.stop_container(running.id, 1)  # the kubelet starts it again (restartPolicy Always)
        wait_for(lambda: _restarts(dra, "reboot") >= 1 and dra.logs_so_far("reboot", "main"), 90,
                 lambda: f"{json.dumps(dra.status('reboot'))}\n{dra.node.env.log_tail()}")
        assert dra.logs_so_far("reboot", "main") == before
        # a kubelet starting deletes its node's slices of drivers not registered yet: the driver writes them again
        wait_for(lambda: len(dra.devices()) == 7, 30, lambda: f"{sorted(dra.devices())}\n{dra.log.read_text()}")
    finally:
        dra.delete("reboot")
    wait_for(lambda: not dra.records(), 60, lambda: dra.log.read_text()[-2000:])


def _restarts(dra: Dra, pod: str) -> int:
    statuses = dra.status(pod).get("containerStatuses") or [{}]
    return int(statuses[0].get("restartCount", 0))


def test_a_gpu_that_turns_unhealthy_is_tainted_and_its_pods_status_says_so(dra: Dra) -> None:
    """gpu-3's device node goes from the host: it stays in the slices with gpuhook's gpu-lost taint (no new claim
    gets it: tests/cluster/test_dra_taints.py), and the kubelet's health watch marks it Unhealthy, with gpuhook's
    reason, in the status of the pod holding it, whose claim tolerates the taint (NoExecute would evict it);
    untainted when the node is back."""
    claim = exactly("nvidia.gpu.gpuhook.dev", selectors=("device.attributes['gpu.gpuhook.dev'].index == 3",))
    claim["devices"]["requests"][0]["exactly"]["tolerations"] = [{"key": "gpu.gpuhook.dev/gpu-lost",
                                                                  "operator": "Exists"}]
    dra.claim_pod("sick", claim, SEE + "; sleep 300")
    try:
        wait_for(lambda: dra.logs_so_far("sick", "main") == ["nvidia3"], 90, lambda: json.dumps(dra.status("sick"))
                 + dra.plane.kubectl("get", "resourceclaims", "-A", "-o", "yaml").stdout[-4000:])
        Path(dra.node.env.host_root, "dev/nvidia3").unlink()
        wait_for(lambda: [t["key"] for t in dra.devices().get("gpu-3", {}).get("taints") or []]
                 == ["gpu.gpuhook.dev/gpu-lost"], 30, lambda: sorted(dra.devices().items()))
        wait_for(lambda: _health(dra, "sick") == [("Unhealthy", "device node /dev/nvidia3 is missing")], 60,
                 lambda: json.dumps(dra.status("sick")))
    finally:
        dra.delete("sick")
        build_host(dra.node.env.host_root, HOST)
    wait_for(lambda: "gpu-3" in dra.devices() and not dra.devices()["gpu-3"].get("taints"), 30,
             lambda: sorted(dra.devices().items()))


def _health(dra: Dra, pod: str) -> list[tuple[str, str]]:
    """(health, message) the kubelet shows for each of the pod's allocated devices."""
    return [(r.get("health", ""), r.get("message", "")) for c in dra.status(pod).get("containerStatuses") or []
            for named in c.get("allocatedResourcesStatus") or [] for r in named.get("resources") or []]


def test_time_slicing_shares_a_gpu_between_claims_up_to_its_replicas(dra: Dra) -> None:
    """[kubernetes] replicas = 2: each device is published with two shares (consumable capacity); two claims of
    gpu-1 both run on it at once, a third waits Pending, and an exclusive claim on it is refused at prepare."""
    shared = Path(dra.env["GPUHOOK_CONFIG"]).with_name("shared.toml")
    shared.write_text(Path(dra.env["GPUHOOK_CONFIG"]).read_text().replace("[kubernetes]\n",
                                                                          "[kubernetes]\nreplicas = 2\n"))
    dra.stop_driver()
    dra.env["GPUHOOK_CONFIG"], original = str(shared), dra.env["GPUHOOK_CONFIG"]
    dra.start_driver()
    one = ("device.attributes['gpu.gpuhook.dev'].index == 1",)
    try:
        wait_for(lambda: dra.devices().get("gpu-1", {}).get("allowMultipleAllocations") is True, 60,
                 lambda: json.dumps(dra.devices().get("gpu-1")))
        assert dra.devices()["gpu-1"]["capacity"]["shares"]["value"] == "2"
        for name in ("share-1", "share-2"):
            dra.claim_pod(name, exactly("nvidia.gpu.gpuhook.dev", selectors=one), SEE + "; sleep 300")
        for name in ("share-1", "share-2"):
            wait_for(lambda: dra.logs_so_far(name, "main") == ["nvidia1"], 90,  # noqa: B023 (called at once)
                     lambda: json.dumps(dra.status(name)))  # noqa: B023
        dra.claim_pod("share-3", exactly("nvidia.gpu.gpuhook.dev", selectors=one), SEE)
        wait_for(lambda: "cannot allocate all claims" in _unschedulable(dra, "share-3"), 60,
                 lambda: json.dumps(dra.status("share-3")))
        config = [{"opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "resource.gpuhook.dev/v1alpha1", "kind": "GpuConfig", "exclusive": True}}}]
        dra.claim_pod("alone", exactly("nvidia.gpu.gpuhook.dev", config=config), SEE)
        wait_for(lambda: "exclusive in the GpuConfig on a shared GPU" in _events(dra, "alone"), 60,
                 lambda: _events(dra, "alone"))
    finally:
        dra.delete("share-1", "share-2", "share-3", "alone")
        dra.stop_driver()
        dra.env["GPUHOOK_CONFIG"] = original
        dra.start_driver()
    wait_for(lambda: "allowMultipleAllocations" not in dra.devices().get("gpu-1", {"allowMultipleAllocations": 1}),
             60, lambda: json.dumps(dra.devices().get("gpu-1")))


def test_a_changed_partition_mode_republishes_and_a_partition_is_claimed(dra: Dra) -> None:
    """The AMD GPUs put in CPX mode (eight partitions each) while the driver runs: it publishes the partitions in
    place of the GPUs, and a claim of the partition class gets one partition's render node."""
    build_host(dra.node.env.host_root, _with_partitions(HOST))
    try:
        wait_for(lambda: sum(n.startswith("amdgpu-") for n in dra.devices()) == 16, 60,
                 lambda: f"{sorted(dra.devices())}\n{dra.log.read_text()[-2000:]}")
        partition = dra.devices()["amdgpu-131"]["attributes"]
        assert partition["type"] == {"string": "partition"} and partition["partitionProfile"] == {
            "string": "cpx_nps1"}
        dra.claim_pod("part", exactly("partition.gpu.gpuhook.dev"), SEE)
        try:
            seen = dra.logs("part", "main")
            assert len(seen) == 1 and seen[0].startswith("renderD"), seen
        finally:
            dra.delete("part")
    finally:
        build_host(dra.node.env.host_root, HOST)
        wait_for(lambda: len(dra.devices()) == 7, 60, lambda: sorted(dra.devices()))


def _with_partitions(spec: HostSpec) -> HostSpec:
    return spec.replace(amd_partitions="CPX")


def _logs_in(dra: Dra, namespace: str, pod: str, timeout: float = 90) -> list[str]:
    from .node import printed

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = dra.plane.get("pod", pod, namespace)["status"]
        if status.get("phase") in ("Succeeded", "Failed"):
            return printed(dra.node.d, f"{namespace}_{pod}", "main")
        time.sleep(0.5)
    raise AssertionError(json.dumps(dra.plane.get("pod", pod, namespace)["status"]))


def _events(dra: Dra, pod: str) -> str:
    done = dra.plane.kubectl("get", "events", "-n", "default", "--field-selector", f"involvedObject.name={pod}",
                             "-o", "json", check=False)
    return " | ".join(e.get("message", "") for e in json.loads(done.stdout or "{}").get("items", []))


def _nvml(dra: Dra) -> dict[int, list[int]]:
    text = Path(f"{dra.node.env.host_root}/var/lib/gpuhook-sim/nvml").read_text()
    return {int(f[0]): [int(x) for x in f[1:]] for f in (ln.split() for ln in text.splitlines())}

