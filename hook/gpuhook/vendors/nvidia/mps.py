"""NVIDIA MPS control daemons, one per GPU, run by gpuhook on the host: `nvidia-cuda-mps-control -d` with the GPU
alone visible, its own pipe, log and shared-memory directories and `/` as its working directory, and `quit` on its
control shell when the last container using it is gone. The layout is NVIDIA's (the device plugin's
<mps root>/<resource>/{pipe,log} and shm, the DRA driver's <plugin dir>/mps/<claim>/{pipe,log,shm}), one per GPU:
<[tuning] mps_dir>/<UUID>/pipe, log and shm, root's, made by the runtime before the container's mounts. shm is a
tmpfs of its own (statefile.make_shared_memory: bounded, root's); its directory `shared` is /dev/shm to the
daemon, which runs in a mount namespace of its own with it bound there (as NVIDIA's control daemon container has
it), and to every client (tuning.sharing), so that the daemon, its server and its clients share their POSIX shared
memory, and no other GPU's clients see it. The binary is the host driver's.

Every client has the pipe directory read-write, so nothing in it (the daemon's pid file, its control pipe) says
which process is the daemon or whether it lives. gpuhook keeps what it started in its own state, root's alone:
state_dir/mps/<UUID>.json with the daemon's pid and start time (field 22 of /proc/<pid>/stat). The daemon is found
once, when it has just started, from /proc alone (a process of the host's control binary, in gpuhook's pid
namespace, whose environment names this pipe directory), and stopped by that identity: `quit` first, then
signals to that process (a pidfd where the kernel has one), each wait bounded. A recorded process that is gone,
or whose start time differs, is a daemon that is gone. Runs a program; writes the daemon's directories and
state_dir/mps/; mounts its shared memory; signals the daemon."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from gpuhook.errors import TuningError
from gpuhook.host.processes import alive, start_time
from gpuhook.statefile import make_dirs, make_shared_memory, read_bounded, remove_shared_memory

DEADLINE = 10.0  # seconds for the control program to start the daemon
QUIT = 3.0  # seconds for `quit` on the control shell (then a second for the daemon to end) before it is signalled
SIGNALLED = 2.0  # seconds for the daemon to end after SIGTERM, then after SIGKILL
RECORDS = "mps"  # state_dir/mps/<UUID>.json: the daemons gpuhook started
MAX_RECORD = 4096
MAX_ENVIRON = 1 << 17
SHM = "/dev/shm"  # where the daemon, its server and its clients share memory

Daemon = tuple[int, str]  # (pid, start time)


def directories(home: str) -> tuple[str, str]:
    """(pipe, log) directories of the daemon whose home is `home`."""
    return f"{home}/pipe", f"{home}/log"


def shared_memory(home: str) -> str:
    """The tmpfs of the daemon whose home is `home` (its directory statefile.SHARED is their /dev/shm)."""
    return f"{home}/shm"


def make(home: str) -> str:
    """The daemon's directories (0755, root's; the pipe directory is where clients connect) and its shared memory
    (a tmpfs of its own, statefile.make_shared_memory), made below [tuning] mps_dir without following a link; the
    directory that is /dev/shm to the daemon and its clients. Writes directories; mounts a tmpfs."""
    from gpuhook.errors import UnsafePathError

    try:
        for d in directories(home):
            make_dirs(os.path.dirname(home), d)
        return make_shared_memory(os.path.dirname(home), shared_memory(home))
    except UnsafePathError as e:
        raise TuningError(f"the MPS directory cannot be trusted: {e}") from e


def start(control: str, uuid: str, home: str, state_dir: str) -> None:
    """Start the control daemon for GPU `uuid` in `home` and record it in state_dir; TuningError with its words
    when it does not start. A daemon gpuhook recorded for the GPU before (a stop that failed) is stopped first; one
    already serving this pipe directory (started by an earlier gpuhook, which kept no record) is adopted."""
    make(home)
    pipe, _ = directories(home)
    old = recorded(state_dir, uuid)
    if old is not None and alive(*old):
        _end(control, uuid, home, old)
    found = find(control, pipe)
    if found is None:
        done = _run(control, ["-d"], uuid, home, "", DEADLINE)
        found = find(control, pipe) if done.returncode == 0 else None
        if found is None:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise TuningError(f"nvidia-cuda-mps-control -d for GPU {uuid} did not start"
                              + (f": {said[-1][:200]}" if said else f" (exit {done.returncode})"))
    _record(state_dir, uuid, home, found)


def stop(control: str, uuid: str, home: str, state_dir: str) -> None:
    """Make the daemon gpuhook recorded for GPU `uuid` end (`quit`, then signals; each wait bounded), then remove
    its record and directories; nothing to do when it is gone already. A GPU without a record (a daemon an earlier
    gpuhook started) has its daemon found as `start` finds it. TuningError when the process outlives SIGKILL."""
    pipe, _ = directories(home)
    daemon = recorded(state_dir, uuid)
    if daemon is None:
        daemon = find(control, pipe)
    if daemon is not None and alive(*daemon):
        _end(control, uuid, home, daemon)
    try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
        os.unlink(_record_path(state_dir, uuid))
    except FileNotFoundError:
        pass
    try:
        remove_shared_memory(shared_memory(home))
    except OSError as e:
        raise TuningError(f"the MPS shared memory of GPU {uuid} ({shared_memory(home)}): {e}") from e
    shutil.rmtree(home, ignore_errors=True)


def running(state_dir: str, uuid: str) -> bool:
    """Whether the daemon gpuhook recorded for GPU `uuid` lives (its pid, started when it was recorded)."""
    daemon = recorded(state_dir, uuid)
    return daemon is not None and alive(*daemon)


def recorded(state_dir: str, uuid: str) -> Daemon | None:
    """(pid, start time) of the daemon gpuhook started for GPU `uuid`, from state_dir; None without a record (or
    one gpuhook did not write)."""
    from gpuhook import fastjson

    try:
        doc = fastjson.loads(read_bounded(_record_path(state_dir, uuid), MAX_RECORD))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("pid"), int) or not isinstance(doc.get("start"), str):
        return None
    if doc["pid"] <= 1 or not doc["start"].isdigit():
        return None
    return doc["pid"], doc["start"]


def find(control: str, pipe: str) -> Daemon | None:
    """The control daemon serving `pipe`, from /proc alone: a live process of the binary `control` (the same file,
    by device and inode), in this process's pid namespace (a container's processes are not), whose environment
    names `pipe` as its CUDA_MPS_PIPE_DIRECTORY; the newest such. None when there is none. Reads /proc."""
    try:
        binary = os.stat(control)
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    marker = f"CUDA_MPS_PIPE_DIRECTORY={pipe}".encode()
    found: list[tuple[int, int, str]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{name}/exe")
            if (st.st_dev, st.st_ino) != (binary.st_dev, binary.st_ino):
                continue
            if os.stat(f"/proc/{name}/ns/pid").st_ino != namespace:
                continue
            if marker not in read_bounded(f"/proc/{name}/environ", MAX_ENVIRON).split(b"\0"):
                continue
        except OSError:
            continue
        started = start_time(int(name))
        if started.isdigit():
            found.append((int(started), int(name), started))
    if not found:
        return None
    _, pid, started = max(found)
    return pid, started


def _end(control: str, uuid: str, home: str, daemon: Daemon) -> None:
    """`quit` on the control shell, then SIGTERM, then SIGKILL to `daemon` (and the MPS servers it started), each
    with a bounded wait; TuningError when it outlives them all."""
    servers = _children(daemon[0])
    try:  # noqa: SIM105 (no contextlib: see gpuhook.startup)
        _run(control, [], uuid, home, "quit\n", QUIT)  # a client may have broken the pipes: then the signals
    except TuningError:
        pass
    for sig, wait in ((None, 1.0), (signal.SIGTERM, SIGNALLED), (signal.SIGKILL, SIGNALLED)):
        if sig is not None:
            for process in (daemon, *servers):
                _signal(process, sig)
        deadline = time.monotonic() + wait
        while alive(*daemon) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not alive(*daemon):
            for server in servers:  # a server the daemon did not take with it
                _signal(server, signal.SIGKILL)
            return
    raise TuningError(f"the MPS control daemon of GPU {uuid} (pid {daemon[0]}) did not end, even on SIGKILL")


def _children(pid: int) -> list[Daemon]:
    """(pid, start time) of the live children of `pid` (the MPS servers a control daemon started). Reads /proc."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 19 and fields[1] == str(pid) and fields[0] not in ("Z", "X"):
            out.append((int(name), fields[19]))
    return out


def _signal(process: Daemon, sig: int) -> None:
    """Send `sig` to `process` only while it is the process recorded: through a pidfd where the kernel has them
    (opened, then the start time checked: the pid cannot be reused while the pidfd is open), else by pid right
    after the check."""
    pid, started = process
    fd = -1
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        fd = -1
    try:
        if not alive(pid, started):
            return
        if fd >= 0:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except OSError:
        pass  # gone meanwhile
    finally:
        if fd >= 0:
            os.close(fd)


def _record(state_dir: str, uuid: str, home: str, daemon: Daemon) -> None:
    """The daemon's identity, written atomically to state_dir/mps/<UUID>.json (root's alone; state_dir was checked
    by the ledger's lock, under which every setting is applied)."""
    from gpuhook import fastjson
    from gpuhook.atomic import write_text

    path = _record_path(state_dir, uuid)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    doc = {"gpu": uuid, "home": home, "pid": daemon[0], "start": daemon[1]}
    write_text(path, fastjson.dumps(doc) + "\n", mode=0o600)


def _record_path(state_dir: str, uuid: str) -> str:
    if not uuid or "/" in uuid or uuid.startswith("."):
        raise TuningError(f"GPU {uuid!r}: not a UUID gpuhook names a record by")
    return os.path.join(state_dir, RECORDS, f"{uuid}.json")


def _run(control: str, args: list[str], uuid: str, home: str, stdin: str,
         timeout: float) -> subprocess.CompletedProcess[str]:
    """The control program, in a mount namespace of its own where the daemon's shared memory is /dev/shm (the
    daemon it starts stays there; the control shell reaches its daemon through it too)."""
    from gpuhook import syscalls  # noqa: F401 (ctypes loaded here, not in the child after the fork)
    from gpuhook.statefile import SHARED

    pipe, log = directories(home)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CUDA_VISIBLE_DEVICES": uuid, "CUDA_MPS_PIPE_DIRECTORY": pipe,
           "CUDA_MPS_LOG_DIRECTORY": log}
    shm = f"{shared_memory(home)}/{SHARED}"
    if not os.path.isdir(shm) or os.path.islink(shm):
        raise TuningError(f"GPU {uuid}: the MPS daemon's shared memory {shm} is missing: it is made with its "
                          "directories (start)")
    try:  # cwd "/": the daemon keeps it, and no container's bundle is held busy by a host daemon
        return subprocess.run([control, *args], input=stdin, env=env, capture_output=True, text=True, cwd="/",
                              timeout=timeout, check=False, start_new_session=True,
                              preexec_fn=lambda: _enter(shm))  # the hook is one thread
    except (OSError, subprocess.TimeoutExpired, subprocess.SubprocessError) as e:
        raise TuningError(f"nvidia-cuda-mps-control for GPU {uuid}: {e}") from e


def _enter(shm: str) -> None:
    """In the child before exec: a mount namespace of its own with `shm` bound at /dev/shm; a slave of the host's
    (as runc makes a container's), so that what the host unmounts later (a container's root) is not held here.
    Mounts."""
    from gpuhook import syscalls

    syscalls.unshare(syscalls.CLONE_NEWNS)
    syscalls.mount(None, "/", None, syscalls.MS_REC | syscalls.MS_SLAVE)
    syscalls.mount(shm, SHM, None, syscalls.MS_BIND)
