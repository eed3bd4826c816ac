"""NVIDIA MPS control daemons, one per GPU, run by gpuhook on the host: `nvidia-cuda-mps-control -d` with the GPU
alone visible and its own pipe and log directories, and `quit` on its control shell when the last container using it
is gone. The directories are root's, under [tuning] mps_dir, made by the runtime before the container's mounts; the
binary is the host driver's. Runs a program; writes the daemon's directories."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from gpuhook.errors import TuningError
from gpuhook.statefile import make_dirs, read_bounded

DEADLINE = 10.0  # seconds for the control program to start the daemon or make it quit
PID_FILE = "nvidia-cuda-mps-control.pid"


def directories(home: str) -> tuple[str, str]:
    """(pipe, log) directories of the daemon whose home is `home`."""
    return f"{home}/pipe", f"{home}/log"


def make(home: str) -> None:
    """The daemon's directories (0755, root's; the pipe directory is where clients connect), made below [tuning]
    mps_dir without following a link (statefile.make_dirs). Writes directories."""
    from gpuhook.errors import UnsafePathError

    for d in directories(home):
        try:
            make_dirs(os.path.dirname(home), d)
        except UnsafePathError as e:
            raise TuningError(f"the MPS directory cannot be trusted: {e}") from e


def start(control: str, uuid: str, home: str) -> None:
    """Start the control daemon for GPU `uuid` in `home`; TuningError with its words when it does not start."""
    make(home)
    done = _run(control, ["-d"], uuid, home, "")
    if done.returncode != 0 or not running(home):
        said = (done.stderr or done.stdout).strip().splitlines()
        raise TuningError(f"nvidia-cuda-mps-control -d for GPU {uuid} did not start"
                          + (f": {said[-1][:200]}" if said else f" (exit {done.returncode})"))


def stop(control: str, uuid: str, home: str) -> None:
    """Make the daemon in `home` quit and remove its directories; nothing to do when it is gone already."""
    if running(home):
        _run(control, [], uuid, home, "quit\n")
        deadline = time.monotonic() + DEADLINE
        while running(home) and time.monotonic() < deadline:
            time.sleep(0.02)
        if running(home):
            raise TuningError(f"the MPS control daemon of GPU {uuid} ({home}) did not quit")
    shutil.rmtree(home, ignore_errors=True)


def running(home: str) -> bool:
    """Whether the daemon whose pid file is in `home`'s pipe directory lives."""
    pipe, _ = directories(home)
    try:
        pid = read_bounded(f"{pipe}/{PID_FILE}", 32).decode(errors="replace").strip()
        if not pid.isdigit():
            return False
        state = read_bounded(f"/proc/{pid}/stat", 4096).rpartition(b")")[2].split()[:1]
        return state != [b"Z"]  # a zombie has quit
    except OSError:
        return False


def _run(control: str, args: list[str], uuid: str, home: str, stdin: str) -> subprocess.CompletedProcess[str]:
    pipe, log = directories(home)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CUDA_VISIBLE_DEVICES": uuid, "CUDA_MPS_PIPE_DIRECTORY": pipe,
           "CUDA_MPS_LOG_DIRECTORY": log}
    try:
        return subprocess.run([control, *args], input=stdin, env=env, capture_output=True, text=True,
                              timeout=DEADLINE, check=False, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TuningError(f"nvidia-cuda-mps-control for GPU {uuid}: {e}") from e
