"""gpuhook on a one-node cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a kubelet, all
built from the pinned module sets, on containerd (Debian's 1.6, and 2.x built from modules) and CRI-O 1.36 (built
from its module), with gpuhook registered by `gpuhook configure containerd`'s or `configure crio`'s code, its
device plugin serving the kubelet, `[policy] requests = "allocated"`. Pods go through the API: the scheduler places
them by the node's allocatable GPUs and labels, the kubelet admits them through its device manager, and each
container's own /dev (its log) is what is asserted."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import conftest

from .control_plane import NODE, ControlPlane, control_plane
from .node import Node, components, node, printed, wait_for

IMAGE = "gpuhook.test/base:1"
SEE = "ls /dev | grep -E '^(nvidia[0-9]+|renderD[0-9]+)$' || true; ls /dev/dri 2>/dev/null | grep render || true"


class Cluster:
    def __init__(self, plane: ControlPlane, n: Node) -> None:
        self.plane, self.node = plane, n

    def pod(self, name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None,
            labels: dict[str, str] | None = None) -> None:
        self.plane.apply({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "default", "annotations": annotations or {},
                                       "labels": labels or {}},
                          "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, **spec}})

    def delete(self, *names: str) -> None:
        self.plane.kubectl("delete", "pod", *names, "--wait", "--timeout", "60s", check=False, timeout=90)

    def status(self, name: str) -> Any:
        return self.plane.get("pod", name)["status"]

    def logs_so_far(self, pod: str, container: str) -> list[str]:
        """What a running container has printed (its CRI log's lines)."""
        return printed(self.node.d, f"default_{pod}", container)

    def logs(self, pod: str, container: str, timeout: float = 90) -> list[str]:
        """What the container printed, once it ended (the kubelet's log of it, CRI's format)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status(pod)
            states = {c["name"]: c.get("state", {}) for c in
                      status.get("initContainerStatuses", []) + status.get("containerStatuses", [])}
            if "terminated" in states.get(container, {}):
                assert list((self.node.d / "pod-logs").glob(f"default_{pod}_*/{container}/*.log")), \
                    f"{pod}/{container} ended without a log"
                # the runtime may report the exit before its log writer has written the last lines: read until
                # two reads a quarter second apart agree (3 s at most)
                seen, settle = printed(self.node.d, f"default_{pod}", container), time.monotonic() + 3
                while time.monotonic() < settle:
                    time.sleep(0.25)
                    again = printed(self.node.d, f"default_{pod}", container)
                    if again == seen:
                        break
                    seen = again
                return seen
            time.sleep(0.5)
        raise AssertionError(f"{pod}/{container} did not end: {json.dumps(self.status(pod))[:3000]}\n"
                             f"{self.node.kubelet_log.read_text()[-3000:]}\n{self.node.plugin_log.read_text()}")


def container(name: str, script: str, resource: str = "", count: int = 1) -> dict[str, Any]:
    limits = {resource: str(count)} if resource else {}
    return {"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script],
            "resources": {"limits": limits}}


@pytest.fixture(scope="module", params=["containerd-1.6", "containerd-2", "cri-o"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            base_rootfs: str) -> Iterator[Cluster]:
    built = components()
    binary = {"containerd-1.6": "containerd", "containerd-2": str(built / "containerd"), "cri-o": "crio"}[request.param]
    d = tmp_path_factory.mktemp(request.param)
    with control_plane(d / "plane", built) as plane, \
            node(d / "node", base_rootfs, conftest.SHIM, conftest.GPUHOOK, plane, binary) as n:
        wait_for(lambda: _ready(plane), 90, lambda: f"{NODE} not Ready: {_conditions(plane)}\n"
                 f"{n.kubelet_log.read_text()[-3000:]}\n{n.plugin_log.read_text()}")
        wait_for(lambda: _allocatable(plane).get("amd.com/gpu") == "2" and
                 _allocatable(plane).get("nvidia.com/gpu") == "2", 60,
                 lambda: f"allocatable {_allocatable(plane)}\n{n.plugin_log.read_text()}")
        yield Cluster(plane, n)


def _node(plane: ControlPlane) -> Any:
    done = plane.kubectl("get", "node", NODE, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def _conditions(plane: ControlPlane) -> list[Any]:
    return list(_node(plane).get("status", {}).get("conditions", []))


def _ready(plane: ControlPlane) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in _conditions(plane))


def _allocatable(plane: ControlPlane) -> dict[str, str]:
    return dict(_node(plane).get("status", {}).get("allocatable", {}))


def test_the_scheduler_places_gpu_pods_by_what_the_plugin_advertises(cluster: Cluster) -> None:
    """Two pods asking amd.com/gpu: 1 each run on different GPUs; a third waits Pending with the scheduler's reason
    (the node has two), and runs on the freed GPU once one of the first two is gone."""
    for name in ("one", "two"):
        cluster.pod(name, {"containers": [container("main", SEE + "; sleep 300", "amd.com/gpu")]})
    try:
        for name in ("one", "two"):
            wait_for(lambda: len(cluster.logs_so_far(name, "main")) == 1, 60,  # noqa: B023 (called at once)
                     lambda: json.dumps(cluster.status(name)))  # noqa: B023
        seen = {name: cluster.logs_so_far(name, "main") for name in ("one", "two")}
        assert seen["one"] != seen["two"], seen
        cluster.pod("three", {"containers": [container("main", SEE, "amd.com/gpu")]})
        wait_for(lambda: "Insufficient amd.com/gpu" in _unschedulable(cluster, "three"), 30,
                 lambda: json.dumps(cluster.status("three")))
        assert cluster.status("three")["phase"] == "Pending"
        cluster.delete("one")
        assert cluster.logs("three", "main") == seen["one"]
    finally:
        cluster.delete("one", "two", "three")


def test_init_and_app_containers_asking_one_gpu_both_start(cluster: Cluster) -> None:
    """The bug a real kubelet found, now through the scheduler: one GPU allocated to the init container and then
    to the app container before either runs; both start and see that GPU."""
    cluster.pod("both", {"initContainers": [container("init", SEE, "nvidia.com/gpu")],
                         "containers": [container("main", SEE, "nvidia.com/gpu")]})
    try:
        init, main = cluster.logs("both", "init"), cluster.logs("both", "main")
        assert len(init) == 1 and init == main, (init, main)
    finally:
        cluster.delete("both")


def test_a_pod_authors_own_request_fails_with_gpuhooks_line_in_the_pods_status(cluster: Cluster) -> None:
    """gpuhook.dev/gpus=all on a pod with no GPU resources: scheduled, never run; the container's status says why,
    in gpuhook's one line, where `kubectl describe` shows it."""
    cluster.pod("own", {"containers": [container("main", SEE)]}, annotations={"gpuhook.dev/gpus": "all"})
    try:
        def said() -> str:
            for c in cluster.status("own").get("containerStatuses", []):
                state = c.get("state", {})
                for kind in ("waiting", "terminated"):
                    if "only the kubelet grants GPUs" in state.get(kind, {}).get("message", ""):
                        return str(state[kind]["message"])
            return ""
        wait_for(lambda: bool(said()), 60, lambda: json.dumps(cluster.status("own")))
        assert not list((cluster.node.d / "pod-logs").glob("default_own_*/main/*.log")) or not any(
            f.read_text() for f in (cluster.node.d / "pod-logs").glob("default_own_*/main/*.log"))
    finally:
        cluster.delete("own")


def _affinity(key: str, op: str, values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": op, "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _unschedulable(cluster: Cluster, pod: str) -> str:
    """The scheduler's message on a pod it cannot place ("" while it has not said so)."""
    for c in cluster.status(pod).get("conditions", []):
        if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
            return str(c.get("message", ""))
    return ""


def test_the_nodes_labels_are_accepted_and_select_pods(cluster: Cluster) -> None:
    """gpuhook's labels (`gpuhook labels --output -`, what NFD would publish) are valid to the API server; a
    nodeSelector pinning the driver version and a `Gt` affinity on the CUDA driver's major place pods; an affinity
    the node does not meet stays Pending with the scheduler's reason."""
    out = subprocess.run([conftest.GPUHOOK, "labels", "--output", "-"], capture_output=True, text=True, check=True,
                         env={"GPUHOOK_CONFIG": cluster.node.env.gpuhook_config, "PATH": "/usr/bin:/bin"}).stdout
    labels = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith("#"))
    major = labels.get("nvidia.com/cuda.driver.major", "")
    assert labels.get("nvidia.com/gpu.count") == "2" and major.isdigit(), labels
    cluster.plane.kubectl("label", "node", NODE, "--overwrite", *(f"{k}={v}" for k, v in labels.items()))
    applied = _node(cluster.plane)["metadata"]["labels"]
    assert {k: applied.get(k) for k in labels} == labels
    driver = labels["nvidia.com/cuda.driver-version.full"]
    cluster.pod("selected", {"nodeSelector": {"nvidia.com/cuda.driver-version.full": driver},
                             "affinity": _affinity("nvidia.com/cuda.driver.major", "Gt", [str(int(major) - 15)]),
                             "containers": [container("main", "true")]})
    cluster.pod("too-new", {"affinity": _affinity("nvidia.com/cuda.driver.major", "Gt", [str(int(major) + 20)]),
                            "containers": [container("main", "true")]})
    try:
        wait_for(lambda: cluster.status("selected").get("phase") == "Succeeded", 60,
                 lambda: json.dumps(cluster.status("selected")))
        wait_for(lambda: "didn't match Pod's node affinity" in _unschedulable(cluster, "too-new"), 30,
                 lambda: json.dumps(cluster.status("too-new")))
        assert cluster.status("too-new")["phase"] == "Pending"
    finally:
        cluster.delete("selected", "too-new")


def test_a_tainted_gpu_node_takes_only_pods_that_tolerate_it(cluster: Cluster) -> None:
    """A mixed cluster's usual taint, accelerator=nvidia:NoSchedule: a GPU pod without the toleration waits with the
    scheduler's reason, one with it runs on its GPU."""
    cluster.plane.kubectl("taint", "node", NODE, "accelerator=nvidia:NoSchedule")
    try:
        cluster.pod("plain", {"containers": [container("main", SEE, "nvidia.com/gpu")]})
        cluster.pod("tolerant", {"tolerations": [{"key": "accelerator", "operator": "Equal", "value": "nvidia",
                                                  "effect": "NoSchedule"}],
                                 "containers": [container("main", SEE, "nvidia.com/gpu")]})
        assert len(cluster.logs("tolerant", "main")) == 1
        wait_for(lambda: "untolerated taint" in _unschedulable(cluster, "plain"), 30,
                 lambda: json.dumps(cluster.status("plain")))
    finally:
        cluster.plane.kubectl("taint", "node", NODE, "accelerator-", check=False)
        cluster.delete("plain", "tolerant")


def test_a_higher_priority_gpu_pod_preempts_a_lower_one(cluster: Cluster) -> None:
    """Both AMD GPUs held by a low-priority pod: a high-priority pod asking one is placed by preempting it, and
    runs on a GPU the victim had."""
    cluster.plane.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": "gpu-urgent"}, "value": 100000})
    try:
        cluster.pod("low", {"containers": [container("main", SEE + "; sleep 300", "amd.com/gpu", count=2)]})
        wait_for(lambda: len(cluster.logs_so_far("low", "main")) == 2, 60, lambda: json.dumps(cluster.status("low")))
        held = set(cluster.logs_so_far("low", "main"))
        cluster.pod("high", {"priorityClassName": "gpu-urgent",
                             "containers": [container("main", SEE, "amd.com/gpu")]})
        seen = cluster.logs("high", "main", timeout=120)
        assert len(seen) == 1 and seen[0] in held, (seen, held)
        low = cluster.plane.kubectl("get", "pod", "low", "-o", "json", check=False)
        if low.returncode == 0:  # still there, ending: the scheduler marked it the victim
            conditions = json.loads(low.stdout)["status"].get("conditions", [])
            assert any(c["type"] == "DisruptionTarget" for c in conditions), conditions
    finally:
        cluster.delete("low", "high")
        cluster.plane.kubectl("delete", "priorityclass", "gpu-urgent", check=False)


def test_a_restarted_container_keeps_its_gpu(cluster: Cluster) -> None:
    """A container that fails is restarted by the kubelet (restartPolicy OnFailure) with the allocation it had: the
    same GPU in its /dev both times."""
    script = "{ " + SEE + "; } >> /scratch/seen; [ -e /scratch/ran ] && { cat /scratch/seen; exit 0; }; " \
             "touch /scratch/ran; exit 1"  # the second run prints what both runs saw (the kubelet keeps one log)
    main = {**container("main", script, "nvidia.com/gpu"), "volumeMounts": [{"name": "s", "mountPath": "/scratch"}]}
    cluster.pod("again", {"restartPolicy": "OnFailure", "volumes": [{"name": "s", "emptyDir": {}}],
                          "containers": [main]})
    try:
        wait_for(lambda: cluster.status("again").get("phase") == "Succeeded", 90,
                 lambda: json.dumps(cluster.status("again")))
        seen = cluster.logs("again", "main")
        assert cluster.status("again")["containerStatuses"][0]["restartCount"] == 1
        assert len(seen) == 2 and seen[0] == seen[1], seen
    finally:
        cluster.delete("again")


def test_crictl_shows_the_allocation_only_on_the_app_container_and_pause_gets_no_gpu(cluster: Cluster) -> None:
    """Through crictl (built from cri-tools): the kubelet put the plugin's allocation on the app container only, and
    in the bundles gpuhook's runtime left, the pod's sandbox (pause) has no GPU device and the app container its
    one."""
    cluster.pod("seen", {"containers": [container("main", SEE + "; sleep 30", "nvidia.com/gpu")]})
    try:
        wait_for(lambda: cluster.status("seen").get("phase") == "Running", 60,
                 lambda: json.dumps(cluster.status("seen")))
        crictl = [str(components() / "crictl"), "--runtime-endpoint", f"unix://{cluster.node.env.socket}"]

        def run(*args: str) -> str:
            return subprocess.run([*crictl, *args], capture_output=True, text=True, check=True, timeout=30).stdout
        sandbox = run("pods", "--name", "seen", "--namespace", "default", "-q").split()
        assert len(sandbox) == 1, sandbox
        app = run("ps", "--pod", sandbox[0], "-q").split()
        assert len(app) == 1, app
        annotations = json.loads(run("inspect", app[0]))["status"]["annotations"]
        assert "gpuhook.dev/allocation" in annotations, annotations
        pod_annotations = json.loads(run("inspectp", sandbox[0]))["status"].get("annotations", {})
        assert "gpuhook.dev/allocation" not in pod_annotations

        def gpus(spec: dict[str, Any]) -> list[str]:
            return [d["path"] for d in spec.get("linux", {}).get("devices", []) or []
                    if "nvidia" in d["path"] or "renderD" in d["path"] or d["path"] == "/dev/kfd"]
        assert gpus(cluster.node.env.bundle_spec(sandbox[0])) == []
        assert len([p for p in gpus(cluster.node.env.bundle_spec(app[0])) if p[-1].isdigit() and "nvidia" in p]) == 1
    finally:
        cluster.delete("seen")


def _nvml(cluster: Cluster) -> dict[int, list[int]]:
    """The stub NVML's device state on the simulated host: per GPU, locked clocks (min, max), power limit (mW) and
    compute mode, as the driver would hold them (none written yet: nothing was ever set)."""
    path = Path(cluster.node.env.host_root, "var/lib/gpuhook-sim/nvml")
    text = path.read_text() if path.exists() else ""
    return {int(f[0]): [int(x) for x in f[1:]] for f in (line.split() for line in text.splitlines())}


def test_clocks_on_an_allocated_pod_are_applied_on_its_gpu_while_it_runs_and_restored_after(cluster: Cluster) -> None:
    """A pod asks nvidia.com/gpu: 1 and gpuhook.dev/clocks=1500: the host locks the clocks of the GPU the kubelet
    gave it (and no other) while it runs, and unlocks them when the pod goes."""
    before = _nvml(cluster)
    cluster.pod("tuned", {"containers": [container("main", SEE + "; sleep 60", "nvidia.com/gpu")]},
                annotations={"gpuhook.dev/clocks": "1500"})
    try:
        wait_for(lambda: cluster.status("tuned").get("phase") == "Running", 60,
                 lambda: json.dumps(cluster.status("tuned")))
        wait_for(lambda: any(state[:2] == [1500, 1500] for state in _nvml(cluster).values()), 20,
                 lambda: f"no GPU locked at 1500 MHz: {_nvml(cluster)}")
        locked = [i for i, state in _nvml(cluster).items() if state[:2] == [1500, 1500]]
        seen = cluster.logs_so_far("tuned", "main")
        assert len(locked) == 1 and seen == [f"nvidia{locked[0]}"], (locked, seen)
    finally:
        cluster.delete("tuned")
    def restored() -> bool:
        after = _nvml(cluster)
        return all(state[:2] == [0, 0] for state in after.values()) and (not before or after == before)
    wait_for(restored, 20, lambda: f"not restored: {_nvml(cluster)} (was {before})")


def test_a_gpu_whose_device_node_goes_leaves_the_nodes_allocatable_and_comes_back(cluster: Cluster) -> None:
    """The plugin's health check reaches the API: an AMD GPU whose render node disappears is Unhealthy, so the
    kubelet takes it out of the Node's allocatable; back when the node returns."""
    render = sorted(Path(cluster.node.env.host_root, "dev/dri").glob("renderD*"))[-1]
    hidden = render.with_name(render.name + ".away")
    render.rename(hidden)
    try:
        wait_for(lambda: _allocatable(cluster.plane).get("amd.com/gpu") == "1", 40,
                 lambda: f"allocatable {_allocatable(cluster.plane)}")
    finally:
        hidden.rename(render)
    wait_for(lambda: _allocatable(cluster.plane).get("amd.com/gpu") == "2", 40,
             lambda: f"allocatable {_allocatable(cluster.plane)}")


def test_restarts_of_the_device_plugin_and_the_kubelet_keep_running_pods_and_serve_new_ones(
        cluster: Cluster) -> None:
    """A GPU pod runs on while the plugin restarts (the Node's GPUs leave its allocatable while the plugin is away
    and come back) and while the kubelet restarts; after both, a new pod gets the other GPU."""
    n = cluster.node
    cluster.pod("steady", {"containers": [container("main", SEE + "; sleep 300", "nvidia.com/gpu")]})
    try:
        wait_for(lambda: len(cluster.logs_so_far("steady", "main")) == 1, 60,
                 lambda: json.dumps(cluster.status("steady")))
        held = cluster.logs_so_far("steady", "main")
        n.stop_plugin()
        wait_for(lambda: _allocatable(cluster.plane).get("nvidia.com/gpu") == "0", 60,
                 lambda: f"allocatable {_allocatable(cluster.plane)}")
        n.start_plugin()
        wait_for(lambda: _allocatable(cluster.plane).get("nvidia.com/gpu") == "2", 60,
                 lambda: f"allocatable {_allocatable(cluster.plane)}\n{n.plugin_log.read_text()[-2000:]}")
        said = n.plugin_log.read_text().count("nvidia.com/gpu: registered with the kubelet")
        n.restart_kubelet()
        wait_for(lambda: n.plugin_log.read_text().count("nvidia.com/gpu: registered with the kubelet") > said, 30,
                 lambda: n.plugin_log.read_text()[-2000:])
        cluster.pod("fresh", {"containers": [container("main", SEE, "nvidia.com/gpu")]})
        fresh = cluster.logs("fresh", "main")
        assert len(fresh) == 1 and fresh != held, (fresh, held)
        assert cluster.status("steady")["phase"] == "Running"
    finally:
        cluster.delete("steady", "fresh")


def test_an_upgrade_drain_evicts_the_gpu_pods_and_honours_their_budgets(cluster: Cluster, tmp_path: Path) -> None:
    """`gpuhook upgrade plan` names the GPU pods and the budget that blocks one; `drain` (a dry run unless told)
    cordons the node and evicts through the Eviction API: the unprotected GPU pod goes, the protected one stays
    (exit 1, the budget named), the CPU pod is never touched; with the budget gone the drain completes."""
    plane = cluster.plane
    kubeconfig = tmp_path / "admin.json"
    kubeconfig.write_text(plane.kubectl("config", "view", "--raw", "--flatten", "-o", "json").stdout)
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "serve", "namespace": "default"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "serve"}}}}

    def gpuhook(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([conftest.GPUHOOK, "upgrade", *args, "--kubeconfig", str(kubeconfig), "--node", NODE],
                              env=cluster.node.plugin_env, capture_output=True, text=True, timeout=120, check=False)

    def there(name: str) -> bool:
        """Whether the pod still holds its GPU: it exists and its containers have not ended."""
        done = plane.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}", check=False)
        return done.returncode == 0 and done.stdout.strip() not in ("Succeeded", "Failed")

    cluster.pod("train", {"containers": [container("main", SEE + "; sleep 300", "amd.com/gpu")]},
                labels={"app": "train"})
    cluster.pod("serve", {"containers": [container("main", SEE + "; sleep 300", "nvidia.com/gpu")]},
                labels={"app": "serve"})
    cluster.pod("cpu", {"containers": [container("main", "echo up; sleep 300")]}, labels={"app": "web"})
    try:
        for name in ("train", "serve", "cpu"):
            wait_for(lambda: len(cluster.logs_so_far(name, "main")) >= 1, 60,  # noqa: B023 (called at once)
                     lambda: json.dumps(cluster.status(name)))  # noqa: B023
        plane.apply(pdb)
        wait_for(lambda: plane.get("pdb", "serve").get("status", {}).get("currentHealthy") == 1, 60,
                 lambda: json.dumps(plane.get("pdb", "serve").get("status")))
        plan = gpuhook("plan", "--json")
        assert plan.returncode == 0, plan.stderr
        seen = json.loads(plan.stdout)
        assert {p["pod"]: (p["gpus"], p["blocked_by"]) for p in seen["pods"]} == {
            "default/serve": (["nvidia.com/gpu: 1"], ["serve"]), "default/train": (["amd.com/gpu: 1"], [])}
        # (an earlier test's pod may still be ending: this node's other GPU containers may be listed too)
        assert {c["pod"] for c in seen["containers"]} >= {"default/serve/main", "default/train/main"}

        dry = gpuhook("drain")
        assert dry.returncode == 1 and "dry run: would cordon" in dry.stdout, dry.stdout + dry.stderr
        assert not plane.get("node", NODE, None)["spec"].get("unschedulable") and there("train")

        blocked = gpuhook("drain", "--no-dry-run", "--timeout", "6")
        assert blocked.returncode == 1, blocked.stdout + blocked.stderr
        assert "default/serve was not evicted" in blocked.stderr and "disruption budget" in blocked.stderr
        assert plane.get("node", NODE, None)["spec"].get("unschedulable") is True
        wait_for(lambda: not there("train"), 60, lambda: json.dumps(cluster.status("train")))
        assert cluster.status("serve")["phase"] == "Running" and cluster.status("cpu")["phase"] == "Running"

        plane.kubectl("delete", "pdb", "serve")
        done = gpuhook("drain", "--no-dry-run", "--timeout", "60")
        assert done.returncode == 0 and "drained" in done.stdout, done.stdout + done.stderr
        assert not there("serve") and cluster.status("cpu")["phase"] == "Running"
    finally:
        plane.kubectl("delete", "pdb", "serve", "--ignore-not-found", check=False)
        plane.kubectl("uncordon", NODE, check=False)
        cluster.delete("train", "serve", "cpu")
