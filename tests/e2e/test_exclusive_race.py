"""Exclusive means exclusive under concurrency: an exclusive container and plain containers started at the same
moment on one GPU, over 100 trials: never an exclusive holder running beside another container on its GPU."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .tuned import Tuned, _run_detached

TRIALS = 100
NV0 = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}


def _running(cid: str) -> bool:
    state = subprocess.run(["runc", "state", cid], capture_output=True, text=True, check=False)
    return state.returncode == 0 and '"status": "running"' in state.stdout


def test_an_exclusive_holder_never_runs_beside_another_container(tmp_path: Path, base_rootfs: str) -> None:
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=1))
    wanted = [{**NV0, "gpuhook.dev/exclusive": "true"}, NV0, NV0]
    bundles = [[t.bundle(a, ["sleep", "30"]) for a in wanted] for _ in range(TRIALS)]
    outcomes = {"exclusive alone": 0, "exclusive refused": 0}
    try:
        for trial, group in enumerate(bundles):
            cids = [f"race{trial}-{i}" for i in range(len(group))]
            with ThreadPoolExecutor(max_workers=len(group)) as pool:
                results = list(pool.map(lambda bc: _run_detached(conftest.SHIM, bc[0], bc[1], t.env),
                                        zip(group, cids, strict=True)))
            running = [_running(c) for c in cids]
            assert not (running[0] and any(running[1:])), (trial, [r.stderr for r in results])
            for r, up in zip(results, running, strict=True):  # each refusal is one line, each start is running
                assert up == (r.returncode == 0), r.stderr
                if r.returncode:
                    assert len(r.stderr.strip().splitlines()) == 1 and "exclusive" in r.stderr, r.stderr
            outcomes["exclusive alone" if running[0] else "exclusive refused"] += 1
            for c in cids:
                t.stop(c)
        assert sum(outcomes.values()) == TRIALS
    finally:
        for trial in range(TRIALS):
            for i in range(len(wanted)):
                t.stop(f"race{trial}-{i}")
    assert t.gpuhook("gc").returncode == 0
    assert "no GPU tuning is held" in t.gpuhook("status").stdout


def test_a_container_slow_to_create_is_not_taken_for_gone(tmp_path: Path, base_rootfs: str) -> None:
    """Its record is on disk before runc has written any state: an exclusive request on its GPU meanwhile is
    refused, and a gc meanwhile keeps the record."""
    import os
    import threading
    import time

    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=1))
    slow = tmp_path / "slow-runc"
    slow.write_text('#!/bin/sh\nsleep 2\nexec runc "$@"\n')
    slow.chmod(0o755)
    slow_config = tmp_path / "slow.toml"
    slow_config.write_text(t.config.read_text() + f'runtime = "{slow}"\n')
    plain = t.bundle(NV0, ["sleep", "30"])
    result: list[subprocess.CompletedProcess[str]] = []
    starter = threading.Thread(target=lambda: result.append(_run_detached(
        conftest.SHIM, plain, "slow-plain", {**t.env, "GPUHOOK_CONFIG": str(slow_config)})))
    starter.start()
    try:
        time.sleep(0.8)  # the slow container's shim has recorded it; runc has not started
        assert t.gpuhook("gc").returncode == 0
        assert any(n.startswith("slow-plain@") for n in os.listdir(tmp_path / "state/containers"))
        refused = _run_detached(conftest.SHIM, t.bundle({**NV0, "gpuhook.dev/exclusive": "true"}, ["sleep", "30"]),
                                "eager-exclusive", t.env)
        assert refused.returncode == 1 and "in use by container slow-plain" in refused.stderr, refused.stderr
        starter.join(timeout=30)
        assert result and result[0].returncode == 0, result
        assert _running("slow-plain")
    finally:
        starter.join(timeout=30)
        t.stop("slow-plain")
        t.stop("eager-exclusive")


def _device_only(spec: dict[str, object]) -> None:
    """GPU 0 as `--device /dev/nvidia0` gives it: the node and its cgroup rule, no gpuhook marker at all."""
    spec["linux"]["devices"] = [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0,  # type: ignore[index]
                                 "fileMode": 0o666, "uid": 0, "gid": 0}]
    spec["linux"]["resources"]["devices"].append(  # type: ignore[index]
        {"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"})


def test_a_lease_holds_against_a_container_with_only_the_gpus_device_node(tmp_path: Path, base_rootfs: str) -> None:
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=2))
    holder, r = t.start({**NV0, "gpuhook.dev/exclusive": "true"})
    assert r.returncode == 0, r.stderr
    plain = t.bundle({}, ["sleep", "30"], _device_only)
    before = (plain / "config.json").read_bytes()
    refused = _run_detached(conftest.SHIM, plain, "device-only", t.env)
    assert refused.returncode == 1 and f"held exclusively by container {holder}" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and (plain / "config.json").read_bytes() == before
    other = t.bundle({}, ["sleep", "30"], lambda s: (_device_only(s), s["linux"]["devices"][0].update(  # type: ignore[index]
        path="/dev/nvidia1", minor=1), s["linux"]["resources"]["devices"][-1].update(minor=1)))  # type: ignore[index]
    assert _run_detached(conftest.SHIM, other, "device-other", t.env).returncode == 0  # another GPU: fine
    t.stop("device-other")
    t.stop(holder)


def test_an_exclusive_request_is_refused_beside_a_device_only_container(tmp_path: Path, base_rootfs: str) -> None:
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=1))
    plain = t.bundle({}, ["sleep", "30"], _device_only)
    assert _run_detached(conftest.SHIM, plain, "device-first", t.env).returncode == 0
    try:
        refused = _run_detached(conftest.SHIM, t.bundle({**NV0, "gpuhook.dev/exclusive": "true"}, ["sleep", "30"]),
                                "exclusive-second", t.env)
        assert refused.returncode == 1 and "in use by container device-first" in refused.stderr, refused.stderr
    finally:
        t.stop("device-first")
        t.stop("exclusive-second")
