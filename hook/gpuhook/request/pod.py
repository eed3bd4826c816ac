"""Who a container is on Kubernetes (a pod's sandbox or not; its pod, namespace and name; who presents an
allocation), read only from the keys of the CRI engine that wrote its spec. Pure: no I/O.

Each engine writes its own keys after the pod's annotations it copies, so its own keys are the engine's word; the
other engine's keys are a pod author's: CRI-O copies every pod annotation into every container's spec (a pod may so
carry containerd's `io.kubernetes.cri.*`), containerd those its `pod_annotations` lets through. Which engine wrote
the spec is decided from the container-type key each sets on every spec it writes, and a spec carrying both is
refused: one of them was the pod's."""

from __future__ import annotations

from gpuhook.errors import RequestError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CONTAINERD = "containerd"
CRIO = "cri-o"
CONTAINERD_TYPE = "io.kubernetes.cri.container-type"  # containerd's CRI plugin: "sandbox" or "container"
CRIO_TYPE = "io.kubernetes.cri-o.ContainerType"  # CRI-O: "sandbox" or "container"
SANDBOX = "sandbox"
# per engine: (pod uid, pod, namespace, container name), each the keys it sets, first found wins. CRI-O writes the
# io.kubernetes.pod.* / container.name keys from the kubelet's container labels, last (after the pod's annotations);
# containerd 1.6 has no sandbox-uid (its sandbox id serves), CRI-O's own sandbox id and container name serve where
# the kubelet's labels lack them.
_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    CONTAINERD: (("io.kubernetes.cri.sandbox-uid", "io.kubernetes.cri.sandbox-id"),
                 ("io.kubernetes.cri.sandbox-name",), ("io.kubernetes.cri.sandbox-namespace",),
                 ("io.kubernetes.cri.container-name",)),
    CRIO: (("io.kubernetes.pod.uid", "io.kubernetes.cri-o.SandboxID"), ("io.kubernetes.pod.name",),
           ("io.kubernetes.pod.namespace",), ("io.kubernetes.container.name", "io.kubernetes.cri-o.ContainerName")),
}
_MAX_NAME = 253  # the longest name Kubernetes gives an object


def engine(annotations: Mapping[str, object]) -> str:
    """The CRI engine that wrote the spec (CONTAINERD, CRIO), "" outside Kubernetes (Docker, Podman, ctr, runc).
    RequestError for a spec marked by both: a pod's annotation posing as the other engine's."""
    containerd, crio = CONTAINERD_TYPE in annotations, CRIO_TYPE in annotations
    if containerd and crio:
        raise RequestError(f"the spec carries both containerd's {CONTAINERD_TYPE} and CRI-O's {CRIO_TYPE}: one of "
                           "them is a pod annotation the engine copied, posing as the other engine's; remove it "
                           "from the pod (io.kubernetes.* keys are the engine's)")
    return CONTAINERD if containerd else CRIO if crio else ""


def is_sandbox(annotations: Mapping[str, object]) -> bool:
    """Whether the spec is a pod's sandbox (pause) container, which never gets GPUs, tuning or records: as the
    engine that wrote it says, in its own key."""
    found = engine(annotations)
    return bool(found) and annotations.get(CONTAINERD_TYPE if found == CONTAINERD else CRIO_TYPE) == SANDBOX


def workload_key(annotations: Mapping[str, object], container_id: str) -> str:
    """Who presents an allocation: "<pod>/<container name>" as the CRI engine names them (a restart of the
    container keeps it), else the container id."""
    found = engine(annotations)
    if not found:
        return container_id
    uid_keys, _, _, name_keys = _KEYS[found]
    pod, name = _first(annotations, uid_keys), _first(annotations, name_keys)
    return f"{pod}/{name}" if pod and name else container_id


def pod_identity(annotations: Mapping[str, object]) -> tuple[str, str, str]:
    """(pod, namespace, container name) as the engine that wrote the spec sets them; empty strings outside
    Kubernetes."""
    found = engine(annotations)
    if not found:
        return "", "", ""
    _, pod_keys, namespace_keys, name_keys = _KEYS[found]
    pod, namespace, name = (_first(annotations, keys)[:_MAX_NAME] for keys in (pod_keys, namespace_keys, name_keys))
    return pod, namespace, name


def _first(annotations: Mapping[str, object], keys: tuple[str, ...]) -> str:
    """The first of `keys` the engine set (a non-empty string), else ""."""
    return next((v for k in keys if isinstance(v := annotations.get(k), str) and v), "")
