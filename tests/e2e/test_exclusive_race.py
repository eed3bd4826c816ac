"""Exclusive means exclusive under concurrency: an exclusive container and plain containers started at the same
moment on one GPU, over 100 trials: never an exclusive holder running beside another container on its GPU."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .test_tuning_runc import Tuned, _run_detached

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
