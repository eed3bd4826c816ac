"""Load with faults: 60 containers started in parallel waves (no request, NVIDIA and AMD injection, shared and
conflicting tuning, exclusive), with SIGKILL at random moments of the shim, runc, the hooks and container inits,
then `gpuhook gc`. Every container that ran saw exactly its GPUs, every refusal was one line (and left config.json
unchanged where the shim refused), and afterwards no tuning is applied, no lease held, the ledger is valid and
state_dir holds only what no container needs. Seeded and bounded in count and time."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .test_tuning_runc import Tuned

SEED = 7
WAVES, PER_WAVE = 6, 10
NV = {"gpuhook.dev/vendor": "nvidia"}
AMD = {"gpuhook.dev/vendor": "amd"}
KINDS: dict[str, tuple[dict[str, str], set[str]]] = {  # annotations, the GPU nodes the container must see
    "plain": ({}, set()),
    "nv0": ({**NV, "gpuhook.dev/gpus": "0"}, {"/dev/nvidia0"}),
    "nv1": ({**NV, "gpuhook.dev/gpus": "1"}, {"/dev/nvidia1"}),
    "amd0": ({**AMD, "gpuhook.dev/gpus": "0"}, {"/dev/dri/renderD128", "/dev/kfd"}),
    "nv0-clock": ({**NV, "gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "1500"}, {"/dev/nvidia0"}),
    "nv0-other-clock": ({**NV, "gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "1200"}, {"/dev/nvidia0"}),
    "amd1-perf": ({**AMD, "gpuhook.dev/gpus": "1", "gpuhook.dev/perf-level": "high"},
                  {"/dev/dri/renderD129", "/dev/kfd"}),
    "nv1-exclusive": ({**NV, "gpuhook.dev/gpus": "1", "gpuhook.dev/exclusive": "true"}, {"/dev/nvidia1"}),
}
SEE = ("for f in /dev/nvidia[0-9]* /dev/kfd /dev/dri/renderD*; do [ -e $f ] && echo $f; done > /results/$ID.tmp; "
       "mv /results/$ID.tmp /results/$ID; sleep 1")
PATTERNS = ("gpuhook-runtime-py", "runc run", "runc init", "gpuhook hook", "gpuhook-createhook", "container init")


def _pids(pattern: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if pattern in cmd and int(d) != os.getpid():
                out.append(int(d))
    return out


def _ours(pid: int, mark: str) -> bool:
    """Only this test's processes: their environment names its config, or they run in its bundles (runc init's
    working directory) or its containers (a container init's root)."""
    try:
        if mark in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace"):
            return True
        return any(os.readlink(f"/proc/{pid}/{link}").startswith(mark) for link in ("cwd", "root"))
    except OSError:
        return False


def _killer(rng: random.Random, stop: threading.Event, killed: list[str], mark: str, cids: list[str]) -> None:
    """Every few milliseconds SIGKILL, now and then, one process of the kinds a start goes through (this test's
    alone); a container's init is killed through runc, by its id."""
    while not stop.is_set():
        time.sleep(rng.uniform(0.002, 0.02))
        pattern = rng.choice(PATTERNS)
        if pattern == "container init":
            if rng.random() < 0.05:
                cid = rng.choice(cids)
                if subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True, check=False).returncode == 0:
                    killed.append(pattern)
            continue
        victims = [p for p in _pids(pattern) if _ours(p, mark)]
        if victims and rng.random() < 0.3:
            try:
                os.kill(rng.choice(victims), signal.SIGKILL)
                killed.append(pattern)
            except OSError:
                continue


def _start(t: Tuned, kind: str, cid: str, results: Path) -> tuple[str, str, subprocess.CompletedProcess[str], bytes]:
    annotations, _ = KINDS[kind]

    def edit(spec: dict[str, Any]) -> None:
        spec["process"]["env"].append(f"ID={cid}")
        spec["mounts"].append({"destination": "/results", "type": "bind", "source": str(results),
                               "options": ["rbind", "rw"]})

    bundle = t.bundle(annotations, ["sh", "-c", SEE], edit)
    before = (bundle / "config.json").read_bytes()
    try:
        r = subprocess.run([conftest.SHIM, "run", "-d", "--bundle", str(bundle), cid], env=t.env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=60, check=False)
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess([], -9, "", "timed out")
    return kind, cid, r, before if (bundle / "config.json").read_bytes() == before else b""


def test_waves_of_containers_with_faults_leave_nothing_applied(tmp_path: Path, base_rootfs: str) -> None:
    rng = random.Random(SEED)
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=2, amd=2, amdsmi=False))
    nvml_before = Path(f"{t.host}/var/lib/gpuhook-sim/nvml").read_text() if Path(
        f"{t.host}/var/lib/gpuhook-sim/nvml").exists() else ""
    amd_dev = Path(f"{t.host}/sys/devices/pci0000:00/0000:81:00.0")
    perf_before = (amd_dev / "power_dpm_force_performance_level").read_text()
    results = tmp_path / "results"
    results.mkdir(mode=0o777)
    results.chmod(0o777)
    killed: list[str] = []
    started: list[str] = []
    problems: list[str] = []
    deadline = time.monotonic() + 600
    for wave in range(WAVES):
        kinds = [rng.choice(list(KINDS)) for _ in range(PER_WAVE)]
        cids = [f"load{wave}-{i}" for i in range(PER_WAVE)]
        stop = threading.Event()
        killer = threading.Thread(target=_killer, args=(rng, stop, killed, str(tmp_path), cids))
        killer.start()
        with ThreadPoolExecutor(max_workers=PER_WAVE) as pool:
            outcomes = list(pool.map(lambda kc: _start(t, kc[0], kc[1], results), zip(kinds, cids, strict=True)))
        time.sleep(1.5)  # the containers write what they see and end
        stop.set()
        killer.join()
        started += cids
        for kind, cid, r, unchanged in outcomes:
            err = r.stderr.strip()
            if r.returncode != 0 and err and "killed" not in err.lower() and r.returncode > 0:
                if "Traceback" in err or "internal error" in err:
                    problems.append(f"{cid} ({kind}): {err[:200]}")
                if err.startswith("gpuhook-runtime:") and not unchanged and "config.json was not changed" not in err:
                    problems.append(f"{cid} ({kind}): refused by the shim but config.json changed")
        for kind, cid, _, _ in outcomes:
            seen = results / cid
            if seen.exists():  # it ran: exactly its GPUs
                got = set(seen.read_text().split())
                want = KINDS[kind][1]
                if got != want:
                    problems.append(f"{cid} ({kind}) saw {sorted(got)}, expected {sorted(want)}")
        for cid in cids:
            t.stop(cid)
            subprocess.run(["runc", "delete", "-f", cid], capture_output=True, check=False)
        assert time.monotonic() < deadline, "the load test ran past its bound"
    assert problems == [], problems[:10]
    gc = t.gpuhook("gc")
    assert "Traceback" not in gc.stderr, gc.stderr
    gc = t.gpuhook("gc")  # a restore that failed the first time (a killed writer's) is retried
    assert gc.returncode == 0, gc.stdout + gc.stderr
    state = json.loads((tmp_path / "state/ledger.json").read_text())
    assert state["settings"] == {} and state["leases"] == {}
    if nvml_before:
        assert Path(f"{t.host}/var/lib/gpuhook-sim/nvml").read_text() == nvml_before
    else:
        nvml = Path(f"{t.host}/var/lib/gpuhook-sim/nvml").read_text().splitlines()
        assert all(line.split()[1:3] == ["0", "0"] for line in nvml), nvml  # clocks unlocked on every GPU
    assert (amd_dev / "power_dpm_force_performance_level").read_text() == perf_before
    assert os.listdir(tmp_path / "state/containers") == []
    leftovers = [str(p.relative_to(tmp_path / "state")) for p in (tmp_path / "state").rglob(".*")]
    assert leftovers == [], leftovers
    ran = len(list(results.iterdir()))
    print(f"LOAD: {len(started)} started, {ran} ran, {len(killed)} kills: {sorted(set(killed))}")
    assert killed, "the fault injector killed nothing"
    assert ran >= len(started) // 4, "too few containers ran for the test to mean anything"
