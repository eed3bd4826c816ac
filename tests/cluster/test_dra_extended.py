"""Extended resources through DRA (KEP-5004) on the DRA cluster of test_dra.py: the chart's vendor DeviceClasses
carry `extendedResourceName` (nvidia.com/gpu, amd.com/gpu, hygon.com/dcu), so an unchanged pod asking
`resources.limits: {nvidia.com/gpu: 1}` on a node without the device plugin is served by gpuhook's DRA driver: the
scheduler makes the pod's claim, the kubelet prepares it, gpuhook's runtime verifies it as any claim, and the
container sees its one GPU. Here on 1.36 (beta, on by default); test_dra_versions.py runs these on 1.37 (GA) and
on 1.34 as it comes (the DRAExtendedResource gate alpha and off: the API server drops the field, and the pod stays
Pending with the scheduler's reason)."""

from __future__ import annotations

import json

from . import test_dra
from .control_plane import kube_minor
from .node import wait_for
from .test_cluster import SEE, _unschedulable, container
from .test_dra import Dra

dra = test_dra.dra  # the cluster: test_dra's fixture, set up once for this module

EXTENDED = {"nvidia.gpu.gpuhook.dev": "nvidia.com/gpu", "amd.gpu.gpuhook.dev": "amd.com/gpu",
            "hygon.gpu.gpuhook.dev": "hygon.com/dcu"}


def served(dra: Dra) -> bool:
    """Whether the cluster serves extended resources through DRA: 1.36 on, or DRAExtendedResource turned on."""
    return kube_minor(dra.plane.bin) >= 36 or any("DRAExtendedResource=true" in g for g in dra.plane.gates)


def _claim_of(dra: Dra, pod: str) -> str:
    """The claim the scheduler made for the pod's extended resources ("" before it has)."""
    status = dra.status(pod).get("extendedResourceClaimStatus") or {}
    return str(status.get("resourceClaimName", ""))


def _seen(dra: Dra, pod: str) -> list[str]:
    """What the pod's running container printed (SEE, then a sleep: a pod that ended has its claim unprepared and
    deleted, sooner or later)."""
    wait_for(lambda: dra.logs_so_far(pod, "main"), 90, lambda: _why(dra, pod))
    return dra.logs_so_far(pod, "main")


def _why(dra: Dra, pod: str) -> str:
    return (f"{json.dumps(dra.status(pod))[:3000]}\n{dra.log.read_text()[-2000:]}\n"
            f"{dra.node.kubelet_log.read_text()[-3000:]}")


def test_the_vendor_classes_carry_the_device_plugins_resource_names(dra: Dra) -> None:
    """What the chart renders reaches the API server: each vendor class names its vendor's resource; a version that
    does not serve it drops the field."""
    classes = {c["metadata"]["name"]: c["spec"] for c in dra.plane.get("deviceclasses", namespace=None)["items"]}
    got = {name: classes[name].get("extendedResourceName") for name in EXTENDED}
    assert got == (EXTENDED if served(dra) else dict.fromkeys(EXTENDED)), got
    assert all("extendedResourceName" not in spec for name, spec in classes.items() if name not in EXTENDED)


def test_an_unchanged_pod_asking_nvidia_com_gpu_sees_one_gpu(dra: Dra) -> None:
    """resources.limits nvidia.com/gpu: 1 and nothing else: the scheduler's claim of nvidia.gpu.gpuhook.dev, one
    whole NVIDIA GPU, prepared by the driver; the container sees that GPU alone. Where the cluster does not serve
    it: Pending, with the scheduler's reason."""
    dra.pod("ext-one", {"containers": [container("main", SEE + "; sleep 300", "nvidia.com/gpu")]})
    try:
        if not served(dra):
            wait_for(lambda: "Insufficient nvidia.com/gpu" in _unschedulable(dra, "ext-one"), 60,
                     lambda: _why(dra, "ext-one"))
            return
        seen = _seen(dra, "ext-one")
        claim = _claim_of(dra, "ext-one")
        got = dra.plane.get("resourceclaim", claim)
        assert got["metadata"]["annotations"].get("resource.kubernetes.io/extended-resource-claim") == "true"
        (result,) = got["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "gpu.gpuhook.dev" and result["device"].startswith("gpu-"), result
        assert seen == [f"nvidia{result['device'].removeprefix('gpu-')}"], (seen, result)
        assert len(dra.records()) == 1  # prepared by gpuhook's driver, verified by its runtime
    finally:
        dra.delete("ext-one")
    wait_for(lambda: not dra.records(), 60, lambda: f"left: {dra.records()}\n{dra.log.read_text()[-2000:]}")


def test_two_amd_gpus_by_count(dra: Dra) -> None:
    """amd.com/gpu: 2: the node's two AMD GPUs, through one claim of amd.gpu.gpuhook.dev."""
    dra.pod("ext-amd", {"containers": [container("main", SEE + "; sleep 300", "amd.com/gpu", count=2)]})
    try:
        if not served(dra):
            wait_for(lambda: "Insufficient amd.com/gpu" in _unschedulable(dra, "ext-amd"), 60,
                     lambda: _why(dra, "ext-amd"))
            return
        wait_for(lambda: set(dra.logs_so_far("ext-amd", "main")) == {"renderD128", "renderD129"}, 90,
                 lambda: f"{dra.logs_so_far('ext-amd', 'main')}\n{_why(dra, 'ext-amd')}")
        claim = dra.plane.get("resourceclaim", _claim_of(dra, "ext-amd"))
        assert sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"]) == \
            ["amdgpu-128", "amdgpu-129"]
    finally:
        dra.delete("ext-amd")


def test_more_than_the_node_has_stays_pending_with_the_schedulers_reason(dra: Dra) -> None:
    """Four whole NVIDIA GPUs, where the node has three (the fourth is in MIG mode): Pending, with a reason."""
    dra.pod("ext-four", {"containers": [container("main", SEE, "nvidia.com/gpu", count=4)]})
    try:
        wait_for(lambda: _unschedulable(dra, "ext-four") != "", 60, lambda: _why(dra, "ext-four"))
        why = _unschedulable(dra, "ext-four")
        assert ("cannot allocate all claims" if served(dra) else "Insufficient nvidia.com/gpu") in why, why
    finally:
        dra.delete("ext-four")


def test_a_pod_authors_own_ask_is_refused_with_the_way_to_ask_on_this_node(dra: Dra) -> None:
    """NVIDIA_VISIBLE_DEVICES=all and no claim: gpuhook's refusal names the DRA node's ways to ask (a claim of
    nvidia.gpu.gpuhook.dev, or nvidia.com/gpu where the cluster serves it through DRA), not the device plugin's."""
    dra.pod("ext-env", {"containers": [{**container("main", SEE), "env": [{"name": "NVIDIA_VISIBLE_DEVICES",
                                                                          "value": "all"}]}]})
    try:
        wait_for(lambda: "only the kubelet grants GPUs" in json.dumps(dra.status("ext-env")), 60,
                 lambda: _why(dra, "ext-env"))
        said = json.dumps(dra.status("ext-env"))
        assert "a ResourceClaim of DeviceClass nvidia.gpu.gpuhook.dev" in said, said
        assert "resources.limits (nvidia.com/gpu: 1) where the cluster serves extended resources" in said, said
    finally:
        dra.delete("ext-env")
