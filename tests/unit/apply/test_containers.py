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


def test_state_that_is_not_roots_alone_is_refused(tmp_path: Path) -> None:
    import pytest

    from gpuhook.apply import state_dir
    from gpuhook.errors import StateError

    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    os.symlink(tmp_path / "elsewhere", tmp_path / "link")
    (tmp_path / "elsewhere").mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 1000, 1000)
    for bad, says in ((loose, "mode 777"), (tmp_path / "link", "symbolic link"), (theirs, "uid 1000")):
        with pytest.raises(StateError, match=says):
            containers.save(str(bad), containers.ContainerRecord("c", ()))
        with pytest.raises(StateError, match=says):
            state_dir.ensure(str(bad))
    assert os.listdir(loose) == [] and os.listdir(tmp_path / "elsewhere") == [] and os.listdir(theirs) == []
    made = tmp_path / "new/state"
    state_dir.ensure(str(made))
    assert oct(made.stat().st_mode & 0o777) == "0o700"
