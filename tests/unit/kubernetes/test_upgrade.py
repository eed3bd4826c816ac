"""The upgrade drain's pure parts and its loop against a stand-in API (the real one: tests/cluster), and the scan
for processes holding device nodes against real processes."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from gpuhook.host.holders import holders
from gpuhook.kubernetes.apiserver import ApiError
from gpuhook.kubernetes.upgrade import RESOURCE_API, GpuPod, drain, gpu_pods, holds, matches


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ({"matchLabels": {"app": "serve"}}, {"app": "serve", "x": "1"}, True),
    ({"matchLabels": {"app": "serve"}}, {"app": "train"}, False),
    ({}, {"anything": "1"}, True),  # an empty selector selects every pod in its namespace
    (None, {"app": "serve"}, False),  # a null one none
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "tpu"]}]}, {"tier": "gpu"}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}, {"tier": "gpu"}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}, {"tier": "2"}, False),
])
def test_label_selectors(selector: dict[str, Any] | None, labels: dict[str, str], expected: bool) -> None:
    assert matches(selector, labels) is expected


def test_what_a_pod_holds() -> None:
    pod = {"metadata": {"namespace": "ml"},
           "spec": {"initContainers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}],
                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "4"}}},
                                   {"resources": {"limits": {"amd.com/gpu": "0"}}}]},
           "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-gpu-x7"},
                                                {"name": "nic", "resourceClaimName": "train-nic-x7"}]}}
    claims = {("ml", "train-gpu-x7"): "gpu.gpuhook.dev: gpu-1"}
    assert holds(pod, frozenset({"nvidia.com/gpu", "amd.com/gpu"}), claims) == (
        "nvidia.com/gpu: 2", "claim train-gpu-x7 (gpu.gpuhook.dev: gpu-1)")
    assert holds({"spec": {"containers": [{"resources": {"limits": {"cpu": "1"}}}]}}, frozenset({"nvidia.com/gpu"}),
                 {}) == ()


class FakeApi:
    """Evictions: a pod named in `protected` is refused (429) until `released` evictions were asked of it; an
    evicted pod is gone after `lingers` GETs."""

    def __init__(self, protected: dict[str, int], lingers: int = 1) -> None:
        self.protected, self.lingers = protected, lingers
        self.calls: list[tuple[str, str]] = []
        self.evicted: dict[str, int] = {}

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                query: dict[str, str] | None = None, content_type: str = "application/json") -> dict[str, Any]:
        self.calls.append((method, path))
        if path.endswith("/eviction"):
            name = path.split("/")[-2]
            if self.protected.get(name, 0) > 0:
                self.protected[name] -= 1
                raise ApiError(429, f"POST {path}: 429 Cannot evict pod as it would violate the pod's disruption "
                                    "budget.")
            self.evicted[name] = self.lingers
        return {}

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        name = path.split("/")[-1]
        if self.evicted.get(name, 0) <= 0:
            raise ApiError(404, "gone")
        self.evicted[name] -= 1
        return {"metadata": {"uid": f"uid-{name}"}, "status": {"phase": "Running"}}


def _pod(name: str) -> GpuPod:
    return GpuPod(namespace="default", name=name, uid=f"uid-{name}", gpus=("nvidia.com/gpu: 1",))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_a_drain_cordons_evicts_retries_what_a_budget_holds_and_waits_for_the_pods() -> None:
    api, clock = FakeApi({"b": 2}), Clock()
    said: list[str] = []
    done = drain(api, "n1", [_pod("a"), _pod("b")], timeout=30, clock=clock, sleep=clock.sleep,  # type: ignore[arg-type]
                 say=said.append)
    assert done.complete and done.evicted == ("default/a", "default/b")
    assert api.calls[0] == ("PATCH", "/api/v1/nodes/n1")
    assert [c for c in api.calls if c[1].endswith("/eviction")].count(
        ("POST", "/api/v1/namespaces/default/pods/b/eviction")) == 3  # refused twice, then taken
    assert said[0] == "cordoned n1" and sum("eviction refused" in s for s in said) == 1  # said once, not per retry


def test_a_budget_that_never_allows_leaves_the_pod_and_says_why() -> None:
    api, clock = FakeApi({"b": 10**6}), Clock()
    done = drain(api, "n1", [_pod("a"), _pod("b")], timeout=10, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert not done.complete and done.evicted == ("default/a",) and done.remaining == ()
    assert done.refused == (("default/b", "Cannot evict pod as it would violate the pod's disruption budget."),)
    assert 9 <= clock.now <= 12  # retried until the deadline, not past it


def test_an_evicted_pod_still_terminating_at_the_deadline_is_reported() -> None:
    api, clock = FakeApi({}, lingers=10**6), Clock()
    done = drain(api, "n1", [_pod("a")], timeout=5, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert done.evicted == ("default/a",) and done.remaining == ("default/a",) and not done.complete


def test_processes_holding_device_nodes_are_found_by_number() -> None:
    """/dev/null (1:3) stands in for a GPU node: the holder found is the process with it open, not its parent."""
    child = subprocess.Popen(["sh", "-c", "exec 7</dev/null; exec sleep 30"])
    try:
        import time

        for _ in range(100):
            found = [h for h in holders(frozenset({(1, 3)})) if h.pid == child.pid]
            if found and found[0].command == "sleep":
                break
            time.sleep(0.02)
        (h,) = found
        assert h.nodes == ((1, 3),) and h.command == "sleep"
        assert not [x for x in holders(frozenset({(1, 3)})) if x.pid == child.pid and x.nodes != ((1, 3),)]
        assert not [x for x in holders(frozenset({(251, 77)})) if x.pid == child.pid]
    finally:
        child.kill()
        child.wait()


# a shared ResourceClaim, made by hand and named by the pod (spec.resourceClaims[].resourceClaimName): the API
# lists template claims only in status.resourceClaimStatuses, so this pod's is in its spec and the claim's reservedFor
SHARED = {"metadata": {"namespace": "ml", "name": "shared-gpu"},
          "status": {"allocation": {"devices": {"results": [{"driver": "gpu.gpuhook.dev", "device": "gpu-0"}]}},
                     "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "uid-trainer"}]}}


def _claimant(spec_claims: list[dict[str, Any]], uid: str = "uid-trainer") -> dict[str, Any]:
    return {"metadata": {"namespace": "ml", "name": "trainer", "uid": uid},
            "spec": {"containers": [{"resources": {"claims": [{"name": "gpu"}]}}], "resourceClaims": spec_claims},
            "status": {"phase": "Running"}}


class ClusterApi:
    """The reads gpu_pods makes: the node's pods, the ResourceClaims, the budgets."""

    def __init__(self, pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> None:
        self.pods, self.claims = pods, claims

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any]:
        items = {"/api/v1/pods": self.pods, f"{RESOURCE_API}/resourceclaims": self.claims}.get(path, [])
        return {"items": items}


CLAIMANTS = [
    ("named in the spec", _claimant([{"name": "gpu", "resourceClaimName": "shared-gpu"}])),
    ("reserved for it only", _claimant([], uid="uid-trainer")),
]


@pytest.mark.parametrize("pod", [c[1] for c in CLAIMANTS], ids=[c[0] for c in CLAIMANTS])
def test_a_pod_holding_a_shared_named_claim_is_found(pod: dict[str, Any]) -> None:
    """#43 item 5: a pod naming a shared claim has no resourceClaimStatuses; the plan and the drain still see it."""
    found = gpu_pods(ClusterApi([pod], [SHARED]), "n1", (), ("gpu.gpuhook.dev",))  # type: ignore[arg-type]
    assert [(p.key, p.gpus) for p in found] == [("ml/trainer", ("claim shared-gpu (gpu.gpuhook.dev: gpu-0)",))]


def test_a_claim_named_in_two_places_is_counted_once_and_others_claims_are_not_mine() -> None:
    pod = _claimant([{"name": "gpu", "resourceClaimName": "shared-gpu"}])
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "shared-gpu"}]
    claims = {("ml", "shared-gpu"): "gpu.gpuhook.dev: gpu-0"}
    assert holds(pod, frozenset(), claims, {"uid-trainer": ["shared-gpu"]}) == (
        "claim shared-gpu (gpu.gpuhook.dev: gpu-0)",)
    other = {**pod, "metadata": {**pod["metadata"], "namespace": "team-b"}}  # a claim is its namespace's
    assert holds(other, frozenset(), claims, {}) == ()
    stranger = _claimant([], uid="uid-other")
    assert gpu_pods(ClusterApi([stranger], [SHARED]), "n1", (), ("gpu.gpuhook.dev",)) == []  # type: ignore[arg-type]
