"""#43 item 9, through the DRA driver's servicer: the kubelet's calls on one claim, run at once on the driver's gRPC
pool, take turns (kubernetes/dra/claim_locks.py); every interleaving of prepare and unprepare leaves the claim's CDI
spec and records both there or both gone; a GpuConfig's bad number is the driver's own line in the answer."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpuhook.apply import claims
from gpuhook.config import from_table
from gpuhook.host.root import Root
from gpuhook.kubernetes.api import dra_pb2
from gpuhook.kubernetes.dra import driver as dra_driver
from gpuhook.kubernetes.dra.claim_locks import ClaimLocks
from gpuhook.kubernetes.dra.state import Preparer
from gpuhook.kubernetes.dra.taints import Xids, describe, publishable
from gpuhook.testing.simulate import HostSpec, build_host
from gpuhook.vendors.discover import discover, identified

DRIVER, NODE, UID = "gpu.gpuhook.dev", "node-1", "c1a1-0000-4000-8000-000000000001"
ROUNDS = 40


class _Api:
    """The API server's answer for one claim, allocated on the node's first device."""

    def __init__(self, device: str, config: list[dict[str, Any]] | None = None) -> None:
        self._claim = {"metadata": {"uid": UID, "name": "train-gpu", "namespace": "team-a"}, "status": {
            "allocation": {"devices": {"config": config or [], "results": [
                {"driver": DRIVER, "pool": NODE, "device": device, "request": "gpu"}]}},
            "reservedFor": [{"resource": "pods", "uid": "pod-1"}]}}

    def get(self, path: str) -> dict[str, Any]:
        assert path.endswith("/namespaces/team-a/resourceclaims/train-gpu"), path
        return self._claim


def _servicer(tmp_path: Path, config_entries: list[dict[str, Any]] | None = None,
              kubernetes: dict[str, Any] | None = None) -> tuple[dra_driver.Driver, Preparer, str]:
    host = str(tmp_path / "host")
    build_host(host, HostSpec(nvidia=1))
    config = from_table({"host_root": host, "state_dir": str(tmp_path / "state"), "kubernetes": kubernetes or {}},
                        str(tmp_path / "config.toml"))
    root = Root(host)
    inventory = identified(root, discover(root))
    shown, left = publishable(describe(inventory, root, Xids(), {}), True)
    devices = [d for d, _ in shown]
    checkpoint = str(tmp_path / "plugins" / DRIVER)
    preparer = Preparer(config, _Api(devices[0].name, config_entries), DRIVER, NODE, str(tmp_path / "cdi"),  # type: ignore[arg-type]
                        "/bin/gpuhook-hook", "/bin/gpuhook", checkpoint=checkpoint)
    servicer = dra_driver.Driver(config, preparer, str(tmp_path / "dra.sock"), DRIVER)
    servicer.update({d.name: d for d in devices}, inventory, left)
    return servicer, preparer, checkpoint


def test_prepare_and_unprepare_of_one_claim_at_once_leave_its_spec_and_records_both_or_neither(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two prepares and two unprepares of the same claim, started together through the servicer (as the gRPC
    pool runs them), ROUNDS times: after each round the CDI spec, the record in state_dir and the checkpoint are
    all there or all gone, and every call answered without an error. A record's write takes a few milliseconds
    (a busy node's fsync) and each call starts within a few milliseconds of the others: the window in which an
    unprepare ran whole between a prepare's spec and its record.
    (Without the per-claim lock rounds leave a record without its spec, and two prepares collide on the spec's
    temporary file.) The lock table is empty once no call holds a lock."""
    servicer, preparer, checkpoint = _servicer(tmp_path)
    save = claims.save

    def slow_save(state_dir: str, claim: Any) -> None:
        time.sleep(0.003)
        save(state_dir, claim)

    monkeypatch.setattr(claims, "save", slow_save)
    claim = dra_pb2.Claim(namespace="team-a", uid=UID, name="train-gpu")
    state_dir = str(tmp_path / "state")
    rng = random.Random(43)
    errors: list[str] = []
    kept = 0

    def call(kind: str, start: threading.Barrier, delay: float) -> None:
        start.wait()
        time.sleep(delay)
        if kind == "prepare":
            answer = servicer.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=[claim]), None)
        else:
            answer = servicer.NodeUnprepareResources(dra_pb2.NodeUnprepareResourcesRequest(claims=[claim]), None)
        errors.extend(f"{kind}: {a.error}" for a in answer.claims.values() if a.error)

    for n in range(ROUNDS):
        preparer.unprepare(UID)  # each round from nothing: the prepares must write
        kinds = ["prepare", "unprepare", "prepare", "unprepare"]
        rng.shuffle(kinds)
        start = threading.Barrier(len(kinds))
        threads = [threading.Thread(target=call, args=(k, start, rng.uniform(0, 0.006))) for k in kinds]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        there = (os.path.exists(preparer.spec_path(UID)), claims.load(state_dir, UID) is not None,
                 claims.load(checkpoint, UID) is not None)
        assert there in ((True, True, True), (False, False, False)), (
            f"round {n} ({', '.join(kinds)}): (spec, record, checkpoint) {there}; {errors}")
        assert not errors, errors  # two prepares at once would also race on the spec's temporary file
        kept += there[0]
    assert len(servicer.claims) == 0
    assert 0 <= kept <= ROUNDS


def test_one_claims_lock_keeps_a_second_caller_out_and_others_do_not_wait() -> None:
    """The same uid waits, another uid does not; the table forgets a uid when its last caller lets go."""
    locks = ClaimLocks()
    inside = threading.Event()
    second_in = threading.Event()

    def second() -> None:
        with locks.hold("a"):
            second_in.set()

    with locks.hold("a"):
        inside.set()
        t = threading.Thread(target=second)
        t.start()
        assert not second_in.wait(0.2)  # held out while "a" is held
        with locks.hold("b"):  # another claim: no wait
            assert len(locks) == 2
    t.join(5)
    assert second_in.is_set() and len(locks) == 0


@pytest.mark.parametrize("value", ["1" * 5000, "\uff15\uff10", "\u0663"],
                         ids=["5000 digits", "fullwidth", "arabic-indic"])
def test_a_gpuconfig_number_python_cannot_or_should_not_read_is_the_drivers_own_line(tmp_path: Path,
                                                                                     value: str) -> None:
    """On a node sharing GPUs through MPS (where the driver reads the asked threads itself), a claim's
    mpsActiveThreadPercentage of 5,000 digits or of non-ASCII digits fails NodePrepareResources with gpuhook's line
    naming the claim, the field and the range; nothing is written."""
    entry = {"source": "FromClaim", "opaque": {"driver": DRIVER, "parameters": {
        "apiVersion": "resource.gpuhook.dev/v1alpha1", "kind": "GpuConfig", "mps": True,
        "mpsActiveThreadPercentage": value}}}
    servicer, preparer, checkpoint = _servicer(tmp_path, [entry], {"replicas": 4, "sharing": "mps"})
    claim = dra_pb2.Claim(namespace="team-a", uid=UID, name="train-gpu")
    error = servicer.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=[claim]), None).claims[UID].error
    assert error.startswith("gpuhook: claim team-a/train-gpu, config[0] (from the claim): "
                            "mpsActiveThreadPercentage="), error
    assert "a whole number 1-100 in ASCII digits" in error and "\n" not in error and len(error) < 300, error
    assert not any(p in error for p in ("invalid literal", "Exceeds the limit", "int()")), error
    assert not os.path.exists(preparer.spec_path(UID)) and claims.load(checkpoint, UID) is None
