"""`gpuhook upgrade plan` and `drain` on a single host: the GPU containers running through gpuhook's runtime in front
of real runc are named, with their GPUs and driver, and a drain (no cluster here) refuses while they run."""

from __future__ import annotations

import json
from pathlib import Path

from gpuhook.testing.simulate import HostSpec

from .tuned import Tuned


def test_the_plan_names_the_running_gpu_containers_and_a_drain_waits_for_them(tmp_path: Path,
                                                                             base_rootfs: str) -> None:
    t = Tuned(tmp_path, base_rootfs, HostSpec(nvidia=2, amd=1))
    try:
        first, r1 = t.start({"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "nvidia"})
        second, r2 = t.start({"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "amd"})
        plain, r3 = t.start({})  # no GPU: not named
        assert r1.returncode == r2.returncode == r3.returncode == 0, (r1.stderr, r2.stderr, r3.stderr)
        done = t.gpuhook("upgrade", "plan", "--json")
        assert done.returncode == 0, done.stderr
        plan = json.loads(done.stdout)
        seen = {c["id"]: (c["gpus"], c["drivers"]) for c in plan["containers"]}
        assert seen == {first: (["GPU-00000001-5a1e-4000-8000-0000d00d0001"], ["nvidia 550.54.15"]),
                        second: (["0x5a1e000000000000"], ["amd 6.7.0"])}
        assert plan["drivers"] == {"nvidia": "550.54.15", "amd": "6.7.0"} and plan["node"] is None
        text = t.gpuhook("upgrade", "plan").stdout
        assert first in text and second in text and plain not in text
        refused = t.gpuhook("upgrade", "drain")
        assert refused.returncode == 1 and "stop the containers and processes above" in refused.stderr
        t.stop(first)
        t.stop(second)
        t.started = [plain]
        assert json.loads(t.gpuhook("upgrade", "plan", "--json").stdout)["containers"] == []
        assert t.gpuhook("upgrade", "drain").returncode == 0
    finally:
        for cid in t.started:
            t.stop(cid)
