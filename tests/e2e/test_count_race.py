"""count:N under concurrency: 20 containers asking `gpuhook.dev/gpus=count:1` at once on 4 GPUs, round after round,
through the shim and in hook mode. Exactly 4 start, each with a GPU no other running container has (what each
container sees in its own /dev, read with runc exec), and 16 are refused with one line. When the records of the
GPUs in use were read before the count lock, 5-8 started with GPUs given twice."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpuhook.testing.simulate import HostSpec

from . import conftest
from .tuned import Tuned, _run_detached

ROUNDS = 3
AT_ONCE = 20
GPUS = 4
COUNT1 = {"gpuhook.dev/gpus": "count:1", "gpuhook.dev/vendor": "nvidia"}


def _seen(cid: str) -> set[str]:
    """The NVIDIA GPU nodes the running container sees."""
    for _ in range(5):  # an exec can fail while 19 other containers start or stop beside it: ask again
        done = subprocess.run(["runc", "exec", cid, "ls", "/dev"], capture_output=True, text=True, timeout=30,
                              check=False)
        if done.returncode == 0:
            return {n for n in done.stdout.split() if n.startswith("nvidia") and n[6:].isdigit()}
    raise AssertionError(f"runc exec {cid}: {done.stderr}")


def _records(state: Path) -> dict[str, list[str]]:
    """container -> GPUs, as gpuhook's records have them (for a failure's message)."""
    import json

    return {json.loads(p.read_text())["id"]: json.loads(p.read_text())["gpus"]
            for p in (state / "containers").glob("*.json")}


@pytest.mark.parametrize("mode", ["shim", "hook"])
def test_count_requests_at_once_never_share_a_gpu(tmp_path: Path, base_rootfs: str, mode: str) -> None:
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=GPUS))

    def hooks(spec: dict[str, Any]) -> None:
        hook = {"path": conftest.GPUHOOK, "env": [f"GPUHOOK_CONFIG={t.config}"]}
        spec["hooks"] = {"prestart": [{**hook, "args": ["gpuhook", "hook", "prestart"]}],
                         "poststop": [{**hook, "args": ["gpuhook", "hook", "poststop"]}]}

    runtime = conftest.SHIM if mode == "shim" else "runc"
    started: list[str] = []
    try:
        for r in range(ROUNDS):
            cids = [f"count{r}-{mode}-{i}" for i in range(AT_ONCE)]
            bundles = [t.bundle(COUNT1, ["sleep", "60"], hooks if mode == "hook" else None) for _ in cids]
            with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
                results = list(pool.map(lambda bc: _run_detached(runtime, bc[0], bc[1], t.env),
                                        zip(bundles, cids, strict=True)))
            started += [c for c, res in zip(cids, results, strict=True) if res.returncode == 0]
            up = [c for c, res in zip(cids, results, strict=True) if res.returncode == 0]
            seen = {c: _seen(c) for c in up}
            picks = [ln for ln in (t.tmp / "log").read_text().splitlines() if "count picked" in ln]
            assert len(up) == GPUS, (r, seen, _records(t.tmp / "state"), picks[-AT_ONCE:])
            assert all(len(s) == 1 for s in seen.values()), seen
            assert set().union(*seen.values()) == {f"nvidia{i}" for i in range(GPUS)}, seen  # each GPU once
            for res in results:
                if res.returncode:
                    said = res.stderr.strip().splitlines()
                    assert len(said) == 1 and f"of this host's {GPUS} NVIDIA GPUs are free" in said[0], res.stderr
            for c in up:
                t.stop(c)
    finally:
        for c in started:
            t.stop(c)


def test_the_hook_keeps_the_gpu_the_shim_picked(tmp_path: Path, base_rootfs: str) -> None:
    """A count request with tuning is prepared twice: by the shim, then by its prestart hook (the tuning). A GPU
    freed between the two must not be picked by the hook on top of the shim's (the load test found a container
    seeing two GPUs this way). Here the GPU is freed by a prestart hook of the container's own, run before
    gpuhook's."""
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=2))
    holder, r = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"})
    assert r.returncode == 0, r.stderr
    cid = f"counted-{tmp_path.name[-8:]}"

    def free_gpu0(spec: dict[str, Any]) -> None:
        ends = f"runc kill {holder} KILL; sleep 0.3; runc delete -f {holder}"
        spec["hooks"] = {"prestart": [{"path": "/bin/sh", "args": ["sh", "-c", ends],
                                       "env": [f"PATH={os.environ['PATH']}"]}]}

    bundle = t.bundle({**COUNT1, "gpuhook.dev/clocks": "1400"}, ["sleep", "60"], free_gpu0)
    try:
        with open(bundle / "stderr", "w") as err:  # the container's init keeps its stdio open: a file, not a pipe
            created = subprocess.run([conftest.SHIM, "create", "--bundle", str(bundle), cid], env=t.env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, timeout=60,
                                     check=False)
        assert created.returncode == 0, (bundle / "stderr").read_text()
        assert _seen(cid) == {"nvidia1"}
    finally:
        t.stop(cid)
        t.stop(holder)
