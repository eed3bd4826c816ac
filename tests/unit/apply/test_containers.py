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
    alive = containers.ContainerRecord(id="alive", drivers=(("nvidia", "535"),), runtime_root=str(runtime))
    containers.save(str(tmp_path), alive)
    containers.save(str(tmp_path), containers.ContainerRecord(id="gone", drivers=(("nvidia", "535"),),
                                                              runtime_root=str(runtime)))
    me = os.getpid()
    creating = containers.ContainerRecord(id="creating", drivers=(), runtime_root=str(runtime), creator=me,
                                          creator_start=start_time(me))
    containers.save(str(tmp_path), creating)  # runc (this process, here) has not written its state yet
    hooked = containers.ContainerRecord(id="hooked", drivers=(), runtime_root="", pid=me, start_time=start_time(me))
    containers.save(str(tmp_path), hooked)
    containers.save(str(tmp_path), containers.ContainerRecord(id="reused-pid", drivers=(), runtime_root="", pid=me,
                                                              start_time="1"))
    assert sorted(r.id for r in containers.live_records(str(tmp_path))) == ["alive", "creating", "hooked"]
    assert sorted(os.listdir(tmp_path / "containers")) == sorted(r.file_name() for r in (alive, creating, hooked))


def test_the_same_id_under_two_runtime_roots_is_two_records(tmp_path: Path) -> None:
    for root in ("/run/runc", "/run/docker/runtime-runc/moby"):
        (tmp_path / root.strip("/") / "web").mkdir(parents=True)
        (tmp_path / root.strip("/") / "web/state.json").write_text("{}")
        containers.save(str(tmp_path), containers.ContainerRecord(id="web", drivers=(),
                                                                  runtime_root=str(tmp_path / root.strip("/"))))
    assert len(containers.live_records(str(tmp_path))) == 2
    os.unlink(tmp_path / "run/runc/web/state.json")  # the first one stopped: poststop drops its record only
    containers.drop_gone(str(tmp_path), "web")
    assert [r.runtime_root for r in containers.live_records(str(tmp_path))] == [
        str(tmp_path / "run/docker/runtime-runc/moby")]


def test_a_reader_in_a_container_of_its_own_finds_the_runtimes_state_under_the_nodes_root(tmp_path: Path) -> None:
    """The exporter in the chart's pod: the record names the engine's runtime state as the node sees it
    (/run/containerd/runc/k8s.io); the node's / is mounted elsewhere (--node-root)."""
    node = tmp_path / "host"
    (node / "run/containerd/runc/k8s.io/web").mkdir(parents=True)
    (node / "run/containerd/runc/k8s.io/web/state.json").write_text("{}")
    state = tmp_path / "state"
    containers.save(str(state), containers.ContainerRecord(id="web", drivers=(),
                                                           runtime_root="/run/containerd/runc/k8s.io"))
    assert containers.live_records(str(state), prune=False) == []  # not at this process's /run
    assert [r.id for r in containers.live_records(str(state), prune=False, node_root=str(node))] == ["web"]


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
            containers.save(str(bad), containers.ContainerRecord(id="c", drivers=()))
        with pytest.raises(StateError, match=says):
            state_dir.ensure(str(bad))
    assert os.listdir(loose) == [] and os.listdir(tmp_path / "elsewhere") == [] and os.listdir(theirs) == []
    made = tmp_path / "new/state"
    state_dir.ensure(str(made))
    assert oct(made.stat().st_mode & 0o777) == "0o700"


def test_pod_identity_round_trips_and_older_records_still_read(tmp_path: Path) -> None:
    import json

    runtime = tmp_path / "runc"
    (runtime / "web").mkdir(parents=True)
    (runtime / "web/state.json").write_text("{}")
    rec = containers.ContainerRecord(id="web", drivers=(("nvidia", "550.54.15"),), runtime_root=str(runtime),
                                     gpus=("GPU-1",), pod="web-0",
                                     namespace="shop", container="server")
    containers.save(str(tmp_path), rec)
    assert containers.live_records(str(tmp_path)) == [rec]
    path = tmp_path / "containers" / rec.file_name()
    older = json.loads(path.read_text())
    for key in ("pod", "namespace", "container"):
        del older[key]  # a record written before pods were kept
    path.write_text(json.dumps(older))
    assert containers.live_records(str(tmp_path)) == [containers.ContainerRecord(
        id="web", drivers=(("nvidia", "550.54.15"),), runtime_root=str(runtime), gpus=("GPU-1",))]
    assert containers.recorded(str(tmp_path), "web") and not containers.recorded(str(tmp_path), "other")


def test_stale_drivers() -> None:
    rec = containers.ContainerRecord(id="c", drivers=(("nvidia", "535.104.05"), ("amd", ""), ("toy", "1")),
                                     runtime_root="")
    assert rec.stale_drivers({"nvidia": "550.54.15", "amd": "6.7.0"}) == (("nvidia", "535.104.05", "550.54.15"),)
    assert rec.stale_drivers({"nvidia": "535.104.05"}) == ()


def test_the_shims_plan_round_trips_and_only_a_creation_in_progress_is_followed(tmp_path: Path) -> None:
    from gpuhook.vendors.contract import Setting

    me = os.getpid()
    clocks = Setting(vendor="nvidia", gpu="GPU-1", index=0, pci="0000:10:00.0", device="GPU-1", name="clocks",
                     value="1500-1500")
    plan = containers.ContainerRecord(id="web", drivers=(("nvidia", "550.54.15"),), runtime_root=str(tmp_path / "runc"),
                                      gpus=("GPU-1",),
                                      creator=me, creator_start=start_time(me), planned=True, settings=(clocks,),
                                      exclusive=("GPU-1",))
    containers.save(str(tmp_path), plan)
    assert containers.planned(str(tmp_path), "web") == plan and containers.planned(str(tmp_path), "db") is None
    hooked = containers.ContainerRecord(id="web", drivers=(), runtime_root="", pid=me,
                                        start_time=start_time(me))  # the hook's own record: not a plan
    containers.save(str(tmp_path), hooked)
    assert containers.planned(str(tmp_path), "web") == plan
    other_root = containers.ContainerRecord(id="web", drivers=(), runtime_root=str(tmp_path / "crun"), creator=me,
                                            creator_start=start_time(me), planned=True)
    containers.save(str(tmp_path), other_root)  # the same id being created under a second root: follow neither
    assert containers.planned(str(tmp_path), "web") is None
    containers.remove(str(tmp_path), other_root)
    gone = containers.ContainerRecord(id="db", drivers=(), runtime_root=str(tmp_path / "runc"), creator=me,
                                      creator_start="1", planned=True)
    containers.save(str(tmp_path), gone)  # its creator is not this process: not a creation in progress
    assert containers.planned(str(tmp_path), "db") is None


def test_running_is_a_container_whose_init_still_runs_not_one_waiting_to_be_removed(tmp_path: Path) -> None:
    """What holds a GPU for `upgrade drain`: a container whose init (runc's state.json names it with its start
    time) still runs; one that exited and waits for its engine to remove it (state.json still there, its init gone
    or another process in its pid) does not; a state gpuhook cannot read is taken as running."""
    import json

    runtime = tmp_path / "runc"
    me = os.getpid()
    ended = subprocess.Popen(["true"])
    ended.wait()
    cases = {"runs": {"init_process_pid": me, "init_process_start": int(start_time(me))},
             "exited": {"init_process_pid": ended.pid, "init_process_start": 12345},
             "pid reused": {"init_process_pid": me, "init_process_start": int(start_time(me)) + 1},
             "unreadable": None}
    for cid, state in cases.items():
        (runtime / cid).mkdir(parents=True)
        (runtime / cid / "state.json").write_text(json.dumps(state) if state else "not json")

    def running(cid: str) -> bool:
        return containers.running(containers.ContainerRecord(id=cid, drivers=(), runtime_root=str(runtime)))

    assert [running(c) for c in (*cases, "removed")] == [True, False, False, True, False]
    assert all(containers.alive(containers.ContainerRecord(id=c, drivers=(), runtime_root=str(runtime)))
               for c in cases)  # all still exist
