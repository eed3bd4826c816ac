"""Partitioned GPUs through real runc, shim and hook mode: a container given one MIG device sees exactly its
caps nodes and its GPU's node, none of its siblings', and its own capabilities in the procfs copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhook.plan.authority import Allocation
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.nvidia import sim_mig

from .conftest import Run

PROFILES = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")  # MIG devices 0:0-0:3, GI 1-4, CI 0 each
SEE = ("ls /dev | grep -E '^nvidia[0-9]'; ls /dev/nvidia-caps | sed 's/^/CAP /'; "
       "cd /proc/driver/nvidia/capabilities && find . -type f | sort | sed 's/^/PROC /'; nvidia-smi; "
       "cat /sys/fs/cgroup/devices/devices.list | sed 's/^/RULE /'")


@pytest.fixture(scope="module")
def mig_host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """2 NVIDIA GPUs, GPU 0 in MIG mode with four MIG devices, GPU 1 whole."""
    return build_host(str(tmp_path_factory.mktemp("mig") / "host"), HostSpec(nvidia=2, mig=PROFILES, mig_gpus=1))


def _lines(out: str, tag: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(tag + " ")]


@pytest.mark.parametrize(("mode", "request_by"), [("shim", "index"), ("hook", "uuid")])
def test_one_mig_device_sees_its_own_caps_only(mig_host: str, run_container: Run, mode: str,
                                               request_by: str) -> None:
    if request_by == "index":
        r = run_container(mig_host, SEE, {"gpuhook.dev/gpus": "0:2"}, mode=mode)
    else:  # NVIDIA's images and device plugin name MIG devices by UUID in the env
        r = run_container(mig_host, SEE, env={"NVIDIA_VISIBLE_DEVICES": sim_mig.uuid(0, 2)}, mode=mode)
    assert r.rc == 0, r.err
    gi, ci = sim_mig.minor(0, 3), sim_mig.minor(0, 3, 0)  # 0:2 is GI 3, CI 0: nvidia-cap30, nvidia-cap31
    assert r.out.splitlines()[0] == "nvidia0"  # the parent's node, not GPU 1's
    assert "nvidia1" not in r.out.split()
    assert _lines(r.out, "CAP") == sorted([f"nvidia-cap{gi}", f"nvidia-cap{ci}"])
    assert _lines(r.out, "PROC") == ["./gpu0/mig/gi3/access", "./gpu0/mig/gi3/ci0/access"]
    assert "MIG device: gpu0/mig/gi3/ci0" in r.out and r.out.count("MIG device:") == 1
    rules = _lines(r.out, "RULE")
    assert f"c {sim_mig.CAPS_MAJOR}:{gi} rwm" in rules and f"c {sim_mig.CAPS_MAJOR}:{ci} rwm" in rules
    assert f"c {sim_mig.CAPS_MAJOR}:{sim_mig.minor(0, 1)} rwm" not in rules and "c 195:0 rwm" in rules
    assert "c 195:1 rwm" not in rules


def test_tuning_one_slice_of_a_shared_gpu_is_refused(mig_host: str, run_container: Run) -> None:
    r = run_container(mig_host, "true", {"gpuhook.dev/gpus": "0:2", "gpuhook.dev/clocks": "1500"})
    assert r.rc != 0
    assert "on a shared GPU (slice" in r.err and "of the whole GPU 0" in r.err and "not 0:0, 0:1, 0:3" in r.err, r.err


@pytest.fixture(scope="module")
def cpx_host(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One MI300X in CPX mode: eight partitions, each a KFD node with its own render node."""
    return build_host(str(tmp_path_factory.mktemp("cpx") / "host"), HostSpec(amd=1, amd_partitions="CPX"))


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_one_cpx_partition_gets_exactly_its_render_node(cpx_host: str, run_container: Run, mode: str) -> None:
    r = run_container(cpx_host, "ls /dev/dri /dev/kfd | sed 's/^/DEV /'; "
                      "cat /sys/fs/cgroup/devices/devices.list | sed 's/^/RULE /'",
                      env={"AMD_VISIBLE_DEVICES": "5"}, mode=mode)  # index 5: partition 5, as ROCm counts
    assert r.rc == 0, r.err
    assert [d for d in _lines(r.out, "DEV") if d] == ["/dev/kfd", "/dev/dri:", "renderD133"]
    rules = _lines(r.out, "RULE")
    assert "c 226:133 rwm" in rules and "c 226:128 rwm" not in rules and "c 226:1 rwm" not in rules


def test_tuning_one_partition_of_a_shared_gpu_is_refused(cpx_host: str, run_container: Run) -> None:
    r = run_container(cpx_host, "true", {"gpuhook.dev/gpus": "2", "gpuhook.dev/vendor": "amd",
                                         "gpuhook.dev/perf-level": "high"})
    assert r.rc != 0
    assert "of the whole GPU 2" in r.err and "not 0, 1, 3, 4, 5, 6, 7" in r.err, r.err


def test_a_kubelet_allocation_of_a_mig_device_gives_exactly_it(mig_host: str, run_container: Run,
                                                               tmp_path: Path) -> None:
    """The device plugin's record names the MIG UUID (mig_strategy mixed/single); the runtime finds it (NVML)."""
    import time
    import uuid as uuids

    from gpuhook.apply import allocations

    state = f"{tmp_path}/state"
    alloc, now = uuids.uuid4().hex, time.time()
    allocations.save(state, Allocation(id=alloc, resource="nvidia.com/mig-1g.10gb", vendor="nvidia",
                                       gpus=(sim_mig.uuid(0, 3),),
                                                   devices=(sim_mig.uuid(0, 3),), shared=False, created=now,
                                       expires=now + 600))
    pod = {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-uid": "pod-1",
           "io.kubernetes.cri.container-name": "train", "gpuhook.dev/allocation": alloc}
    config = f'host_root = "{mig_host}"\nstate_dir = "{state}"\n[policy]\nrequests = "allocated"\n'
    r = run_container(mig_host, SEE, pod, env={"NVIDIA_VISIBLE_DEVICES": "all"}, config=config)
    assert r.rc == 0, r.err
    assert _lines(r.out, "CAP") == sorted([f"nvidia-cap{sim_mig.minor(0, 4)}", f"nvidia-cap{sim_mig.minor(0, 4, 0)}"])
    assert _lines(r.out, "PROC") == ["./gpu0/mig/gi4/access", "./gpu0/mig/gi4/ci0/access"]
