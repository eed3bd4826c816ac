"""The runtime's side of DRA, through real runc: a container whose spec carries a prepared claim's marker hooks (as
containerd writes it after applying the claim's CDI devices) gets exactly the claim's GPUs, with the claim's
tuning, on gpuhook's shim and on plain runc with the hooks alone; what the driver did not prepare, for this
namespace, grants nothing. The records are the driver's (apply/claims.py), written here as it writes them. The
cluster tests (tests/cluster/test_dra.py) run the same through a real kubelet and containerd's CDI."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gpuhook.apply import claims
from gpuhook.host.root import Root
from gpuhook.plan.authority import ClaimedDevice, PreparedClaim
from gpuhook.request.dra_claim import marker_args
from gpuhook.vendors.discover import discover

from . import conftest
from .conftest import Run

UID = "0b1e6c5e-0000-4000-8000-00000000c1a1"
POD = {"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-uid": "pod-uid-1",
       "io.kubernetes.cri.sandbox-namespace": "team-a", "io.kubernetes.cri.container-name": "train"}
# a CRI-O container of namespace team-b (CRI-O's own keys), whose pod copies containerd's keys naming team-a: CRI-O
# copies every pod annotation into the spec
CRIO_POD = {"io.kubernetes.cri-o.ContainerType": "container", "io.kubernetes.cri-o.SandboxID": "sb-b",
            "io.kubernetes.pod.uid": "pod-uid-1", "io.kubernetes.pod.namespace": "team-b",
            "io.kubernetes.pod.name": "job-b", "io.kubernetes.container.name": "train",
            "io.kubernetes.cri-o.Annotations": "{}"}
FORGED = {k: v for k, v in POD.items() if k != "io.kubernetes.cri.container-type"}


def _config(host: str, state: Path) -> str:
    """The node's config (and a copy beside the state directory, which the claim's hooks name, as the CDI spec's
    do)."""
    text = (f'host_root = "{host}"\nstate_dir = "{state}"\nlog_file = "{state.parent / "gpuhook.log"}"\n'
            '[policy]\nrequests = "allocated"\n')
    state.parent.joinpath("node.toml").write_text(text)
    return text


def _prepared(state: Path, host: str, indexes: tuple[int, ...], tuning: tuple[tuple[str, str], ...] = (),
              requests: tuple[str, ...] = ("gpu",)) -> None:
    inv = discover(Root(host)).vendor("nvidia")
    assert inv is not None
    devices = tuple(ClaimedDevice(request=requests[n % len(requests)], device=f"gpu-{i}", vendor="nvidia",
                                  gpu=inv.gpus[i].uuid,
                                  tuning=tuning) for n, i in enumerate(indexes))
    claims.save(str(state), PreparedClaim(uid=UID, namespace="team-a", name="train-gpu", devices=devices,
                                          pods=("pod-uid-1",), prepared=time.time()))


def _markers(tmp: Path, *requests: str, uid: str = UID) -> Any:
    """The spec as containerd leaves it: the claim's prestart marker hooks (one per request) and its poststop,
    with the node's config (_config's copy) as the CDI spec names it."""
    def edit(spec: dict[str, Any]) -> None:
        hooks = spec.setdefault("hooks", {})
        env = [f"GPUHOOK_CONFIG={tmp / 'node.toml'}"]
        hooks["prestart"] = [{"path": conftest.GPUHOOK, "args": ["gpuhook", "hook", "prestart", *marker_args(uid, r)],
                              "env": env} for r in requests]
        hooks["poststop"] = [{"path": conftest.GPUHOOK, "args": ["gpuhook", "hook", "poststop"], "env": env}]
    return edit


def _nodes(out: str) -> list[str]:
    return sorted(n for n in out.split() if n.startswith("nvidia") and n[6:].isdigit())


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_a_prepared_claim_gives_exactly_its_gpus_whatever_the_image_env_says(run_container: Run, mixed_host: str,
                                                                             tmp_path: Path, mode: str) -> None:
    state = tmp_path / "state"
    _prepared(state, mixed_host, (1,))
    r = run_container(mixed_host, "ls /dev", annotations=POD, env={"NVIDIA_VISIBLE_DEVICES": "all"},
                      config=_config(mixed_host, state), spec_edit=_markers(tmp_path, "gpu"), mode=mode)
    assert r.rc == 0, r.err
    assert _nodes(r.out) == ["nvidia1"]


def test_two_requests_of_a_claim_are_given_once(run_container: Run, mixed_host: str, tmp_path: Path) -> None:
    """Two marker hooks (one per request) under plain runc: the first gives both requests' GPUs, the second finds
    the container's record and does nothing (no second live injection)."""
    state = tmp_path / "state"
    _prepared(state, mixed_host, (0, 1), requests=("a", "b"))
    r = run_container(mixed_host, "ls /dev", annotations=POD, config=_config(mixed_host, state),
                      spec_edit=_markers(tmp_path, "a", "b"), mode="hook")
    assert r.rc == 0, r.err
    assert _nodes(r.out) == ["nvidia0", "nvidia1"]
    assert (tmp_path / "gpuhook.log").read_text().count('"applied live"') == 1


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_the_claims_tuning_is_applied_while_the_container_runs(run_container: Run, mixed_host: str, tmp_path: Path,
                                                              mode: str) -> None:
    state = tmp_path / "state"
    _prepared(state, mixed_host, (1,), tuning=(("clocks", "1500"),))
    log = Path(f"{mixed_host}/var/lib/gpuhook-sim/nvml.log")
    before = log.read_text().splitlines() if log.exists() else []
    r = run_container(mixed_host, "ls /dev", annotations=POD, config=_config(mixed_host, state),
                      spec_edit=_markers(tmp_path, "gpu"), mode=mode)
    assert r.rc == 0, r.err
    calls = [ln.split()[:4] for ln in log.read_text().splitlines()[len(before):]]
    assert calls == [["set-clocks", "1", "1500", "1500"], ["reset-clocks", "1", "0", "0"]], calls  # and restored


@pytest.mark.parametrize(("annotations", "prepare", "says"), [
    ({**POD, "io.kubernetes.cri.sandbox-namespace": "team-b"}, True,
     "DRA claim team-a/train-gpu is not this container's: it runs in namespace team-b"),
    (POD, False, f"DRA claim {UID} is not prepared on this node"),
    ({**POD, "gpuhook.dev/gpus": "0"}, True, "gpuhook.dev/gpus='0' next to DRA claims (team-a/train-gpu)"),
    ({**CRIO_POD, **FORGED}, True, "DRA claim team-a/train-gpu is not this container's: it runs in namespace team-b"),
    ({**CRIO_POD, **FORGED, "io.kubernetes.cri.container-type": "sandbox"}, True,
     "posing as the other engine's"),
], ids=["another namespace", "not prepared", "own request beside", "cri-o pod posing as containerd's namespace",
        "cri-o app container posing as containerd's sandbox"])
def test_what_the_driver_did_not_prepare_for_this_namespace_grants_nothing(run_container: Run, mixed_host: str,
                                                                           tmp_path: Path,
                                                                           annotations: dict[str, str],
                                                                           prepare: bool, says: str) -> None:
    state = tmp_path / "state"
    if prepare:
        _prepared(state, mixed_host, (1,))
    for mode in ("shim", "hook"):
        r = run_container(mixed_host, "ls /dev", annotations=annotations, config=_config(mixed_host, state),
                          spec_edit=_markers(tmp_path, "gpu"), mode=mode)
        assert r.rc != 0 and says in r.err, (mode, r.err)
        assert "Traceback" not in r.err and _nodes(r.out) == []
        if mode == "shim":
            assert r.spec_after == r.spec_before


def test_a_request_the_claim_lacks_is_refused(run_container: Run, mixed_host: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    _prepared(state, mixed_host, (1,))
    r = run_container(mixed_host, "ls /dev", annotations=POD, config=_config(mixed_host, state),
                      spec_edit=_markers(tmp_path, "other"))
    assert r.rc != 0 and "has no request other prepared here (it has gpu)" in r.err, r.err


def test_a_pods_sandbox_with_markers_gets_nothing(run_container: Run, mixed_host: str, tmp_path: Path) -> None:
    state = tmp_path / "state"
    _prepared(state, mixed_host, (1,))
    sandbox = {**POD, "io.kubernetes.cri.container-type": "sandbox"}
    r = run_container(mixed_host, "ls /dev", annotations=sandbox, config=_config(mixed_host, state),
                      spec_edit=_markers(tmp_path, "gpu"))
    assert r.rc == 0, r.err
    assert _nodes(r.out) == [] and r.spec_after == r.spec_before


OTHER_UID = "0b1e6c5e-0000-4000-8000-00000000c1a2"


@pytest.mark.parametrize(("tuning", "annotations", "named"), [
    ((("compute-mode", "exclusive-process"),), {}, "computeMode in the GpuConfig of claim team-a/train-gpu"),
    ((("exclusive", "true"),), {}, "exclusive in the GpuConfig of claim team-a/train-gpu"),
    ((), {"gpuhook.dev/compute-mode": "prohibited"}, "gpuhook.dev/compute-mode"),
    ((), {"gpuhook.dev/exclusive": "true"}, "gpuhook.dev/exclusive"),
], ids=["GpuConfig computeMode", "GpuConfig exclusive", "annotation compute mode", "annotation exclusive"])
@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_a_shared_claims_say_over_the_whole_gpu_is_refused_and_the_other_claim_starts(
        run_container: Run, mixed_host: str, tmp_path: Path, tuning: tuple[tuple[str, str], ...],
        annotations: dict[str, str], named: str, mode: str) -> None:
    """A node with [kubernetes] replicas = 4: two claims in two namespaces hold shares of GPU 1. The one whose
    GpuConfig or pod asks a compute mode or a lease is refused with one line, config.json unchanged and the GPU
    untouched; the other namespace's claim starts on the GPU."""
    state = tmp_path / "state"
    config = _config(mixed_host, state) + "[kubernetes]\nreplicas = 4\n"
    (tmp_path / "node.toml").write_text(config)
    inv = discover(Root(mixed_host)).vendor("nvidia")
    assert inv is not None
    gpu = inv.gpus[1].uuid
    claims.save(str(state), PreparedClaim(uid=UID, namespace="team-a", name="train-gpu", devices=(
        ClaimedDevice(request="gpu", device="gpu-1", vendor="nvidia", gpu=gpu, tuning=tuning, share="share-a"),),
                                          pods=("pod-uid-1",), prepared=time.time()))
    claims.save(str(state), PreparedClaim(uid=OTHER_UID, namespace="team-b", name="infer-gpu", devices=(
        ClaimedDevice(request="gpu", device="gpu-1", vendor="nvidia", gpu=gpu, share="share-b"),), pods=("pod-uid-2",),
                                          prepared=time.time()))
    log = Path(f"{mixed_host}/var/lib/gpuhook-sim/nvml.log")
    before = log.read_text() if log.exists() else ""
    hostile = run_container(mixed_host, "ls /dev", annotations={**POD, **annotations}, config=config,
                            spec_edit=_markers(tmp_path, "gpu"), mode=mode)
    (line,) = hostile.err.strip().splitlines()
    assert hostile.rc != 0 and f"{named} on a shared GPU (claim team-a/train-gpu holds a time-sliced share of {gpu}" \
        in line, hostile.err
    assert line.endswith(f"or drop {named}") and _nodes(hostile.out) == []
    if mode == "shim":
        assert hostile.spec_after == hostile.spec_before
    assert not (state / "ledger.json").exists() and (log.read_text() if log.exists() else "") == before
    pod_b = {**POD, "io.kubernetes.cri.sandbox-uid": "pod-uid-2", "io.kubernetes.cri.sandbox-namespace": "team-b"}
    other = run_container(mixed_host, "ls /dev", annotations=pod_b, config=config,
                          spec_edit=_markers(tmp_path, "gpu", uid=OTHER_UID), mode=mode)
    assert other.rc == 0, other.err
    assert _nodes(other.out) == ["nvidia1"]
