"""MIG on the one-node cluster (containerd 2): GPU 0 in MIG mode with three MIG devices, GPU 1 whole, the device
plugin under `mig_strategy = "mixed"`. The Node's capacity has a resource per profile beside the whole GPU, and a
pod asking one MIG device sees its parent's node and that device's capability nodes only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuhook.testing.simulate import HostSpec
from gpuhook.vendors.nvidia import sim_mig
from tests.e2e import conftest

from .control_plane import NODE, control_plane
from .node import components, node, wait_for
from .test_cluster import Cluster, _allocatable, _ready, container

SEE = "ls /dev | grep -E '^nvidia[0-9]'; ls /dev/nvidia-caps | sed 's/^/CAP /'"


@pytest.fixture(scope="module")
def mig(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Iterator[Cluster]:
    built = components()
    d = tmp_path_factory.mktemp("mig-cluster")
    spec = HostSpec(nvidia=2, amd=0, mig=("3g.40gb", "1g.10gb", "1g.10gb"), mig_gpus=1)
    with control_plane(d / "plane", built) as plane, \
            node(d / "node", base_rootfs, conftest.SHIM, conftest.GPUHOOK, plane, str(built / "containerd"),
                 host_spec=spec, kubernetes='mig_strategy = "mixed"\n') as n:
        wait_for(lambda: _ready(plane), 90, lambda: f"{NODE} not Ready\n{n.kubelet_log.read_text()[-3000:]}")
        yield Cluster(plane, n)


def test_mixed_strategy_puts_a_resource_per_profile_in_the_nodes_capacity(mig: Cluster) -> None:
    want = {"nvidia.com/gpu": "1", "nvidia.com/mig-3g.40gb": "1", "nvidia.com/mig-1g.10gb": "2"}
    wait_for(lambda: {k: _allocatable(mig.plane).get(k) for k in want} == want, 60,
             lambda: f"allocatable {_allocatable(mig.plane)}\n{mig.node.plugin_log.read_text()[-2000:]}")


def test_a_pod_asking_one_mig_device_sees_its_parent_and_its_own_caps_only(mig: Cluster) -> None:
    mig.pod("slice", {"containers": [container("main", SEE, "nvidia.com/mig-3g.40gb")]})
    try:
        seen = mig.logs("slice", "main")
        gi, ci = sim_mig.minor(0, 1), sim_mig.minor(0, 1, 0)  # MIG device 0:0 is GI 1, CI 0
        assert seen[0] == "nvidia0" and "nvidia1" not in seen, seen
        assert sorted(line[4:] for line in seen if line.startswith("CAP ")) == sorted(
            [f"nvidia-cap{gi}", f"nvidia-cap{ci}"]), seen
    finally:
        mig.delete("slice")
