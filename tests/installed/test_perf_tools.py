"""The measuring tools of tests/perf, on the product as install.sh installs it: they run, and measure what they say.
Not timings (never asserted on): that each row's runtime call reached runc, through the path the row names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    """bench.py's split (#27: where each row's time goes): its "hooks kept" row keeps gpuhook's hooks and its floor
    rows have none, the injection's floors run what its container got (its nodes, and the root as gpuhook left it:
    the linker cache names the injected libcuda), and the split has a line for each NVIDIA 1-GPU mode, direct and
    warm."""
    bindir = installs["native"][0]
    done = subprocess.run([sys.executable, str(REPO / "tests/perf/bench.py"), "--installed", str(bindir),
                           "--rounds", "2", "--only", "nvidia 1 of 8", "--keep"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    work = Path(done.stdout.rsplit("work dir kept: ", 1)[1].strip())
    try:
        split = done.stdout.split("where the time goes", 1)[1]
        named = {row[0] for row in _rows(done.stdout, "where the time goes")}
        one = "nvidia 1 of 8 GPUs"
        modes = (f"gpuhook {one}", f"hook mode {one}", f"gpuhook {one} + clocks=1500")
        assert named == {f"{prefix}{mode}" for prefix in ("", "warm: ") for mode in modes}, split
        kept: list[str] = []
        bare: list[str] = []
        injected: list[bytes] = []
        for config in sorted(work.glob("floor-*/config.json")):
            spec = json.loads(config.read_bytes())
            (kept if spec.get("hooks") else bare).append(config.parent.name)
            if any(d["path"] == "/dev/nvidia0" for d in spec["linux"].get("devices") or []):  # not hook mode's
                cache = config.parent / "rootfs/etc/ld.so.cache"
                injected.append(cache.read_bytes() if cache.exists() else b"")
        assert len(kept) == 1 and len(bare) == 2, (kept, bare)  # injection's hooks kept; its floor, hook mode's
        # the injection's floors run what its container got: the root as gpuhook left it, its cache naming libcuda
        assert len(injected) == 2 and all(b"libcuda.so.1" in cache for cache in injected), injected
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _components() -> Path:
    """tools/components' binaries (containerd 2, crictl, NVIDIA's toolkit; built once per machine); skipped without
    Go outside CI."""
    if shutil.which("go") is None and not os.environ.get("CI"):
        pytest.skip("tools/components are built with Go, which is not installed")
    done = subprocess.run(["bash", str(REPO / "tools/components/build.sh")], capture_output=True, text=True,
                          timeout=3600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip())


def _rows(text: str, after: str) -> list[list[str]]:
    """The cells of a markdown table's rows in `text`, from the first table after the line beginning `after`."""
    rows, seen = [], False
    for line in text.split(after, 1)[1].splitlines()[1:]:
        if line.startswith("| ") and not line.startswith(("| variant |", "| target |", "| row |")):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
            seen = True
        elif seen and not line.startswith("|"):
            break
    return rows


def test_bench_one_interleaved_run_carries_every_row_and_the_cdi_path(installs: Installs) -> None:
    """One run of bench.py (#46 items 4-6): runc, the floors, gpuhook's warm, direct, hook-mode and clocks rows,
    the CDI path through containerd 2's CRI and Podman (each engine with its no-device row; each row's first
    container checked that it sees its GPU, or none), and NVIDIA's runtime on gpuhook's spec and on its own; the
    "#46 targets" table names each target's rows in ms over their floors. Rows only, never timings."""
    bindir, peers = installs["native"][0], _components()
    done = subprocess.run([sys.executable, str(REPO / "tests/perf/bench.py"), "--installed", str(bindir),
                           "--rounds", "2", "--scale", "1,8", "--cdi", "--peers", str(peers)],
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dropped" not in done.stdout, done.stdout
    names = {row[0] for row in _rows(done.stdout, "create, start, wait")}
    one = "nvidia 1 of 8 GPUs"
    wanted = {"runc (baseline)", f"floor, runc on gpuhook's spec: {one}", f"warm: gpuhook {one}", f"gpuhook {one}",
              f"warm: hook mode {one}", f"warm: gpuhook {one} + clocks=1500",
              *(f"NVIDIA's runtime (CDI) on {spec} spec, 1 of 8 GPUs" for spec in ("gpuhook's", "NVIDIA's")),
              *(f"CDI: containerd 2 (CRI){s}" for s in (", no device", ", nvidia.com/gpu=0", ", amd.com/gpu=0")),
              *(f"CDI: Podman run --rm{s}" for s in (", no device", " --device nvidia.com/gpu=0",
                                                     " --device amd.com/gpu=0"))}
    assert wanted <= names, sorted(wanted - names)
    targets = _rows(done.stdout, "#46 targets")
    kinds = {(row[0], row[3]) for row in targets}
    assert kinds == {("warm injection", "3"), ("hook mode (warm)", "5"), ("clocks over injection (warm)", "8"),
                     ("CDI path over the engine's no device", "1"), ("direct injection", "15"),
                     ("peer: NVIDIA's runtime", "")}, targets
    assert len([row for row in targets if row[0].startswith("CDI")]) == 4, targets
    assert all(row[4] in ("met", "missed") for row in targets if row[3]), targets
