"""gpuhook's cgroup v2 device filter against runc's own, differentially: random `linux.resources.devices` lists
(seeded; GPUHOOK_FILTER_SEED and GPUHOOK_FILTER_LISTS change them), each given to real runc (its filter on a real
container's cgroup) and compiled by gpuhook (on a scratch cgroup), probed on 33 nodes for read, write and mknod
(filter_diff.py). For every list runc accepts, gpuhook must allow and deny exactly the same; the cases that once
differed (a major of -2 as a wildcard, numbers past 2^31 refused) were found this way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import CGROUP2

SEED = int(os.environ.get("GPUHOOK_FILTER_SEED", "20261201"))
LISTS = int(os.environ.get("GPUHOOK_FILTER_LISTS", "150"))


def test_the_filter_is_runcs_for_every_list_runc_accepts(tmp_path: Path, base_rootfs: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([*CGROUP2, sys.executable, str(Path(__file__).parent / "filter_diff.py"), str(SEED),
                           str(LISTS), str(work), base_rootfs], capture_output=True, text=True, timeout=900,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == LISTS
    accepted = [r for r in results if r["runc"] != "refused"]
    assert len(accepted) > LISTS * 0.8  # the lists mean something: most are ones runc runs
    differ = [r for r in accepted if r["gpuhook"] != r["runc"]]
    shown = "\n".join(json.dumps({"rules": r["rules"], "runc": r["runc"], "gpuhook": r["gpuhook"]}) for r in differ[:3])
    assert not differ, f"gpuhook's filter differs from runc's for {len(differ)} lists (seed {SEED}):\n{shown}"
