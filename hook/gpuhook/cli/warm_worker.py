"""A warm worker's life (cli/warm.py forks it): wait for a call on the daemon's socket, serve it as the direct path
would, put itself back as it was, and wait for the next one, with what it has learned of the host (the modules,
NVIDIA's driver files, the config's cache) still in memory.

Every call passes every rule anew (the acknowledgement, SO_PEERCRED, trusted_caller, own_config, fresh()), and
gets the caller's stdin, stdout, stderr, working directory, environment, argv and umask for its own life only: the
worker puts back its own after the answer (cli/warm_state.py). It exits after its answer instead of waiting again
when anything is doubtful: the call raised anything but a refusal, its code changed what the caller gave it, it
left a descriptor, a thread, another namespace, root or credentials behind, the worker grew, served MAX_CALLS, or
the installation changed. The daemon forks another when it needs one (cli/warm_pool.py).

The worker tells the daemon over its own channel when it takes a call ("t") and when it waits again ("b"); the
daemon's "g" (or its end closing) makes a waiting worker go. A worker that took a call meanwhile finishes it
first: no worker holding a call is ever killed to be retired."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys

from gpuhook.cli.warm_state import Idle
from gpuhook.cli.warm_trust import FDS, MAX_MESSAGE, own_config, parse, peer, trusted_caller
from gpuhook.errors import GpuhookError, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_CALLS = 500  # calls a worker serves before it makes way for a fresh one
TOOK, BACK, GO = b"t", b"b", b"g"  # the worker's and the daemon's messages on the worker's channel
_ACK_WAIT = 5.0  # seconds a worker waits for the call after its "A" (a caller that sends nothing frees it)
_TICK_MS = 1000  # a waiting worker reads again what vendors remember of the host this often (vendors.discover)


def live(listener: socket.socket, channel: socket.socket, hot: set[int], memo: int,
         fresh: Callable[[], bool]) -> int:
    """The worker's whole life, after the fork; its exit status. Copies the pages calls write first (a fresh
    worker's first call then pays no copy-on-write faults), and reports those its first call wrote in `memo`
    (when the daemon still learns them)."""
    from gpuhook.cli import warm_memory
    from gpuhook.vendors.registry import node_prefixes

    warm_memory.populate(hot)
    ranges = warm_memory.writable() if memo >= 0 else []
    idle = Idle((*node_prefixes(), "/dev/dri/"))
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    poller.register(channel, select.POLLIN)
    for _ in range(MAX_CALLS):
        conn = _next_call(listener, channel, poller)
        if conn is None:
            return 0
        _tell(channel, TOOK)
        doubts, heard = _work(conn, fresh, idle, channel)
        if memo >= 0:  # after the answer: the caller does not wait for this
            with contextlib.suppress(OSError):
                warm_memory.report(memo, warm_memory.owned(ranges))
            idle.forget(memo)
            memo = -1
        if doubts or not heard:  # doubtful, or the daemon is gone (nobody would make this worker go)
            return 0
    return 0


def _next_call(listener: socket.socket, channel: socket.socket, poller: select.poll) -> socket.socket | None:
    """The next call's connection; None when the daemon asks this worker to go, or is gone. Waits."""
    from gpuhook.vendors.discover import refresh

    while True:
        events = poller.poll(_TICK_MS)
        if not events:
            with contextlib.suppress(Exception):  # what vendors remember: a failure leaves the call to read it
                refresh()
            continue
        if any(fd == channel.fileno() for fd, _ in events):  # "g", or the daemon's end closed: go, holding nothing
            return None
        try:
            conn, _ = listener.accept()  # the listener does not block: another worker may have taken the call
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            return None
        return conn


def _tell(channel: socket.socket, what: bytes) -> bool:
    """Send `what` to the daemon; False when it is gone."""
    try:
        channel.send(what)
    except OSError:
        return False
    return True


def _answer(conn: socket.socket, text: bytes, channel: socket.socket) -> bool:
    """Tell the daemon this worker is back, then answer the caller: its next call (a container's next step, the
    next container) finds this worker counted as waiting, never all of them busy. Whether the daemon heard."""
    heard = _tell(channel, BACK)
    with contextlib.suppress(OSError):  # the caller is gone: nobody waits for the answer
        conn.send(text)
    conn.close()
    return heard


def _work(conn: socket.socket, fresh: Callable[[], bool], idle: Idle,
          channel: socket.socket) -> tuple[list[str], bool]:
    """One call: why this worker must not serve another ([]: it may), and whether the daemon heard that it is back
    (told just before the answer, or the hang-up: _answer). Served only for a caller that is what an
    engine's runtime call is (trusted_caller), by code that is still the installed code (`fresh()`), with a
    config only root can have written (own_config); else "direct". The caller's descriptors are this worker's
    stdin, stdout, stderr and working directory until the answer, and closed here after it."""
    fds: list[int] = []
    passed: list[tuple[int, int]] = []
    try:
        try:
            conn.send(b"A")  # the caller sends its call, and its descriptors, only now
            conn.settimeout(_ACK_WAIT)
            pid, uid, _ = peer(conn)
            msg, fds, flags, _ = socket.recv_fds(conn, MAX_MESSAGE, FDS)
            conn.settimeout(None)
            whole = not flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
            call = parse(msg) if uid == 0 and len(fds) == FDS and whole else None
            if call is None or not trusted_caller(pid, conn) or not own_config(call[4]):
                return [], _answer(conn, b"direct", channel)
            if not fresh():
                return ["the installation changed"], _answer(conn, b"direct", channel)
            passed = [(st.st_dev, st.st_ino) for st in map(os.fstat, fds)]
            for target, fd in enumerate(fds[:3]):
                os.dup2(fd, target)
            os.fchdir(fds[3])
        except OSError:  # the caller is gone, or sent nothing usable: it takes its direct path
            heard = _tell(channel, BACK)
            conn.close()
            return [], heard
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        kind, mask, exe, argv, env = call
        os.umask(mask)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [exe, *argv[1:]]
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the caller's, for the call's life)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        answer, clean = _run(kind, argv, pid)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        heard = _answer(conn, answer, channel)  # (if doubtful, it goes in a moment, and the daemon counts again)
        doubts = idle.changed_by(env, passed[3], mask)
        if not clean:
            doubts.append("the call failed unexpectedly")
    finally:
        idle.restore()
    return doubts + idle.doubts(passed), heard


def _run(kind: str, argv: list[str], caller: int) -> tuple[bytes, bool]:
    """The call, as the direct path would run it: its answer to the caller, and whether it ended as calls do (a
    result or a refusal; a hook that did not exit 0 is not told apart from an internal error, so it is not)."""
    if kind == "runtime":
        from gpuhook.cli import shim

        return _exited(lambda: b"exec " + shim.prepare(shim.RuncArgs(argv[1:]), caller).encode())
    if os.path.basename(argv[0]) == "nvidia-container-runtime-hook":  # Docker's --gpus hook, NVIDIA's command line
        from gpuhook.cli import nvidia_hook

        answer, clean = _exited(lambda: b"exit %d" % nvidia_hook.main(argv[1:]))
        return answer, clean and answer == b"exit 0"
    from gpuhook.cli import hook

    hook_args = hook.parse(argv[1:])
    if hook_args is None:
        return b"direct", True  # only the hook is a hot path; everything else starts Python as always
    stage, folders, mounts, claimed = hook_args
    answer, clean = _exited(lambda: b"exit %d" % hook.main(stage, folders, mounts=mounts or None, claimed=claimed))
    return answer, clean and answer == b"exit 0"


def _exited(call: Callable[[], bytes]) -> tuple[bytes, bool]:
    """The call's answer, or "exit N" for the SystemExit it raised (a refusal, already reported); and whether it
    ended as calls do (False: an exception other than a refusal, even one the shim turned into its exit 1)."""
    try:
        return call(), True
    except SystemExit as e:
        code = e.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
        cause = e.__context__  # the shim exits in its except clause: what it caught
        return b"exit %d" % (code or 0), cause is None or isinstance(cause, (GpuhookError, OSError))
    except Exception as e:  # fail closed, as the direct path would
        text = one_line(e)
        print(f"gpuhook: internal error in the warm helper ({type(e).__name__}: {text}); please report this",
              file=sys.stderr)
        return b"exit 1", False
