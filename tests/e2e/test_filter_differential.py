"""gpuhook's cgroup v2 device filter against the runtime's own, differentially: random `linux.resources.devices`
lists (seeded; GPUHOOK_FILTER_SEED and GPUHOOK_FILTER_LISTS change them), each given to real runc and real crun (the
runtime's filter on a created container's cgroup) and compiled by gpuhook for that runtime (on a scratch cgroup),
probed on 33 nodes for read, write and mknod (filter_diff.py). For every list the runtime accepts, gpuhook must
allow and deny exactly the same. What once differed was found this way: for runc a major of -2 taken as a wildcard
in the emulation and numbers past 2^31 refused; for crun its whole model (no emulation, first match in reverse
order, "a" with numbers, "" as char, truncated numbers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CGROUP2, RUNTIMES, runtime_env

SEED = int(os.environ.get("GPUHOOK_FILTER_SEED", "20261201"))
LISTS = int(os.environ.get("GPUHOOK_FILTER_LISTS", "120"))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_filter_is_the_runtimes_for_every_list_it_accepts(tmp_path: Path, base_rootfs: str, runtime: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([*CGROUP2, sys.executable, str(Path(__file__).parent / "filter_diff.py"), str(SEED),
                           str(LISTS), str(work), base_rootfs, runtime], capture_output=True, text=True, timeout=900,
                          check=False, env={**os.environ, **runtime_env(runtime)})
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(results) == LISTS
    accepted = [r for r in results if r["runc"] != "refused"]
    assert len(accepted) > LISTS * 0.8  # the lists mean something: most are ones the runtime runs
    differ = [r for r in accepted if r["gpuhook"] != r["runc"]]  # "runc": the runtime under test's verdicts
    shown = "\n".join(json.dumps({"rules": r["rules"], runtime: r["runc"], "gpuhook": r["gpuhook"]})
                      for r in differ[:3])
    assert not differ, f"gpuhook's filter differs from {runtime}'s for {len(differ)} lists (seed {SEED}):\n{shown}"
