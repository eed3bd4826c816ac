"""An MPS client's layout held to NVIDIA's (issue 45, 6): what gpuhook gives a client (vendors/nvidia/tuning.sharing,
which the shim, the prestart hook and the device plugin's allocations all go through) and what a DRA claim's CDI
spec carries of it.

NVIDIA's DRA driver (NVIDIA/k8s-dra-driver-gpu 2240711, cmd/gpu-kubelet-plugin/sharing.go, GetCDIContainerEdits)
gives an MPS client env CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps and two mounts from the claim's daemon directory:
<shm> at /dev/shm and <pipe> at /tmp/nvidia-mps, each rw, nosuid, nodev, bind; its shm is a tmpfs mounted rw,
nosuid, nodev, noexec with a size. Its device plugin (NVIDIA/k8s-device-plugin 1b826ac, mps/daemon.go) names the
daemon's env CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY as what clients should be given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhook.edits import Mount
from gpuhook.host.inventory import Gpu
from gpuhook.request.tuning import Tuning
from gpuhook.vendors.nvidia.tuning import sharing

NVIDIA_DRA_MOUNTS = {"/dev/shm": ("shm", {"rw", "nosuid", "nodev", "bind"}),
                     "/tmp/nvidia-mps": ("pipe", {"rw", "nosuid", "nodev", "bind"})}
NVIDIA_DRA_ENV = "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"
UUID = "GPU-00000000-5a1e-4000-8000-0000d00d0000"


def test_an_mps_client_gets_nvidias_mounts_and_env_and_the_log_directory_read_only() -> None:
    gpu = Gpu(vendor="nvidia", index=0, uuid=UUID, pci="0000:01:00.0", model="H100", nodes=())
    settings, edits = sharing(Tuning(mps=True, mps_threads=25), [gpu], "/run/gpuhook/mps")
    home = f"/run/gpuhook/mps/{UUID}"
    assert [(s.name, s.value) for s in settings] == [("mps", home)]
    by_target: dict[str, Mount] = {m.container_path: m for m in edits.mounts}
    for target, (directory, options) in NVIDIA_DRA_MOUNTS.items():
        m = by_target[target]
        assert m.host_path.startswith(f"{home}/{directory}") and options <= set(m.options), m
    assert "noexec" in by_target["/dev/shm"].options  # NVIDIA's tmpfs is noexec: so is its bind here
    assert by_target["/var/log/nvidia-mps"] == Mount(f"{home}/log", "/var/log/nvidia-mps",
                                                     ("ro", "nosuid", "nodev", "noexec", "bind"))
    assert set(edits.env) == {NVIDIA_DRA_ENV, "CUDA_MPS_LOG_DIRECTORY=/var/log/nvidia-mps",
                              "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"}


@pytest.mark.parametrize(("tuning", "mps"), [((("mps", "true"), ("mps-threads", "25")), True), ((), False)],
                         ids=["mps client", "whole gpu"])
def test_a_claims_cdi_spec_carries_an_mps_clients_env_and_leaves_the_mounts_to_the_runtime(
        tmp_path: Path, tuning: tuple[tuple[str, str], ...], mps: bool) -> None:
    """The env needs nothing on the node when the container is created; the mounts name the daemon's directories
    and tmpfs, which gpuhook makes then (the shim, or the prestart hook live): a spec written at prepare that named
    them would fail a plain runc create before they exist."""
    from gpuhook.apply import claims
    from gpuhook.config import from_table
    from gpuhook.host.root import Root
    from gpuhook.kubernetes.dra.state import Preparer
    from gpuhook.kubernetes.dra.taints import Xids, describe
    from gpuhook.plan.authority import ClaimedDevice, PreparedClaim
    from gpuhook.testing.simulate import HostSpec, build_host
    from gpuhook.vendors.discover import discover, identified

    build_host(str(tmp_path / "host"), HostSpec(nvidia=1))
    config = from_table({"host_root": str(tmp_path / "host"), "state_dir": str(tmp_path / "state"),
                         "tuning": {"mps_dir": "/run/gpuhook/mps"}}, "/etc/gpuhook/config.toml")
    root = Root(config.host_root)
    inventory = identified(root, discover(root))
    devices = [d for d, _ in describe(inventory, root, Xids(), {})]
    d = devices[0]
    checkpoint = tmp_path / "plugins" / "gpu.gpuhook.dev"
    claims.save(str(checkpoint), PreparedClaim(uid="uid-1", namespace="ns", name="claim", devices=(
        ClaimedDevice(request="gpu", device=d.name, vendor="nvidia", gpu=d.gpu.key(), tuning=tuning),)))
    preparer = Preparer(config, None, "gpu.gpuhook.dev", "node-1", str(tmp_path / "cdi"),  # type: ignore[arg-type]
                        "/usr/local/bin/gpuhook-hook", "/usr/local/bin/gpuhook", checkpoint=str(checkpoint))
    assert preparer.restore({d.name: d}, inventory) == (["ns/claim (uid-1)"], [])
    edits = json.loads(Path(preparer.spec_path("uid-1")).read_text())["devices"][0]["containerEdits"]
    env = [e for e in edits.get("env", []) if e.startswith("CUDA_MPS_")]
    if mps:
        assert sorted(env) == ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", "CUDA_MPS_LOG_DIRECTORY=/var/log/nvidia-mps",
                               NVIDIA_DRA_ENV]
    else:
        assert env == []
    assert not {m["containerPath"] for m in edits.get("mounts", [])} & {*NVIDIA_DRA_MOUNTS, "/var/log/nvidia-mps"}
