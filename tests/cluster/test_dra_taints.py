"""Health as device taints (KEP-5055) on the one-node cluster of test_dra.py: a simulated GPU turned unhealthy stays
in the ResourceSlice, tainted with gpuhook's reason; the real scheduler allocates it to no new claim that does not
tolerate the taint; the real controller-manager's device-taint eviction controller deletes the running pods on it
under NoExecute, but for those whose claim tolerates the taint; the taint goes when the GPU recovers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from gpuhook.testing import faults
from gpuhook.testing.simulate import build_host

from . import test_dra
from .control_plane import DEVICE_TAINT_RULE_API, NODE, kube_minor
from .node import wait_for
from .test_cluster import SEE, _unschedulable
from .test_dra import HOST, Dra, exactly

dra = test_dra.dra  # the fixture: this module's cluster, as test_dra.py makes one

NVIDIA = "nvidia.gpu.gpuhook.dev"
RESTART = "OnFailure"  # a container killed by something else than the test (another cluster's kubelet on the
# machine) starts again: what is asserted is the pod's allocation and eviction (deletion), not one container's life


def _devices(d: Dra) -> dict[str, dict[str, Any]]:
    """The published devices (a slice written while the host is rebuilt may list none: null)."""
    return {x["name"]: x for s in d.slices() for x in s["spec"].get("devices") or []}


def _taints(d: Dra, device: str) -> list[tuple[str, str, str]]:
    return [(t["key"], t.get("value", ""), t["effect"]) for t in _devices(d).get(device, {}).get("taints") or []]


def _on(index: int, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A claim of NVIDIA GPU `index`, tolerating `tolerations`."""
    claim = exactly(NVIDIA, selectors=(f"device.attributes['gpu.gpuhook.dev'].index == {index}",))
    if tolerations:
        claim["devices"]["requests"][0]["exactly"]["tolerations"] = tolerations
    return claim


def _running(d: Dra, pod: str) -> bool:
    return bool(d.plane.get("pod", pod).get("status", {}).get("phase") == "Running")


def _gone(d: Dra, pod: str) -> bool:
    """Deleted, or being deleted (the eviction controller deletes the pod)."""
    found = d.plane.kubectl("get", "pod", pod, "-o", "json", check=False)
    return found.returncode != 0 or "deletionTimestamp" in json.loads(found.stdout)["metadata"]


def _why(d: Dra, *pods: str) -> Any:
    return lambda: (json.dumps({p: d.plane.kubectl("get", "pod", p, "-o", "json", check=False).stdout[-1500:]
                                for p in pods}) + f"\n{sorted(_devices(d).items())}\n"
                    + d.log.read_text()[-3000:] + d.plane.logs_tail(20))


def test_an_unhealthy_gpu_stays_in_the_slice_tainted_and_no_new_claim_gets_it_until_it_recovers(dra: Dra) -> None:
    """/dev/nvidia3 goes: gpu-3 stays in the slice with gpuhook.dev's gpu-lost taint (NoExecute); a new claim for
    it waits Pending with the scheduler's reason while a claim for any NVIDIA GPU gets another; the node back, the
    taint goes and the waiting pod runs on gpu-3."""
    host = dra.node.env.host_root
    Path(host, "dev/nvidia3").unlink()
    try:
        wait_for(lambda: _taints(dra, "gpu-3") == [("gpu.gpuhook.dev/gpu-lost", "node-missing", "NoExecute")], 30,
                 _why(dra))
        assert _devices(dra)["gpu-3"]["taints"][0]["timeAdded"]
        dra.claim_pod("waits", _on(3), SEE, restart=RESTART)
        dra.claim_pod("elsewhere", exactly(NVIDIA), SEE, restart=RESTART)
        wait_for(lambda: "cannot allocate all claims" in _unschedulable(dra, "waits"), 60, _why(dra, "waits"))
        assert dra.logs("elsewhere", "main") != ["nvidia3"]
        assert dra.allocated("elsewhere") != ["gpu-3"]
    finally:
        build_host(host, HOST)
    try:
        wait_for(lambda: "gpu-3" in _devices(dra) and _taints(dra, "gpu-3") == [], 30, _why(dra))
        assert dra.logs("waits", "main") == ["nvidia3"]
        assert "gpu-lost" in dra.log.read_text()
    finally:
        dra.delete("waits", "elsewhere")


def test_a_fatal_xid_evicts_the_pods_that_do_not_tolerate_it_and_a_reset_clears_it(dra: Dra) -> None:
    """XID 79 (fallen off the bus) in the kernel log on GPUs 2 and 3: both are tainted xid=79 NoExecute; the pod
    on gpu-3 is evicted, the one on gpu-2, whose claim tolerates gpuhook.dev's xid taints, keeps running. The
    GPUs reset (gone from discovery for a moment, as after a PCI remove and rescan): the taints go."""
    tolerate = [{"key": "gpu.gpuhook.dev/xid", "operator": "Exists", "effect": "NoExecute"}]
    dra.claim_pod("tolerant", _on(2, tolerate), SEE + "; sleep 300", restart=RESTART)
    dra.claim_pod("victim", _on(3), SEE + "; sleep 300", restart=RESTART)
    host = dra.node.env.host_root
    try:
        wait_for(lambda: _running(dra, "tolerant") and _running(dra, "victim"), 90, _why(dra, "tolerant", "victim"))
        faults.xid(host, 2, 79, "GPU has fallen off the bus.")
        faults.xid(host, 3, 79, "GPU has fallen off the bus.")
        for device in ("gpu-2", "gpu-3"):
            wait_for(lambda d=device: _taints(dra, d) == [("gpu.gpuhook.dev/xid", "79", "NoExecute")], 30,  # type: ignore[misc]
                     _why(dra))
        wait_for(lambda: _gone(dra, "victim"), 60, _why(dra, "victim"))
        assert not _gone(dra, "tolerant")
        wait_for(lambda: _running(dra, "tolerant"), 30, _why(dra, "tolerant"))
        gpus = Path(host, "proc/driver/nvidia/gpus")
        away = Path(host).parent / "gpus-reset"
        away.mkdir(exist_ok=True)
        for bdf in ("0000:12:00.0", "0000:13:00.0"):
            shutil.move(str(gpus / bdf), str(away / bdf))
        wait_for(lambda: not {"gpu-2", "gpu-3"} & set(_devices(dra)), 30, _why(dra))
        for bdf in ("0000:12:00.0", "0000:13:00.0"):
            shutil.move(str(away / bdf), str(gpus / bdf))
        wait_for(lambda: {"gpu-2", "gpu-3"} <= set(_devices(dra)) and not _taints(dra, "gpu-2")
                 and not _taints(dra, "gpu-3"), 30, _why(dra))
        assert not _gone(dra, "tolerant")
        wait_for(lambda: _running(dra, "tolerant"), 30, _why(dra, "tolerant"))
        assert "the kernel log has XID 79" in dra.log.read_text()
    finally:
        dra.delete("tolerant", "victim")
        build_host(host, HOST)


def test_a_device_taint_rule_drains_a_gpu_by_hand_as_the_docs_show(dra: Dra) -> None:
    """docs/kubernetes.md's DeviceTaintRule: NoExecute on gpu-1 of the node's pool evicts the pod on it and keeps a
    new claim for it Pending; deleting the rule brings the GPU back (the pod then runs on it)."""
    api = DEVICE_TAINT_RULE_API[kube_minor(dra.plane.bin)]
    rule = {"apiVersion": api, "kind": "DeviceTaintRule", "metadata": {"name": "drain-gpu-1"},
            "spec": {"deviceSelector": {"driver": "gpu.gpuhook.dev", "pool": NODE, "device": "gpu-1"},
                     "taint": {"key": "example.com/maintenance", "value": "reseat", "effect": "NoExecute"}}}
    dra.claim_pod("drained", _on(1), SEE + "; sleep 300", restart=RESTART)
    try:
        wait_for(lambda: _running(dra, "drained"), 90, _why(dra, "drained"))
        dra.plane.apply(rule)
        wait_for(lambda: _gone(dra, "drained"), 60, _why(dra, "drained"))
        dra.claim_pod("after", _on(1), SEE, restart=RESTART)
        wait_for(lambda: "cannot allocate all claims" in _unschedulable(dra, "after"), 60, _why(dra, "after"))
        dra.plane.kubectl("delete", "devicetaintrule", "drain-gpu-1")
        assert dra.logs("after", "main") == ["nvidia1"]
    finally:
        dra.plane.kubectl("delete", "devicetaintrule", "drain-gpu-1", "--ignore-not-found", check=False)
        dra.delete("drained", "after")


def test_an_amd_gpus_uncorrectable_ras_errors_taint_it_until_the_counters_clear(dra: Dra) -> None:
    """AMD GPU 1's UMC counts two uncorrectable errors (five correctable, which alone are no fault): amdgpu-129 is
    tainted ras=umc NoExecute, amdgpu-128 not; the counters cleared (a reset), the taint goes."""
    host = dra.node.env.host_root
    faults.ras(host, "amd", 1, "umc", uncorrectable=2, correctable=5)
    try:
        wait_for(lambda: _taints(dra, "amdgpu-129") == [("gpu.gpuhook.dev/ras", "umc", "NoExecute")], 30, _why(dra))
        assert _taints(dra, "amdgpu-128") == []
    finally:
        faults.ras(host, "amd", 1, "umc", uncorrectable=0)
    wait_for(lambda: "amdgpu-129" in _devices(dra) and _taints(dra, "amdgpu-129") == [], 30, _why(dra))
