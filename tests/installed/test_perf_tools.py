"""The measuring tools of tests/perf, on the product as install.sh installs it: they run, and measure what they say.
Not timings (never asserted on): that each row's runtime call reached runc, through the path the row names."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import Installs

REPO = Path(__file__).parents[2]


def _table(text: str) -> dict[str, list[float]]:
    """The rows of handoff.py's table: name -> [until runc runs, runc's create, create in all]."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[1].replace(".", "").isdigit():
            rows[cells[0]] = [float(c) for c in cells[1:]]
    return rows


def test_handoff_splits_create_where_runc_starts(installs: Installs) -> None:
    bindir = installs["native"][0]
    done = subprocess.run([sys.executable, str(REPO / "tests/perf/handoff.py"), "--installed", str(bindir),
                           "--rounds", "2"], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _table(done.stdout)
    assert set(rows) == {"gpuhook direct", "gpuhook through the warm helper", "runc on gpuhook's spec (with its hook)",
                         *(f"{ms} ms of CPU, then runc on that spec" for ms in (2, 5, 10, 20))}, done.stdout
    alone = rows["runc on gpuhook's spec (with its hook)"][0]
    # each prelude spun at least its time before runc ran (the note is taken after it, by the runtime itself)
    for ms in (2, 5, 10, 20):
        assert rows[f"{ms} ms of CPU, then runc on that spec"][0] >= ms
    # gpuhook's rows reached runc only after gpuhook's own work: directly a Python process (an interpreter and
    # the GPU path's imports), through the helper a worker's call, well short of that (a helper that did not
    # serve would leave the direct path's time) and still more than the note alone
    direct, warm = rows["gpuhook direct"][0], rows["gpuhook through the warm helper"][0]
    assert alone < warm < 0.7 * direct, done.stdout


def test_bench_splits_each_gpu_row_by_what_runc_runs(installs: Installs) -> None:
    """bench.py's split (#27: where each row's time goes): its "hooks kept" row ran gpuhook's createContainer
    hook on its own container (the linker cache of that container's root names the injected libcuda), its floor
    rows ran none, and the split has a line for each NVIDIA 1-GPU mode, direct and warm."""
    bindir = installs["native"][0]
    done = subprocess.run([sys.executable, str(REPO / "tests/perf/bench.py"), "--installed", str(bindir),
                           "--rounds", "2", "--only", "nvidia 1 of 8", "--keep"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    work = Path(done.stdout.rsplit("work dir kept: ", 1)[1].strip())
    try:
        split = done.stdout.split("where the time goes", 1)[1]
        named = {line.split("|")[1].strip() for line in split.splitlines()
                 if line.startswith("| ") and not line.startswith("| row |")}
        one = "nvidia 1 of 8 GPUs"
        modes = (f"gpuhook {one}", f"hook mode {one}", f"gpuhook {one} + clocks=1500")
        assert named == {f"{prefix}{mode}" for prefix in ("", "warm: ") for mode in modes}, split
        kept, bare = [], []
        for config in sorted(work.glob("floor-*/config.json")):
            hooks = json.loads(config.read_bytes()).get("hooks") or {}
            cache = config.parent / "rootfs/etc/ld.so.cache"
            (kept if hooks else bare).append(cache.read_bytes() if cache.exists() else b"")
        assert len(kept) == 1 and len(bare) == 2, (kept, bare)  # injection's hooks kept; its floor, hook mode's
        assert b"libcuda.so.1" in kept[0] and bare == [b"", b""]
    finally:
        shutil.rmtree(work, ignore_errors=True)
