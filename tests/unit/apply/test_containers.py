from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from gpuhook.apply import containers
from gpuhook.host.processes import start_time


def test_records_of_gone_containers_are_dropped(tmp_path: Path) -> None:
    runtime = tmp_path / "runc"
    (runtime / "alive").mkdir(parents=True)
    (runtime / "alive/state.json").write_text("{}")
    containers.save(str(tmp_path), containers.ContainerRecord("alive", (("nvidia", "535"),), str(runtime)))
    containers.save(str(tmp_path), containers.ContainerRecord("gone", (("nvidia", "535"),), str(runtime)))
    me = os.getpid()
    containers.save(str(tmp_path), containers.ContainerRecord("hooked", (), "", me, start_time(me)))
    containers.save(str(tmp_path), containers.ContainerRecord("reused-pid", (), "", me, "1"))
    assert [r.id for r in containers.live_records(str(tmp_path))] == ["alive", "hooked"]
    assert sorted(os.listdir(tmp_path / "containers")) == ["alive.json", "hooked.json"]


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen(["true"])
    for _ in range(100):  # exited but not reaped yet: a zombie
        if Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.01)
    assert start_time(child.pid) == ""
    child.wait()
    assert start_time(os.getpid()) != ""
