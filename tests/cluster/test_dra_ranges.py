"""#45 item 2 on the real node: a claim's GpuConfig value the GPU cannot take (NVML's supported clocks, AMD's power
cap range) fails NodePrepareResources with gpuhook's one line, which the kubelet puts in the pod's events; nothing is
prepared (no record, no CDI spec for the claim) and nothing is applied on the simulated GPUs, so no container is ever
started to fail in its prestart hook and be retried with back-off. test_dra.py's cluster (its `dra` fixture)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from .node import wait_for
from .test_cluster import SEE
from .test_dra import (  # noqa: F401 (dra: the fixture, test_dra.py's cluster made for this module)
    DRIVER,
    Dra,
    _events,
    dra,
    exactly,
)


def _gpus(cluster: Dra) -> dict[str, str]:
    """The simulated GPUs' sysfs files and the stubs' state, by digest: what a setting applied would change."""
    host = Path(cluster.node.env.host_root)
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for top in ("sys/devices", "var/lib/gpuhook-sim") for p in sorted((host / top).rglob("*"))
            if p.is_file() and not p.is_symlink() and p.suffix not in (".inits", ".log")}


def _claim_uid(cluster: Dra, pod: str) -> str:
    """The uid of the claim the pod's template made (once the scheduler allocated it)."""
    statuses = cluster.plane.get("pod", pod)["status"].get("resourceClaimStatuses") or []
    if not statuses or not statuses[0].get("resourceClaimName"):
        return ""
    return str(cluster.plane.get("resourceclaim", statuses[0]["resourceClaimName"])["metadata"]["uid"])


@pytest.mark.parametrize(("device_class", "params", "said"), [
    ("nvidia.gpu.gpuhook.dev", {"clocks": "9999"}, "locks its graphics clock within 345-1980 MHz: 9999 MHz refused"),
    ("amd.gpu.gpuhook.dev", {"powerLimit": 5000}, "takes a power cap of 100-750 W"),
], ids=["nvidia clocks", "amd power"])
def test_a_value_the_gpu_cannot_take_fails_preparation_with_gpuhooks_line(dra: Dra, device_class: str,  # noqa: F811
                                                                          params: dict[str, Any], said: str) -> None:
    config = [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": "resource.gpuhook.dev/v1alpha1", "kind": "GpuConfig", **params}}}]
    before = _gpus(dra)
    name = "outside-" + device_class.split(".")[0]
    dra.claim_pod(name, exactly(device_class, config=config), SEE)
    try:
        wait_for(lambda: said in _events(dra, name), 90, lambda: _events(dra, name))
        line = next(m for m in _events(dra, name).split(" | ") if said in m)
        assert "claim default/" in line and ", request gpu: GPU " in line, line
        uid = _claim_uid(dra, name)
        assert uid and dra.status(name)["phase"] == "Pending"
        assert uid not in dra.records()  # nothing prepared: no record, no CDI spec for the claim
        assert not [p.name for p in dra.specs.iterdir() if uid in p.name]
        assert _gpus(dra) == before  # nothing applied
    finally:
        dra.delete(name)
