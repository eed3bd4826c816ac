"""The one place gpuhook runs other programs: argv lists, no shell, a fixed minimal env, a timeout.

Not through the subprocess module: importing it (signal, threading, selectors, ...) costs 12-25 ms on a
small VM, and the hooks that run ldconfig (hook mode, CDI's update-ldcache) do so while runc waits to start
the container. posix_spawn, two pipes and poll() are all this needs.
"""

from __future__ import annotations

import os

from gpuhook.errors import ProcessError

SAFE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
# Linux's numbers on x86_64, aarch64, ppc64le and riscv64 (the signal module would import enum)
_SIGKILL = 9
_SIGNALS_PYTHON_IGNORES = (13, 25)  # SIGPIPE and SIGXFSZ: a program expects them at their defaults


def run(argv: list[str], timeout: float = 60.0, extra_env: dict[str, str] | None = None) -> str:
    """Run `argv` with SAFE_ENV (plus `extra_env`), stdin /dev/null; return its stdout. Raises ProcessError when
    it cannot start, exits non-zero (naming its last stderr line) or outlives `timeout` seconds (it is killed)."""
    env = {**SAFE_ENV, **(extra_env or {})}
    program = argv[0] if "/" in argv[0] else _on_path(argv[0], env["PATH"])
    out_r, out_w = os.pipe()  # both ends close-on-exec; the spawn's dup2 gives the child its own 1 and 2
    err_r, err_w = os.pipe()
    try:
        actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, out_w, 1),
                   (os.POSIX_SPAWN_DUP2, err_w, 2), *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable())]
        try:
            pid = os.posix_spawn(program, argv, env, file_actions=actions, setsigdef=_SIGNALS_PYTHON_IGNORES)
        except OSError as e:
            raise ProcessError(f"{argv[0]} could not run: {e}") from e
        finally:
            os.close(out_w)
            os.close(err_w)
        out, err, status = _collect(pid, out_r, err_r, timeout)
    finally:
        os.close(out_r)
        os.close(err_r)
    if status is None:
        raise ProcessError(f"{argv[0]} could not run: timed out after {timeout:g} s (killed)")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        raise ProcessError(f"{argv[0]} exited {code}: {last}")
    return out


def _collect(pid: int, out_r: int, err_r: int, timeout: float) -> tuple[str, str, int | None]:
    """Read both pipes to their end and reap the child: (stdout, stderr, wait status; None when killed)."""
    import select
    import time

    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    poller = select.poll()
    for fd in chunks:
        poller.register(fd, select.POLLIN)
    deadline = time.monotonic() + timeout
    status: int | None = None
    reading = len(chunks)
    while status is None:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, _SIGKILL)
            os.waitpid(pid, 0)
            break
        if reading:
            for fd, _ in poller.poll(max(1, int(left * 1000))):
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:  # end of file: the child (and anything it started) closed this pipe
                    poller.unregister(fd)
                    reading -= 1
            continue
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            status = wait_status
        else:
            time.sleep(0.001)
    text = [b"".join(chunks[fd]).decode("utf-8", "replace") for fd in (out_r, err_r)]
    return text[0], text[1], status


def _inheritable() -> list[int]:
    """Descriptors above 2 that would survive exec (one a library opened without O_CLOEXEC, say): the program
    gets none of them, as with subprocess's close_fds. Hook mode runs ldconfig chrooted into a container."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                fds.append(fd)
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
    return fds


def _on_path(name: str, path: str) -> str:
    """`name` found on `path` (the fixed PATH, not the caller's), else the name itself (spawning it fails)."""
    for directory in path.split(":"):
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return name


def beside(here: str, name: str, fallback: str = "") -> str:
    """The native `name` in `here` where it was built, else `fallback` (the Python path that does its work)."""
    path = os.path.join(here, name)
    return path if os.access(path, os.X_OK) else fallback
