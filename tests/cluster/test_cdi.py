"""Allocate answering with CDI device names (`allocate_with = ["annotation", "cdi"]`) on the cluster with
containerd 2, whose CRI resolves CDI names from the specs `gpuhook cdi generate` wrote (its spec directory here is
the test's). A pod on containerd's plain runc handler gets its GPU from containerd's CDI alone; a pod on gpuhook's
runtime gets the same GPU both ways, once."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e import conftest

from .control_plane import NODE, control_plane
from .node import components, node, wait_for
from .test_cluster import SEE, Cluster, _allocatable, _ready, container


@pytest.fixture(scope="module")
def cdi(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Iterator[Cluster]:
    built = components()
    d = tmp_path_factory.mktemp("cdi-cluster")
    specs = d / "cdi"
    specs.mkdir()
    with control_plane(d / "plane", built) as plane, \
            node(d / "node", base_rootfs, conftest.SHIM, conftest.GPUHOOK, plane, str(built / "containerd"),
                 kubernetes='allocate_with = ["annotation", "cdi"]\n', cdi_dirs=(str(specs),)) as n:
        env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": n.env.gpuhook_config}
        for vendor in ("nvidia", "amd"):
            subprocess.run([conftest.GPUHOOK, "cdi", "generate", "--vendor", vendor, "--output",
                            str(specs / f"gpuhook-{vendor}.json")], env=env, check=True, capture_output=True)
        plane.apply({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "plain"},
                     "handler": "runc"})
        wait_for(lambda: _ready(plane) and _allocatable(plane).get("nvidia.com/gpu") == "2", 90,
                 lambda: f"{NODE}: {_allocatable(plane)}\n{n.kubelet_log.read_text()[-3000:]}")
        yield Cluster(plane, n)


@pytest.mark.parametrize("runtime", ["plain", "default"])
def test_a_gpu_given_by_cdi_name_reaches_the_container(cdi: Cluster, runtime: str) -> None:
    name = f"cdi-{runtime}"
    spec = {"containers": [container("main", SEE + "; ls /dev | grep -c '^nvidia[0-9]'", "nvidia.com/gpu")]}
    if runtime == "plain":
        spec["runtimeClassName"] = "plain"  # runc without gpuhook: containerd's CDI alone injects
    cdi.pod(name, spec)
    try:
        seen = cdi.logs(name, "main")
        assert len(seen) == 2 and seen[0].startswith("nvidia") and seen[1] == "1", seen
    finally:
        cdi.delete(name)
