"""Who a container is on Kubernetes, from the keys of the engine that wrote its spec only: a CRI-O pod copying
containerd's io.kubernetes.cri.* keys (CRI-O copies every pod annotation into each container's spec) chooses
neither its namespace, nor whether it is a sandbox, nor its names (#43 item 3)."""

from __future__ import annotations

import json

import pytest

from gpuhook.errors import RequestError
from gpuhook.request.container import parse_request
from gpuhook.request.pod import engine, is_sandbox, pod_identity, workload_key
from gpuhook.vendors.registry import all_vendors

# a CRI-O container's spec, as CRI-O 1.36 writes it (SpecAddAnnotations): its own keys, the kubelet's labels
CRIO = {"io.kubernetes.cri-o.ContainerType": "container", "io.kubernetes.cri-o.SandboxID": "sb-1",
        "io.kubernetes.cri-o.ContainerName": "k8s_train_job-0_team-a_uid-a_0", "io.container.manager": "cri-o",
        "io.kubernetes.pod.name": "job-0", "io.kubernetes.pod.namespace": "team-a", "io.kubernetes.pod.uid": "uid-a",
        "io.kubernetes.container.name": "train", "io.kubernetes.cri-o.Annotations": "{}"}
CONTAINERD = {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-id": "sb-2",
              "io.kubernetes.cri.sandbox-uid": "uid-b", "io.kubernetes.cri.sandbox-name": "web-0",
              "io.kubernetes.cri.sandbox-namespace": "shop", "io.kubernetes.cri.container-name": "server"}
# what a pod author on CRI-O writes into the pod's annotations to pose as containerd's keys
FORGED_CRI = {"io.kubernetes.cri.sandbox-namespace": "victims", "io.kubernetes.cri.sandbox-name": "\x1b[2Jfake",
              "io.kubernetes.cri.container-name": "x\nforged line", "io.kubernetes.cri.sandbox-uid": "uid-victim"}
# and on containerd (with pod_annotations letting them through), what poses as CRI-O's labels
FORGED_CRIO_LABELS = {"io.kubernetes.pod.namespace": "victims", "io.kubernetes.pod.name": "fake",
                      "io.kubernetes.container.name": "forged", "io.kubernetes.pod.uid": "uid-victim"}

IDENTITY = [
    ("cri-o", CRIO, ("job-0", "team-a", "train")),
    ("cri-o with containerd's keys forged", {**FORGED_CRI, **CRIO}, ("job-0", "team-a", "train")),
    ("containerd", CONTAINERD, ("web-0", "shop", "server")),
    ("containerd with cri-o's label keys passed through", {**FORGED_CRIO_LABELS, **CONTAINERD},
     ("web-0", "shop", "server")),
    ("containerd keys without containerd's type: nobody's", FORGED_CRI, ("", "", "")),
    ("cri-o labels without cri-o's type: nobody's", FORGED_CRIO_LABELS, ("", "", "")),
    ("outside kubernetes", {"gpuhook.dev/gpus": "0"}, ("", "", "")),
    ("bounded", {**CRIO, "io.kubernetes.pod.name": "p" * 1000}, ("p" * 253, "team-a", "train")),
]


@pytest.mark.parametrize(("annotations", "identity"), [i[1:] for i in IDENTITY], ids=[i[0] for i in IDENTITY])
def test_pod_identity_is_the_writing_engines(annotations: dict[str, str], identity: tuple[str, str, str]) -> None:
    assert pod_identity(annotations) == identity


SANDBOXES = [
    ("containerd sandbox", {"io.kubernetes.cri.container-type": "sandbox"}, True),
    ("containerd container", {"io.kubernetes.cri.container-type": "container"}, False),
    ("cri-o sandbox", {"io.kubernetes.cri-o.ContainerType": "sandbox"}, True),
    ("cri-o container", {"io.kubernetes.cri-o.ContainerType": "container"}, False),
    ("cri-o key, containerd spelling", {"io.kubernetes.cri-o.container-type": "sandbox"}, False),
    ("value case matters", {"io.kubernetes.cri.container-type": "Sandbox"}, False),
    ("no marks", {"io.kubernetes.cri.sandbox-id": "abc"}, False),
    ("nothing", {}, False),
]


@pytest.mark.parametrize(("annotations", "sandbox"), [s[1:] for s in SANDBOXES], ids=[s[0] for s in SANDBOXES])
def test_is_sandbox(annotations: dict[str, str], sandbox: bool) -> None:
    assert is_sandbox(annotations) is sandbox


BOTH = [
    ("cri-o app container posing as containerd's sandbox", {**CRIO, "io.kubernetes.cri.container-type": "sandbox"}),
    ("containerd app container posing as cri-o's sandbox",
     {**CONTAINERD, "io.kubernetes.cri-o.ContainerType": "sandbox"}),
    ("both say container", {**CRIO, "io.kubernetes.cri.container-type": "container"}),
]


@pytest.mark.parametrize("annotations", [b[1] for b in BOTH], ids=[b[0] for b in BOTH])
def test_a_spec_marked_by_both_engines_is_refused_not_guessed(annotations: dict[str, str]) -> None:
    for decide in (engine, is_sandbox, pod_identity, lambda a: workload_key(a, "cid")):
        with pytest.raises(RequestError, match="posing as the other engine's"):
            decide(annotations)


WORKLOADS = [
    ("containerd", CONTAINERD, "uid-b/server"),
    ("containerd 1.6: sandbox id, no uid", {"io.kubernetes.cri.container-type": "container",
                                            "io.kubernetes.cri.sandbox-id": "sb-4",
                                            "io.kubernetes.cri.container-name": "main"}, "sb-4/main"),
    ("cri-o", CRIO, "uid-a/train"),
    ("cri-o without the kubelet's labels", {"io.kubernetes.cri-o.ContainerType": "container",
                                            "io.kubernetes.cri-o.SandboxID": "sb-3",
                                            "io.kubernetes.cri-o.ContainerName": "k8s_main"}, "sb-3/k8s_main"),
    ("cri-o with containerd's keys forged", {**FORGED_CRI, **CRIO}, "uid-a/train"),
    ("containerd with cri-o's keys passed through", {**FORGED_CRIO_LABELS, **CONTAINERD}, "uid-b/server"),
    ("empty uid: the sandbox id", {**CONTAINERD, "io.kubernetes.cri.sandbox-uid": ""}, "sb-2/server"),
    ("pod without name", {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-uid": "u"},
     "cid"),
    ("labels outside kubernetes", FORGED_CRIO_LABELS, "cid"),
    ("nothing", {}, "cid"),
]


@pytest.mark.parametrize(("annotations", "key"), [w[1:] for w in WORKLOADS], ids=[w[0] for w in WORKLOADS])
def test_workload_key(annotations: dict[str, str], key: str) -> None:
    assert workload_key(annotations, "cid") == key


ALLOCATION = "0123456789abcdef0123456789abcdef"


def test_on_cri_o_the_allocation_must_be_the_containers_own() -> None:
    own = {**CRIO, "gpuhook.dev/allocation": ALLOCATION,
           "io.kubernetes.cri-o.Annotations": json.dumps({"gpuhook.dev/allocation": ALLOCATION})}
    assert parse_request(own, {}, vendors=all_vendors()).allocation == ALLOCATION
    for forged in ({**own, "io.kubernetes.cri-o.Annotations": "{}"},
                   {k: v for k, v in own.items() if k != "io.kubernetes.cri-o.Annotations"}):
        with pytest.raises(RequestError, match="the pod's, not the container's"):
            parse_request(forged, {}, vendors=all_vendors())
