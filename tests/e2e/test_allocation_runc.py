"""Who grants GPUs, through real runc and gpuhook-runtime: the kubelet's allocations under
`requests = "allocated"`, sandbox (pause) containers, and count requests on a single host. Every check is on
what the container sees or on config.json's bytes."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from gpuhook.apply import allocations
from gpuhook.host.root import Root
from gpuhook.plan.authority import Allocation
from gpuhook.testing.bundle import make_bundle, oci_config
from gpuhook.vendors.discover import discover

from . import conftest
from .conftest import Run

POD = {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-uid": "pod-uid-1",
       "io.kubernetes.cri.container-name": "train"}


def _config(host: str, state: Path, policy: str = "any") -> str:
    return f'host_root = "{host}"\nstate_dir = "{state}"\n[policy]\nrequests = "{policy}"\n'


def _uuids(host: str) -> list[str]:
    inv = discover(Root(host)).vendor("nvidia")
    assert inv is not None
    return [g.uuid for g in inv.gpus]


def _record(state: Path, gpu: str, expires_in: float = 600) -> str:
    alloc_id = uuid.uuid4().hex
    now = time.time()
    allocations.save(str(state), Allocation(id=alloc_id, resource="nvidia.com/gpu", vendor="nvidia", gpus=(gpu,),
                                            devices=(gpu,), shared=False,
                                                        created=now, expires=now + expires_in))
    return alloc_id


def _log(result: conftest.Result, tmp_path: Path) -> str:
    return (tmp_path / f"{result.cid}.runc.json").read_text()


def test_an_allocation_gives_exactly_its_gpu_whatever_the_image_env_says(run_container: Run, mixed_host: str,
                                                                          tmp_path: Path) -> None:
    state = tmp_path / "state"
    gpu1 = _uuids(mixed_host)[1]
    alloc = _record(state, gpu1)
    r = run_container(mixed_host, "ls /dev", annotations={**POD, "gpuhook.dev/allocation": alloc},
                      env={"NVIDIA_VISIBLE_DEVICES": "all"}, config=_config(mixed_host, state, "allocated"))
    assert r.rc == 0, r.err
    assert "nvidia1" in r.out.split() and "nvidia0" not in r.out.split()
    rec = allocations.load(str(state), alloc)
    assert rec is not None and rec.claimed_by == "pod-uid-1/train"
    # The same container of the same pod, restarted (a new container id), presents it again: allowed.
    again = run_container(mixed_host, "ls /dev", annotations={**POD, "gpuhook.dev/allocation": alloc},
                          config=_config(mixed_host, state, "allocated"))
    assert again.rc == 0 and "nvidia1" in again.out.split(), again.err
    # Another pod presenting it is refused, and the refusal names the owner.
    other = {**POD, "io.kubernetes.cri.sandbox-uid": "pod-uid-2", "gpuhook.dev/allocation": alloc}
    thief = run_container(mixed_host, "ls /dev", annotations=other, config=_config(mixed_host, state, "allocated"))
    assert thief.rc != 0 and "belongs to container pod-uid-1/train" in thief.err
    assert thief.spec_after == thief.spec_before


@pytest.mark.parametrize(("annotations", "env", "says"), [
    ({"gpuhook.dev/gpus": "all"}, {}, "gpuhook.dev/gpus='all': on this node only the kubelet grants GPUs"),
    ({}, {"NVIDIA_VISIBLE_DEVICES": "all"}, "NVIDIA_VISIBLE_DEVICES='all': on this node only the kubelet"),
    ({"gpuhook.dev/clocks": "1500"}, {}, "tuning (gpuhook.dev/clocks"),
    ({"gpuhook.dev/allocation": "0" * 32}, {}, "no such allocation on this node"),
], ids=["annotation", "image env", "tuning without GPUs", "forged allocation"])
def test_the_allocated_policy_refuses_a_pod_authors_own_gpus(run_container: Run, mixed_host: str, tmp_path: Path,
                                                             annotations: dict[str, str], env: dict[str, str],
                                                             says: str) -> None:
    r = run_container(mixed_host, "ls /dev", annotations={**POD, **annotations}, env=env,
                      config=_config(mixed_host, tmp_path / "state", "allocated"))
    assert r.rc != 0 and says in r.err, r.err
    assert "resources.limits" in r.err or "allocation" in r.err
    assert r.spec_after == r.spec_before
    logged = [json.loads(line) for line in _log(r, tmp_path).splitlines()]
    assert any(e["level"] == "error" and says in e["msg"] for e in logged)  # where containerd reads it


def test_an_expired_unclaimed_allocation_is_refused(run_container: Run, mixed_host: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    alloc = _record(state, _uuids(mixed_host)[0], expires_in=-5)
    r = run_container(mixed_host, "ls /dev", annotations={**POD, "gpuhook.dev/allocation": alloc},
                      config=_config(mixed_host, state, "allocated"))
    assert r.rc != 0 and "expired" in r.err and "allocation_ttl" in r.err
    assert r.spec_after == r.spec_before


def test_a_sandbox_container_gets_nothing_and_takes_no_lease(run_container: Run, mixed_host: str,
                                                              tmp_path: Path) -> None:
    """containerd passes pod annotations to the pause container too: it must not get GPUs, tuning or a lease,
    so the workload's exclusive request finds the GPUs free."""
    state = tmp_path / "state"
    pod = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia", "gpuhook.dev/exclusive": "true"}
    sandbox = run_container(mixed_host, "ls /dev", annotations={**pod, "io.kubernetes.cri.container-type": "sandbox"},
                            config=_config(mixed_host, state))
    assert sandbox.rc == 0, sandbox.err
    assert sandbox.spec_after == sandbox.spec_before and "nvidia0" not in sandbox.out.split()
    assert not (state / "ledger.json").exists()
    assert not (state / "containers").exists() or not list((state / "containers").iterdir())
    crio = run_container(mixed_host, "ls /dev", annotations={**pod, "io.kubernetes.cri-o.ContainerType": "sandbox"},
                         config=_config(mixed_host, state))
    assert crio.rc == 0 and crio.spec_after == crio.spec_before


def _create(tmp: Path, base: str, cfg: Path, annotations: dict[str, str]) -> tuple[str, Path, int, str]:
    """`runc create` through the shim (the container exists, not started): its id, output file, status, stderr.
    The container keeps the files as its stdio (a pipe would stay open as long as it lives)."""
    cid = "cnt-" + uuid.uuid4().hex[:10]
    bundle = tmp / cid
    spec = oci_config(["sh", "-c", "ls /dev"], annotations=annotations, uid=1000, gid=1000)
    make_bundle(str(bundle), spec, base)
    with open(tmp / f"{cid}.out", "w") as out, open(tmp / f"{cid}.err", "w") as err:
        proc = subprocess.run([conftest.SHIM, "--root", str(tmp / "runc"), "create", "--bundle", str(bundle), cid],
                              env={"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(cfg)}, stdout=out, stderr=err,
                              stdin=subprocess.DEVNULL, timeout=60, check=False)
    return cid, tmp / f"{cid}.out", proc.returncode, (tmp / f"{cid}.err").read_text()


def test_count_requests_get_free_gpus_and_refuse_when_none_is_left(tmp_path: Path, mixed_host: str,
                                                                   base_rootfs: str) -> None:
    cfg = tmp_path / "gpuhook.toml"
    cfg.write_text(_config(mixed_host, tmp_path / "state"))
    ask = {"gpuhook.dev/gpus": "count:1", "gpuhook.dev/vendor": "nvidia"}
    made = []
    try:
        for _ in range(2):
            cid, out, rc, err = _create(tmp_path, base_rootfs, cfg, ask)
            assert rc == 0, err
            made.append((cid, out))
        _, _, rc, err = _create(tmp_path, base_rootfs, cfg, ask)
        assert rc != 0
        assert "only 0 of this host's 2 NVIDIA GPUs are free" in err and "by container cnt-" in err
        for cid, _ in made:
            subprocess.run(["runc", "--root", str(tmp_path / "runc"), "start", cid], check=True, timeout=30)
        seen = []
        for cid, out in made:
            subprocess.run(["runc", "--root", str(tmp_path / "runc"), "delete", "--force", cid], timeout=30,
                           check=False)
            seen.append(sorted(n for n in out.read_text().split() if n[6:].isdigit() and n.startswith("nvidia")))
        assert sorted(seen) == [["nvidia0"], ["nvidia1"]]  # each container sees one GPU, not the same one
    finally:
        for cid, _ in made:
            subprocess.run(["runc", "--root", str(tmp_path / "runc"), "delete", "--force", cid], timeout=30,
                           check=False, capture_output=True)
    # Both are gone: the GPUs are free again.
    cid, out, rc, err = _create(tmp_path, base_rootfs, cfg, {"gpuhook.dev/gpus": "count:2",
                                                              "gpuhook.dev/vendor": "nvidia"})
    subprocess.run(["runc", "--root", str(tmp_path / "runc"), "delete", "--force", cid], timeout=30, check=False,
                   capture_output=True)
    assert rc == 0, err


def test_gc_removes_only_expired_unclaimed_allocations(tmp_path: Path, mixed_host: str) -> None:
    state = tmp_path / "state"
    gpu0 = _uuids(mixed_host)[0]
    stale, fresh = _record(state, gpu0, expires_in=-1), _record(state, gpu0)
    cfg = tmp_path / "gpuhook.toml"
    cfg.write_text(_config(mixed_host, state))
    r = subprocess.run([conftest.GPUHOOK, "gc"], env={**os.environ, "GPUHOOK_CONFIG": str(cfg)},
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert f"allocation {stale} (expired unclaimed)" in r.stdout
    assert allocations.load(str(state), stale) is None and allocations.load(str(state), fresh) is not None


def _share(state: Path, gpu: str, n: int) -> str:
    """The device plugin's record of share `n` of a time-sliced GPU ([kubernetes] replicas > 1)."""
    alloc_id = uuid.uuid4().hex
    now = time.time()
    allocations.save(str(state), Allocation(id=alloc_id, resource="nvidia.com/gpu", vendor="nvidia", gpus=(gpu,),
                                            devices=(f"{gpu}::{n}",), shared=True,
                                            created=now, expires=now + 600))
    return alloc_id


@pytest.mark.parametrize("asked", [{"gpuhook.dev/exclusive": "true"},
                                   {"gpuhook.dev/compute-mode": "exclusive-process"},
                                   {"gpuhook.dev/compute-mode": "prohibited"},
                                   {"gpuhook.dev/power-limit": "100"}],
                         ids=["exclusive", "exclusive-process", "prohibited", "power"])
@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_a_shares_say_over_the_whole_gpu_is_refused_and_the_other_share_starts(
        run_container: Run, mixed_host: str, tmp_path: Path, asked: dict[str, str], mode: str) -> None:
    """Two pods in two namespaces hold shares of GPU 0 (time-sliced, replicas = 4): the one asking to lease it or to
    set its compute mode or power is refused with one line, config.json unchanged and nothing applied; the other
    starts on the GPU."""
    state = tmp_path / "state"
    config = _config(mixed_host, state, "allocated") + "[kubernetes]\nreplicas = 4\n"
    gpu0 = _uuids(mixed_host)[0]
    mine, theirs = _share(state, gpu0, 0), _share(state, gpu0, 1)
    hostile = run_container(mixed_host, "ls /dev", mode=mode, config=config,
                            annotations={**POD, "io.kubernetes.cri.sandbox-namespace": "team-a",
                                         "gpuhook.dev/allocation": mine, **asked})
    (key,) = asked
    (line,) = hostile.err.strip().splitlines()
    assert hostile.rc != 0 and line.endswith(f"or drop {key}"), hostile.err
    assert f"{key} on a shared GPU (a time-sliced share of {gpu0}: nvidia.com/gpu is shared between pods" in line
    assert 'ask for a whole GPU (nodeSelector nvidia.com/gpu.replicas: "1")' in line
    if mode == "shim":
        assert hostile.spec_after == hostile.spec_before
    assert "nvidia0" not in hostile.out.split()
    assert not (state / "ledger.json").exists()  # no lease, no setting: the host was never touched
    other = run_container(mixed_host, "ls /dev", mode=mode, config=config,
                          annotations={**POD, "io.kubernetes.cri.sandbox-uid": "pod-uid-2",
                                       "io.kubernetes.cri.sandbox-namespace": "team-b",
                                       "gpuhook.dev/allocation": theirs})
    assert other.rc == 0, other.err
    assert "nvidia0" in other.out.split()


IMAGE_TUNING = {"GPUHOOK_EXCLUSIVE": "true", "GPUHOOK_POWER_LIMIT": "100", "GPUHOOK_FAN": "0",
                "GPUHOOK_MPS": "true", "GPUHOOK_COMPUTE_MODE": "prohibited", "GPUHOOK_CLOCKS": "300"}


def test_an_images_tuning_env_asks_nothing_on_a_cluster_node(run_container: Run, mixed_host: str,
                                                             tmp_path: Path) -> None:
    """The shipped DaemonSet config: accept_env_requests = true beside requests = "allocated". An image's own
    GPUHOOK_* ENV leases nothing and tunes nothing: the pod starts on its GPU with no tuning hooks and no ledger."""
    state = tmp_path / "state"
    config = _config(mixed_host, state, "allocated") + "accept_env_requests = true\n"
    alloc = _record(state, _uuids(mixed_host)[1])
    r = run_container(mixed_host, "ls /dev", annotations={**POD, "gpuhook.dev/allocation": alloc}, env=IMAGE_TUNING,
                      config=config)
    assert r.rc == 0, r.err
    assert "nvidia1" in r.out.split()
    hooks = json.loads(r.spec_after).get("hooks") or {}
    assert not any("prestart" in h.get("args", []) for h in hooks.get("prestart", [])), hooks
    assert not (state / "ledger.json").exists()


def test_exclusive_from_env_is_refused_on_a_single_host(run_container: Run, mixed_host: str, tmp_path: Path) -> None:
    """Where env asks tuning (a single host, Docker 20.10), exclusive and MPS are still never taken from it: one
    line, config.json unchanged."""
    r = run_container(mixed_host, "ls /dev", env={"NVIDIA_VISIBLE_DEVICES": "0", "GPUHOOK_EXCLUSIVE": "true"},
                      config=_config(mixed_host, tmp_path / "state"))
    (line,) = r.err.strip().splitlines()
    assert r.rc != 0 and "GPUHOOK_EXCLUSIVE='true': exclusive is never taken from env" in line, r.err
    assert r.spec_after == r.spec_before
