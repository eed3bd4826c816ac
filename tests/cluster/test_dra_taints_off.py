"""Health on a cluster without device taints: 1.34 as it comes (DRADeviceTaints alpha, off), whose API server drops
a device's `taints`. The driver reads its first tainted slice back, says so once, and publishes as before taints:
the unhealthy GPU leaves the slice, and comes back when it recovers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.simulate import build_host

from . import test_dra
from .node import wait_for
from .test_dra import HOST, Dra

dra = test_dra.dra  # the fixture: this module's cluster, as test_dra.py makes one, on 1.34
DROPPED = "the API server dropped the devices' taints"


def _devices(d: Dra) -> dict[str, dict[str, Any]]:
    """The published devices (a slice written while the host is rebuilt may list none: null)."""
    return {x["name"]: x for s in d.slices() for x in s["spec"].get("devices") or []}


@pytest.fixture(scope="module")
def kube_version() -> str:
    return "1.34"


@pytest.fixture(scope="module")
def kube_gates_off() -> tuple[str, ...]:
    return ("DRADeviceTaints", "DRADeviceTaintRules", "DRAExtendedResource")


def test_without_taints_an_unhealthy_gpu_leaves_the_slice_said_once_and_comes_back(dra: Dra) -> None:
    host = dra.node.env.host_root
    Path(host, "dev/nvidia3").unlink()
    try:
        wait_for(lambda: "gpu-3" not in _devices(dra), 30, lambda: f"{sorted(_devices(dra))}\n{dra.log.read_text()}")
        assert not any(d.get("taints") for d in _devices(dra).values())
    finally:
        build_host(host, HOST)
    wait_for(lambda: "gpu-3" in _devices(dra), 30, lambda: f"{sorted(_devices(dra))}\n{dra.log.read_text()}")
    Path(host, "dev/nvidia3").unlink()  # unhealthy again: left out at once, nothing said again
    try:
        wait_for(lambda: "gpu-3" not in _devices(dra), 30, lambda: sorted(_devices(dra)))
    finally:
        build_host(host, HOST)
    wait_for(lambda: "gpu-3" in _devices(dra), 30, lambda: sorted(_devices(dra)))
    assert dra.log.read_text().count(DROPPED) == 1, dra.log.read_text()
    assert "left out: gpu-3 (device node /dev/nvidia3 is missing)" in dra.log.read_text()
