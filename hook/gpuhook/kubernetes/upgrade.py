"""Driver upgrades without lost work, on a Kubernetes node: which pods hold the node's GPUs (by extended resource or
by a DRA claim of gpuhook's driver), which PodDisruptionBudgets would refuse their eviction now, and the drain:
cordon the node, evict those pods through the Eviction API (which enforces the budgets: a refused eviction is
retried, never forced), wait until they are gone, and report what is left. A pod that asks for no GPU stays.
Talks to the API server; the rest is pure."""

from __future__ import annotations

import time

from gpuhook.frozen import frozen
from gpuhook.kubernetes.apiserver import ApiError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    from gpuhook.kubernetes.apiserver import ApiServer

DONE_PHASES = ("Succeeded", "Failed")
RESOURCE_API = "/apis/resource.k8s.io/v1"


@frozen
class GpuPod:
    """A pod on the node that holds GPUs, and the budgets that cover it."""

    namespace: str
    name: str
    uid: str
    gpus: tuple[str, ...]  # "nvidia.com/gpu: 2", "claim gpu-claim (gpu.gpuhook.dev: gpu-1)"
    budgets: tuple[str, ...] = ()  # PDBs whose selector matches it
    blocked: tuple[str, ...] = ()  # of those, the ones that allow no disruption now
    owner: str = ""  # its controller (ReplicaSet/x), "" for a bare pod: evicted, nothing makes it again

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@frozen
class Drained:
    """What a drain did: the pods evicted, those a budget still protects (with why), those still going."""

    evicted: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()  # (pod, the API server's reason)
    remaining: tuple[str, ...] = ()  # evicted but not gone before the deadline

    @property
    def complete(self) -> bool:
        return not self.refused and not self.remaining


def gpu_pods(api: ApiServer, node: str, resources: Iterable[str], drivers: Iterable[str]) -> list[GpuPod]:
    """The running pods on `node` holding GPUs: asking any of `resources` or holding a claim allocated by any of
    `drivers`; each with the PDBs that select it. Reads the API."""
    pods = api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"}).get("items") or []
    claims, reserved = _claims(api, frozenset(drivers))
    budgets = api.get("/apis/policy/v1/poddisruptionbudgets").get("items") or []
    out = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in DONE_PHASES:
            continue
        held = holds(pod, frozenset(resources), claims, reserved)
        if held:
            out.append(_with_budgets(pod, held, budgets))
    return sorted(out, key=lambda p: p.key)


def holds(pod: Mapping[str, Any], resources: frozenset[str], claims: Mapping[tuple[str, str], str],
          reserved: Mapping[str, Sequence[str]] | None = None) -> tuple[str, ...]:
    """What GPUs a pod holds: its containers' limits of `resources` (init containers too), its claims allocated by
    a GPU driver (`claims`: (namespace, claim) -> devices), wherever the API records them: a template's claim in
    status.resourceClaimStatuses, a shared claim by name in spec.resourceClaims (the status lists template claims
    only), and any claim that names the pod in status.reservedFor (`reserved`: pod uid -> its claims). Pure."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    asked: dict[str, int] = {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        limits = ((c.get("resources") or {}).get("limits") or {})
        for name, value in limits.items():
            if name in resources and str(value).isdigit() and int(value):
                asked[name] = max(asked.get(name, 0), int(value))
    out = [f"{name}: {n}" for name, n in sorted(asked.items())]
    named = [*(s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
               if isinstance(s, dict)),
             *(c.get("resourceClaimName") for c in spec.get("resourceClaims") or [] if isinstance(c, dict)),
             *((reserved or {}).get(str(meta.get("uid") or ""), ()))]
    for name in dict.fromkeys(n for n in named if isinstance(n, str) and n):
        devices = claims.get((meta.get("namespace", ""), name))
        if devices:
            out.append(f"claim {name} ({devices})")
    return tuple(out)


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions) selects `labels`; an empty one selects every pod,
    a null one none, as policy/v1 says. Pure."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key", ""), e.get("operator", ""), e.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)
        if not ok:
            return False
    return True


def cordon(api: ApiServer, node: str, on: bool = True) -> None:
    """Mark the node unschedulable (or schedulable again). Writes the API."""
    api.request("PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True if on else None}},
                content_type="application/merge-patch+json")


def evict(api: ApiServer, pod: GpuPod) -> str:
    """Ask the Eviction API to evict `pod`: "" when it took it (or the pod is gone already), else its reason (a
    budget that allows no disruption: 429). Writes the API."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.name, "namespace": pod.namespace}}
    try:
        api.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction", body)
    except ApiError as e:
        if e.status == 404:
            return ""
        if e.status == 429:
            return _reason(str(e))
        raise
    return ""


def drain(api: ApiServer, node: str, pods: Sequence[GpuPod], timeout: float, interval: float = 2.0,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
          say: Callable[[str], None] = lambda line: None) -> Drained:
    """Cordon `node`, evict `pods` (retrying those a budget protects every `interval` s until `timeout`), then wait
    for the evicted ones to be gone. Writes the API."""
    cordon(api, node)
    say(f"cordoned {node}")
    deadline = clock() + timeout
    waiting = list(pods)
    evicted: list[GpuPod] = []
    going: list[GpuPod] = []  # evicted, not gone yet
    reasons: dict[str, str] = {}
    while True:
        for pod in list(waiting):
            why = evict(api, pod)
            if why:
                if reasons.get(pod.key) != why:
                    say(f"{pod.key}: eviction refused: {why}")
                reasons[pod.key] = why
                continue
            say(f"{pod.key}: evicted")
            waiting.remove(pod)
            evicted.append(pod)
            going.append(pod)
            reasons.pop(pod.key, None)
        going = [p for p in going if _still_there(api, p)]
        if not (waiting or going) or clock() >= deadline:
            break
        sleep(interval if waiting else min(interval, 0.5))
    return Drained(tuple(p.key for p in evicted), tuple((p.key, reasons[p.key]) for p in waiting),
                   tuple(p.key for p in going))


def _still_there(api: ApiServer, pod: GpuPod) -> bool:
    try:
        found = api.get(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}")
    except ApiError as e:
        if e.status == 404:
            return False
        raise
    same = (found.get("metadata") or {}).get("uid") == pod.uid
    return same and (found.get("status") or {}).get("phase") not in DONE_PHASES


def _claims(api: ApiServer, drivers: frozenset[str]) -> tuple[dict[tuple[str, str], str], dict[str, list[str]]]:
    """(namespace, claim) -> "driver: device, ..." of the claims allocated by one of `drivers`, and pod uid -> the
    names of those claims reserved for it (status.reservedFor: the scheduler's and the kubelet's word on who uses
    a claim, shared ones included)."""
    if not drivers:
        return {}, {}
    try:
        items = api.get(f"{RESOURCE_API}/resourceclaims").get("items") or []
    except ApiError as e:
        if e.status == 404:  # no DRA on this cluster
            return {}, {}
        raise
    out: dict[tuple[str, str], str] = {}
    reserved: dict[str, list[str]] = {}
    for claim in items:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        ours = [f"{r.get('driver')}: {r.get('device')}" for r in results if r.get("driver") in drivers]
        if ours:
            meta = claim.get("metadata") or {}
            out[(meta.get("namespace", ""), meta.get("name", ""))] = ", ".join(ours)
            for user in status.get("reservedFor") or []:
                if isinstance(user, dict) and user.get("resource") == "pods" and user.get("uid"):
                    reserved.setdefault(str(user["uid"]), []).append(str(meta.get("name", "")))
    return out, reserved


def _with_budgets(pod: Mapping[str, Any], held: tuple[str, ...], budgets: Sequence[Mapping[str, Any]]) -> GpuPod:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    mine = [b for b in budgets if (b.get("metadata") or {}).get("namespace") == meta.get("namespace")
            and matches((b.get("spec") or {}).get("selector"), labels)]
    blocked = [b for b in mine if int((b.get("status") or {}).get("disruptionsAllowed") or 0) < 1]
    owner = next((f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or [] if o.get("controller")),
                 "")
    return GpuPod(namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=meta.get("uid", ""), gpus=held,
                  budgets=tuple(b["metadata"]["name"] for b in mine),
                  blocked=tuple(b["metadata"]["name"] for b in blocked), owner=owner)


def _reason(message: str) -> str:
    """The API server's words for a refused eviction, without the request line ahead of them."""
    return message.split(": 429 ", 1)[-1].strip()
