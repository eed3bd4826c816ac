"""The MPS daemon's directories: made below [tuning] mps_dir without following a planted link (issue 43, 8); its
shared memory a bounded tmpfs of its own, root's, that the daemon sees at /dev/shm and no other (issue 45, 6); the
daemon known by the pid and start time gpuhook recorded in state_dir, never by the pipe directory (issue 43, 2).
Run as root (CI does): make and start mount the tmpfs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gpuhook import statefile
from gpuhook.errors import TuningError
from gpuhook.vendors.nvidia import mps

UUID = "GPU-00000000-0000-0000-0000-000000000001"
PID_FILE = "nvidia-cuda-mps-control.pid"  # the daemon writes it where every client can write


pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the daemon's shared memory is a tmpfs: mounts need root")


def _mounts_below(path: Path) -> list[str]:
    """The mount points at or below `path`, from this process's mountinfo."""
    text = Path("/proc/self/mountinfo").read_text()
    return [ln.split()[4] for ln in text.splitlines() if ln.split()[4].startswith(str(path))]


@pytest.fixture(autouse=True)
def _unmounted(tmp_path: Path):  # type: ignore[no-untyped-def]
    """No tmpfs a failed test made outlives it."""
    yield
    for m in reversed(_mounts_below(tmp_path)):
        subprocess.run(["umount", "-l", m], check=False)


def test_make_puts_pipe_log_and_shared_memory_in_the_gpus_home(tmp_path: Path) -> None:
    home = tmp_path / "mps" / UUID
    shared = mps.make(str(home))
    assert (home / "pipe").is_dir() and (home / "log").is_dir()
    assert shared == f"{home}/shm/shared"
    fs, inner = os.stat(home / "shm"), os.stat(shared)
    assert fs.st_dev != os.stat(home).st_dev and fs.st_uid == 0 and fs.st_mode & 0o7777 == 0o700  # root's alone
    assert inner.st_dev == fs.st_dev and inner.st_mode & 0o7777 == 0o1777  # /dev/shm's mode, for every client
    vfs = os.statvfs(shared)
    assert vfs.f_blocks * vfs.f_frsize == statefile.SHM_SIZE and vfs.f_files == statefile.SHM_INODES
    line = next(ln for ln in Path("/proc/self/mountinfo").read_text().splitlines()
                if ln.split()[4] == str(home / "shm"))
    assert {"nosuid", "nodev", "noexec"} <= set(line.split()[5].split(",")) and " - tmpfs " in line
    mps.make(str(home))  # a second client's start: the same tmpfs, not a second one over it
    assert _mounts_below(home) == [str(home / "shm")] and os.stat(shared).st_dev == fs.st_dev
    statefile.remove_shared_memory(str(home / "shm"))
    assert _mounts_below(home) == []


def test_each_gpus_daemon_has_shared_memory_of_its_own(tmp_path: Path) -> None:
    one, two = mps.make(f"{tmp_path}/mps/{UUID}"), mps.make(f"{tmp_path}/mps/{UUID[:-1]}2")
    assert os.stat(one).st_dev != os.stat(two).st_dev
    Path(one, "segment").write_text("x")
    assert not Path(two, "segment").exists()


def test_a_link_planted_at_the_shared_memory_is_not_followed(tmp_path: Path) -> None:
    home = tmp_path / "mps" / UUID
    home.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (home / "shm").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TuningError, match=f"{home}/shm is a symbolic link"):
        mps.make(str(home))
    assert _mounts_below(tmp_path) == [] and list((tmp_path / "elsewhere").iterdir()) == []


def test_a_link_planted_at_the_gpus_home_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "mps").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "mps" / UUID).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TuningError, match=f"MPS directory cannot be trusted: {tmp_path}/mps/{UUID} is a symbolic"):
        mps.make(f"{tmp_path}/mps/{UUID}")
    assert list((tmp_path / "elsewhere").iterdir()) == []


# The daemon's identity is gpuhook's own record, never the pipe directory every client writes (issue 43, 2).

@pytest.fixture
def control(tmp_path: Path) -> str:
    """The simulator's nvidia-cuda-mps-control (a daemon of its own, quit through its control pipe)."""
    import shutil

    from gpuhook.simulator import stub_libs as stubs

    path = tmp_path / "nvidia-cuda-mps-control"
    shutil.copy2(stubs.build("mps_control.c", "nvidia-cuda-mps-control"), path)
    return str(path)


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
    except OSError:
        return True


def _started(control: str, tmp_path: Path) -> tuple[str, str, int]:
    home, state = f"{tmp_path}/mps/{UUID}", str(tmp_path / "state")
    Path(state).mkdir(mode=0o700)
    mps.start(control, UUID, home, state)
    daemon = mps.recorded(state, UUID)
    assert daemon is not None and mps.running(state, UUID)
    assert os.readlink(f"/proc/{daemon[0]}/cwd") == "/"  # no container's bundle held as its working directory
    record = json.loads((Path(state) / "mps" / f"{UUID}.json").read_text())
    assert record == {"gpu": UUID, "home": home, "pid": daemon[0], "start": daemon[1]}
    return home, state, daemon[0]


def test_the_daemon_sees_its_shared_memory_at_dev_shm_and_its_stop_unmounts_it(control: str, tmp_path: Path) -> None:
    """As NVIDIA's control daemon container has its shm at /dev/shm: the daemon gpuhook starts runs in a mount
    namespace of its own with the GPU's tmpfs there, the host's /dev/shm untouched; its stop unmounts it."""
    home, state, pid = _started(control, tmp_path)
    seen, shared = os.stat(f"/proc/{pid}/root/dev/shm"), os.stat(f"{home}/shm/shared")
    assert (seen.st_dev, seen.st_ino) == (shared.st_dev, shared.st_ino)
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert Path(home, "shm/shared/cuda.mps.control").read_text().split()[1] == f"{home}/pipe"  # the stub's memory
    assert not Path("/dev/shm/cuda.mps.control").exists()
    assert "started for " + UUID in Path(home, "log/control.log").read_text()
    mps.stop(control, UUID, home, state)
    assert _gone(pid) and not Path(home).exists() and _mounts_below(tmp_path) == []


def test_the_daemon_is_found_from_proc_and_recorded_in_state_dir(control: str, tmp_path: Path) -> None:
    home, state, pid = _started(control, tmp_path)
    assert mps.find(control, f"{home}/pipe") == mps.recorded(state, UUID)
    assert mps.find(control, f"{tmp_path}/elsewhere/pipe") is None
    mps.stop(control, UUID, home, state)
    assert _gone(pid) and not Path(home).exists() and not (Path(state) / "mps" / f"{UUID}.json").exists()


@pytest.mark.parametrize("attack", ["rm pid file", "rm pid file and pipe", "another live pid", "pid 1",
                                    "a link to elsewhere"])
def test_what_a_client_does_to_the_pipe_directory_does_not_decide_the_stop(control: str, tmp_path: Path,
                                                                           attack: str) -> None:
    """Removing or rewriting the pid file (clients have the pipe directory read-write) neither orphans the daemon
    nor makes the stop wait: the recorded pid and start time identify it; another process is never signalled."""
    home, state, pid = _started(control, tmp_path)
    pid_file, bystander = Path(home) / "pipe" / PID_FILE, subprocess.Popen(["sleep", "30"])
    try:
        if attack.startswith("rm"):
            pid_file.unlink()
            if attack.endswith("pipe"):
                (Path(home) / "pipe" / "control").unlink()
        elif attack == "a link to elsewhere":
            pid_file.unlink()
            pid_file.symlink_to(f"/proc/{bystander.pid}/stat")
        else:
            pid_file.write_text(f"{bystander.pid if attack == 'another live pid' else 1}\n")
        began = time.monotonic()
        mps.stop(control, UUID, home, state)
        assert time.monotonic() - began < 5.0  # was 10 s and a TuningError with another pid in the file
        assert _gone(pid) and not Path(home).exists() and mps.recorded(state, UUID) is None
        assert bystander.poll() is None  # the process the file named lives on
    finally:
        bystander.kill()
        bystander.wait()


def test_a_daemon_whose_pid_was_reused_is_gone(control: str, tmp_path: Path) -> None:
    home, state, pid = _started(control, tmp_path)
    path = Path(state) / "mps" / f"{UUID}.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "start": str(int(record["start"]) + 1)}))  # another process's start
    assert not mps.running(state, UUID)
    os.kill(pid, signal.SIGTERM)  # (this test's own cleanup: the stop below leaves a process it cannot identify)
    mps.stop(control, UUID, home, state)
    assert not Path(home).exists()


def test_a_start_stops_the_daemon_it_recorded_before(control: str, tmp_path: Path) -> None:
    """A stop that failed left its record: the next start ends that daemon rather than orphan it."""
    home, state, pid = _started(control, tmp_path)
    (Path(home) / "pipe" / PID_FILE).unlink()  # (else the stub refuses a second daemon for the directory)
    (Path(home) / "pipe" / "control").unlink()  # its pipe gone: quit cannot reach it, the signals do
    mps.start(control, UUID, home, state)
    new = mps.recorded(state, UUID)
    assert _gone(pid) and new is not None and new[0] != pid and mps.running(state, UUID)
    mps.stop(control, UUID, home, state)
    assert _gone(new[0])
