"""Load with faults: waves of containers started in parallel (no request, NVIDIA and AMD injection, `count:1`,
shared and conflicting tuning, exclusive), with SIGKILLs at random moments of the shim, runc, the hooks, the
containers' inits and, on the warm path, the helper's workers and the helper itself (restarted as a service manager
would), through starts and deletes alike; then `gpuhook gc`. Run on the direct path and on the warm path.

What must hold: every container that ran saw exactly its GPUs; no two `count:1` containers alive at the same time
were given the same GPU (their lifetimes as they wrote them from inside, a kill's moment as the killer noted it);
every refusal was one line (and left config.json unchanged where the shim refused); and after gc the GPUs' own
state (the NVML stub's device state, each AMD GPU's sysfs) is what it was before the load, no lease is held, the
ledger is valid and state_dir holds only what no container needs. Seeded and bounded in count and time."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .test_warm import Daemon
from .tuned import Tuned

SEED = int(os.environ.get("GPUHOOK_LOAD_SEED", "7"))  # another seed: GPUHOOK_LOAD_SEED
WAVES, PER_WAVE = 12, 12
NV = {"gpuhook.dev/vendor": "nvidia"}
AMD = {"gpuhook.dev/vendor": "amd"}
COUNT = {**NV, "gpuhook.dev/gpus": "count:1"}
KINDS: dict[str, tuple[dict[str, str], set[str] | None]] = {  # annotations, the GPU nodes it must see (None: count)
    "plain": ({}, set()),
    "nv0": ({**NV, "gpuhook.dev/gpus": "0"}, {"/dev/nvidia0"}),
    "nv1": ({**NV, "gpuhook.dev/gpus": "1"}, {"/dev/nvidia1"}),
    "amd0": ({**AMD, "gpuhook.dev/gpus": "0"}, {"/dev/dri/renderD128", "/dev/kfd"}),
    "nv0-clock": ({**NV, "gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "1500"}, {"/dev/nvidia0"}),
    "nv0-other-clock": ({**NV, "gpuhook.dev/gpus": "0", "gpuhook.dev/clocks": "1200"}, {"/dev/nvidia0"}),
    "amd1-perf": ({**AMD, "gpuhook.dev/gpus": "1", "gpuhook.dev/perf-level": "high"},
                  {"/dev/dri/renderD129", "/dev/kfd"}),
    "nv1-exclusive": ({**NV, "gpuhook.dev/gpus": "1", "gpuhook.dev/exclusive": "true"}, {"/dev/nvidia1"}),
    "count": (COUNT, None),
    "count-clock": ({**COUNT, "gpuhook.dev/clocks": "1400"}, None),
}
# what the container sees, with its lifetime in the kernel's clock (/proc/uptime, the same inside and out)
SEE = ("up() { cut -d' ' -f1 /proc/uptime; }; echo \"start $(up)\" > /results/$ID.tmp; "
       "for f in /dev/nvidia[0-9]* /dev/kfd /dev/dri/renderD*; do [ -e $f ] && echo $f; done >> /results/$ID.tmp; "
       "mv /results/$ID.tmp /results/$ID; sleep 1; echo \"end $(up)\" >> /results/$ID")
PATTERNS = ("gpuhook-runtime", "runc run", "runc init", "runc delete", "gpuhook hook", "gpuhook-hook",
            "gpuhook-createhook", "gpuhook warm")
KILLS_AT_LEAST = 80  # per run (about 110-130 direct, 160-220 warm)


def _uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def _processes() -> list[tuple[int, str]]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out.append((int(d), cmd))
    return out


def _ours(pid: int, mark: str) -> bool:
    """Only this test's processes: their environment names its config or socket, or they run in its bundles (runc
    init's working directory) or its containers (a container init's root)."""
    try:
        if mark in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace"):
            return True
        return any(os.readlink(f"/proc/{pid}/{link}").startswith(mark) for link in ("cwd", "root"))
    except OSError:
        return False


class Killer(threading.Thread):
    """Each of this test's processes of the kinds a start or a delete goes through is, when first seen, marked for
    SIGKILL with probability RATE at a random moment of its next 60 ms; in one wave of two, the helper itself at a
    random moment of the starts (`Keeper` starts it again); now and then a container's init is killed through
    runc, its moment noted."""

    RATE = 0.3

    def __init__(self, rng: random.Random, mark: str, cids: list[str], daemon: Daemon | None) -> None:
        super().__init__()
        self.rng, self.mark, self.cids, self.daemon = rng, mark, cids, daemon
        self.stop = threading.Event()
        self.killed: Counter[str] = Counter()
        self.inits: dict[str, float] = {}  # container -> when its init was killed
        self.seen: set[tuple[int, str]] = set()

    def run(self) -> None:
        due: list[tuple[float, int, str]] = []
        if self.daemon and self.rng.random() < 0.5:
            due.append((time.monotonic() + self.rng.uniform(0.1, 1.0), self.daemon.proc.pid, "warm helper"))
        while not self.stop.is_set():
            time.sleep(0.003)
            now = time.monotonic()
            if self.rng.random() < 0.005:
                cid = self.rng.choice(self.cids)
                at = _uptime()
                if subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True, check=False).returncode == 0:
                    self.inits.setdefault(cid, at)
                    self.killed["container init"] += 1
            for pid, cmd in _processes():
                pattern = next((p for p in PATTERNS if p in cmd), None)
                if pattern is None or (pid, cmd) in self.seen or not self._mine(pid, pattern):
                    continue
                self.seen.add((pid, cmd))
                if pattern == "gpuhook warm":
                    if pid == self.daemon.proc.pid:  # type: ignore[union-attr]
                        continue
                    pattern = "warm worker"
                if self.rng.random() < self.RATE:
                    due.append((now + self.rng.uniform(0, 0.06), pid, pattern))
            for item in [d for d in due if d[0] <= now]:
                due.remove(item)
                with contextlib.suppress(OSError):
                    os.kill(item[1], signal.SIGKILL)
                    self.killed[item[2]] += 1

    def _mine(self, pid: int, pattern: str) -> bool:
        if pattern == "gpuhook warm":
            try:
                return self.daemon is not None and os.getpgid(pid) == self.daemon.proc.pid
            except ProcessLookupError:  # it ended since /proc was listed
                return False
        return _ours(pid, self.mark)


class Keeper(threading.Thread):
    """Starts the helper again when it died, as systemd's Restart= does."""

    def __init__(self, daemon: Daemon) -> None:
        super().__init__()
        self.daemon = daemon
        self.stop = threading.Event()
        self.restarts = 0

    def run(self) -> None:
        while not self.stop.wait(0.05):
            if self.daemon.proc.poll() is not None:
                self.daemon.proc.wait()
                with contextlib.suppress(RuntimeError):
                    self.daemon.__init__(Path(conftest.GPUHOOK).parent, self.daemon.sock, self.daemon.said)
                    self.restarts += 1


def _start(t: Tuned, env: dict[str, str], kind: str, cid: str, results: Path) -> tuple[str, str, Any, bool]:
    annotations, _ = KINDS[kind]

    def edit(spec: dict[str, Any]) -> None:
        spec["process"]["env"].append(f"ID={cid}")
        spec["mounts"].append({"destination": "/results", "type": "bind", "source": str(results),
                               "options": ["rbind", "rw"]})

    bundle = t.bundle(annotations, ["sh", "-c", SEE], edit)
    before = (bundle / "config.json").read_bytes()
    try:
        r = subprocess.run([conftest.SHIM, "run", "-d", "--bundle", str(bundle), cid], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=60, check=False)
    except subprocess.TimeoutExpired:
        r = subprocess.CompletedProcess([], -9, "", "timed out")
    return kind, cid, r, (bundle / "config.json").read_bytes() == before


def _delete(env: dict[str, str], cid: str) -> float:
    """As an engine ends a container: kill its init, wait for it to stop, the runtime's delete. When it began."""
    began = _uptime()
    subprocess.run(["runc", "kill", cid, "KILL"], capture_output=True, check=False)
    for _ in range(50):
        state = subprocess.run(["runc", "state", cid], capture_output=True, text=True, check=False)
        if state.returncode != 0 or '"status": "stopped"' in state.stdout:
            break
        time.sleep(0.05)
    subprocess.run([conftest.SHIM, "delete", "--force", cid], env=env, capture_output=True, timeout=60, check=False)
    subprocess.run(["runc", "delete", "-f", cid], capture_output=True, check=False)  # where the shim was killed
    return began


def _device_state(t: Tuned) -> dict[str, str]:
    """What the GPUs themselves hold: the NVML stub's device state and every file of each AMD GPU's sysfs."""
    sim = Path(f"{t.host}/var/lib/gpuhook-sim/nvml")
    state = {"nvml": sim.read_text() if sim.exists() else ""}
    for dev in sorted(Path(f"{t.host}/sys/bus/pci/drivers/amdgpu").glob("0000:*")):
        for f in sorted(dev.resolve().rglob("*")):
            if f.is_file() and not f.is_symlink():
                state[str(f)] = f.read_text(errors="replace")
    return state


def _unlocked(nvml: str) -> bool:
    return all(line.split()[1:3] == ["0", "0"] for line in nvml.splitlines())


def _count_overlaps(results: Path, kinds: dict[str, str], ends: dict[str, float]) -> list[str]:
    """Pairs of count containers that held one GPU at the same time, from what they wrote (a container killed
    before it wrote its end ended when it was killed: `ends`)."""
    lives: list[tuple[str, str, float, float]] = []
    for cid, kind in kinds.items():
        seen = results / cid
        if KINDS[kind][1] is None and seen.exists():
            lines = seen.read_text().splitlines()
            start = float(lines[0].split()[1])
            written = [float(ln.split()[1]) for ln in lines if ln.startswith("end ")]
            end = min([*written, ends[cid]])
            lives += [(cid, gpu, start, end) for gpu in lines[1:] if gpu.startswith("/dev/nvidia")]
    return [f"{a} and {b} both had {ga} ({sa:.2f}-{ea:.2f}, {sb:.2f}-{eb:.2f})"
            for i, (a, ga, sa, ea) in enumerate(lives) for (b, gb, sb, eb) in lives[i + 1:]
            if ga == gb and sa < eb and sb < ea]


@pytest.mark.parametrize("path", ["direct", "warm"])
def test_waves_of_containers_with_faults_leave_nothing_applied(tmp_path: Path, base_rootfs: str, path: str) -> None:
    rng = random.Random(f"{SEED}-{path}")
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=4, amd=2, amdsmi=False))
    env = dict(t.env)
    daemon = keeper = None
    if path == "warm":
        env["GPUHOOK_WARM_SOCKET"] = str(tmp_path / "run/warm.sock")
        daemon = Daemon(Path(conftest.GPUHOOK).parent, tmp_path / "run/warm.sock", tmp_path / "daemon.out")
        keeper = Keeper(daemon)
        keeper.start()
    before = _device_state(t)
    results = tmp_path / "results"
    results.mkdir(mode=0o777)
    results.chmod(0o777)
    killed: Counter[str] = Counter()
    kinds: dict[str, str] = {}
    inits: dict[str, float] = {}  # container -> when its init was first killed
    problems: list[str] = []
    deadline = time.monotonic() + 600
    try:
        for wave in range(WAVES):
            cids = [f"load{wave}-{i}" for i in range(PER_WAVE)]
            kinds.update({cid: rng.choice([*KINDS, "count", "count-clock"]) for cid in cids})  # counts twice as often
            killer = Killer(rng, str(tmp_path), cids, daemon)
            killer.start()
            with ThreadPoolExecutor(max_workers=PER_WAVE) as pool:
                outcomes = list(pool.map(lambda c: _start(t, env, kinds[c], c, results), cids))
                time.sleep(1.5)  # the containers write what they see and end
                ended = dict(zip(cids, pool.map(lambda c: _delete(env, c), cids), strict=True))
            killer.stop.set()
            killer.join()
            killed.update(killer.killed)
            inits.update({c: min(killer.inits.get(c, at), at) for c, at in ended.items()})
            for kind, cid, r, unchanged in outcomes:
                err = r.stderr.strip()
                if r.returncode > 0 and err and "killed" not in err.lower():
                    if "Traceback" in err or "internal error" in err:
                        problems.append(f"{cid} ({kind}): {err[:200]}")
                    if (err.startswith("gpuhook-runtime:") and not unchanged
                            and "config.json was not changed" not in err):
                        problems.append(f"{cid} ({kind}): refused by the shim but config.json changed: {err[:300]}")
                seen = results / cid
                if seen.exists():  # it ran: exactly its GPUs
                    got = {ln for ln in seen.read_text().splitlines() if ln.startswith("/dev/")}
                    want = KINDS[kind][1]
                    if want is None and not (len(got) == 1 and next(iter(got)).startswith("/dev/nvidia")):
                        problems.append(f"{cid} ({kind}) saw {sorted(got)}, expected one NVIDIA GPU")
                    elif want is not None and got != want:
                        problems.append(f"{cid} ({kind}) saw {sorted(got)}, expected {sorted(want)}")
            assert time.monotonic() < deadline, "the load test ran past its bound"
    finally:
        if keeper:
            keeper.stop.set()
            keeper.join()
        if daemon:
            daemon.stop()
    problems += _count_overlaps(results, kinds, inits)
    assert problems == [], problems[:10]
    for _ in range(2):  # a restore that failed the first time (a killed writer's) is retried
        gc = t.gpuhook("gc")
        assert "Traceback" not in gc.stderr, gc.stderr
    assert gc.returncode == 0, gc.stdout + gc.stderr
    ledger = json.loads((tmp_path / "state/ledger.json").read_text())
    assert ledger["settings"] == {} and ledger["leases"] == {}
    after = _device_state(t)
    if not before["nvml"]:  # the stub writes its state on the first change: every clock unlocked again
        assert _unlocked(after.pop("nvml")), after
        before.pop("nvml")
    assert after == before, {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
    assert os.listdir(tmp_path / "state/containers") == []
    leftovers = [str(p.relative_to(tmp_path / "state")) for p in (tmp_path / "state").rglob(".*")]
    assert leftovers == [], leftovers
    ran = len(list(results.iterdir()))
    counted = sum(1 for c, k in kinds.items() if KINDS[k][1] is None and (results / c).exists())
    print(f"LOAD {path}: {len(kinds)} started, {ran} ran ({counted} count:1), {sum(killed.values())} kills: "
          f"{dict(killed)}" + (f", helper restarted {keeper.restarts}x" if keeper else ""))
    assert sum(killed.values()) >= KILLS_AT_LEAST, f"the fault injector killed too little: {dict(killed)}"
    assert ran >= len(kinds) // 5, "too few containers ran for the test to mean anything"
    assert counted >= 5, "too few count:1 containers ran for the race to be tried"
    if path == "warm":
        assert killed["warm worker"] and keeper and keeper.restarts, (dict(killed), keeper and keeper.restarts)
