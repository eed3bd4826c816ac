"""`gpuhook warm`: the optional warm helper. A root daemon that has started Python and imported the GPU path
once, and keeps SPARES forked workers waiting, each for one call from gpuhook-runtime's native front end or the
native hook (cli/native/warm.h), so that a GPU container pays neither an interpreter's start nor its imports nor
a fork, and the runtime is exec'd from the small native process rather than from a grown Python one. A waiting
worker first copies the memory calls write (cli/warm_memory.py), so the call pays no copy-on-write faults.

The worker is the direct path, in a fork: it takes the caller's stdin, stdout, stderr and working directory
(descriptors), argv, environment and umask, runs the same code (cli/shim.py's `prepare`, cli/hook.py), and
answers "exit N" or "exec RUNTIME". Nothing is cached across calls: each worker reads the config, the host and the
image anew. It serves only a caller that is what an engine's call is (trusted_caller: root, in the daemon's own
namespaces and root directory, with all its capabilities; docs/warm-helper.md), naming a config only root can
write, while the installed code is still the code loaded; so it never joins another mount namespace, and nothing
it imports, runs or reads as configuration comes from a container. Any doubt answers "direct" and the caller
starts Python itself; an installation changed under the daemon also ends it, for its service manager to start
it anew. Stopping or killing the daemon only ever costs the callers their direct path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys

from gpuhook.errors import one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SOCKET = "/run/gpuhook/warm.sock"  # native/warm.h's WARM_SOCKET; GPUHOOK_WARM_SOCKET overrides both sides
VERSION = b"gpuhook-warm/1"
MAX_MESSAGE = 64 << 10  # warm.h's WARM_MAX
_FDS = 4  # stdin, stdout, stderr, the working directory
SPARES = 2  # workers waiting for a call: two containers may start at once without waiting for a fork
_PR_SET_PDEATHSIG = 1
_ACK_WAIT = 5.0  # seconds a worker waits for the call after its "A" (a caller that sends nothing frees it)
LEARN_FROM = 16  # calls whose written pages the daemon learns (warm_memory.py)
Installation = tuple[tuple[str, int, int, int], ...]  # (path, device, inode, mtime) of every file the code is


def serve(path: str = "", spares: int = SPARES) -> int:
    """Listen on `path` (GPUHOOK_WARM_SOCKET, else SOCKET) until SIGTERM or SIGINT, or until the installation
    changes; 0 then. Binds a socket; forks workers."""
    path = path or os.environ.get("GPUHOOK_WARM_SOCKET") or SOCKET
    _preload()
    listener = _listen(path)
    st = os.stat(path)
    mine = (st.st_dev, st.st_ino)  # the socket file this daemon made (a newer daemon may replace it)

    def stop(_signo: int, _frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    installed = installation()
    from gpuhook.cli.warm_watch import Watch

    watch = Watch([entry[0] for entry in installed])  # a change before it began: the loop's first stat sees it

    def fresh() -> bool:
        """Whether the installation is still the one loaded (a poll of the watch, else a stat of every file)."""
        return not watch.changed() if watch.usable() else _current(installed)

    import gc

    from gpuhook.vendors.discover import refresh

    gc.freeze()  # what was imported stays shared with the workers (no copy-on-write from the collector)
    taken_r, taken_w = os.pipe2(os.O_CLOEXEC)
    waiting: set[int] = set()  # workers not yet holding a call
    learning: dict[int, int] = {}  # worker -> the memory file it reports its written pages in
    hot: set[int] = set()  # the pages calls write (warm_memory.py)
    served = 0
    try:
        while _current(installed) and not (watch.usable() and watch.changed()):  # the daemon stats them all too
            while len(waiting) < spares:
                memo = os.memfd_create("gpuhook-warm-pages") if served < LEARN_FROM else -1
                me = os.getpid()
                pid = os.fork()
                if pid == 0:
                    os._exit(_child(listener, taken_r, taken_w, hot, memo, me, fresh))
                waiting.add(pid)
                served += 1
                if memo >= 0:
                    learning[pid] = memo
            _reap(waiting, taken_r, learning, hot)
            with contextlib.suppress(Exception):  # what vendors remember: a failure leaves the workers to read it
                refresh()
    finally:
        if _same_socket(path, mine):
            os.unlink(path)  # first: no new caller queues for a daemon that is going
        listener.close()
        for pid in waiting:  # a spare in accept() holds no call: it may go at once
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    return 0


def _reap(waiting: set[int], taken: int, learning: dict[int, int], hot: set[int]) -> None:
    """Wait up to a second for a worker to take a call; forget the workers that took one or died, adding the
    pages the finished ones wrote to `hot`."""
    import select

    from gpuhook.cli import warm_memory

    if select.select([taken], [], [], 1.0)[0]:
        data = os.read(taken, 4096)
        for i in range(0, len(data) - 3, 4):
            waiting.discard(int.from_bytes(data[i:i + 4], "little"))
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        waiting.discard(pid)
        memo = learning.pop(pid, -1)
        if memo >= 0:
            if len(hot) < warm_memory.MAX_PAGES:
                hot.update(warm_memory.read(memo))
            os.close(memo)


def _child(listener: socket.socket, taken_r: int, taken_w: int, hot: set[int], memo: int, daemon: int,
           fresh: Callable[[], bool]) -> int:
    """The forked worker's whole life; never returns into the daemon's loop, whatever happens."""
    try:
        for signo in (signal.SIGTERM, signal.SIGINT):  # the daemon's handler would run its cleanup here
            signal.signal(signo, signal.SIG_DFL)
        os.close(taken_r)
        return _spare(listener, taken_w, hot, memo, daemon, fresh)
    except BaseException:  # a worker's failure is its caller's direct path, never the daemon's loop
        return 1


def _spare(listener: socket.socket, taken: int, hot: set[int], memo: int, daemon: int,
           fresh: Callable[[], bool]) -> int:
    """A worker: copy the pages calls write now, while no call waits, then take one call (and report the pages
    it wrote in `memo`, when the daemon is still learning them)."""
    from gpuhook.cli import warm_memory

    _parent_death(signal.SIGTERM)  # a waiting worker goes with its daemon
    if os.getppid() != daemon:  # it went before the line above: nobody would end this worker
        return 0
    warm_memory.populate(hot)
    ranges = warm_memory.writable() if memo >= 0 else []
    conn, _ = listener.accept()
    _parent_death(0)  # a worker holding a call finishes it, whatever happens to the daemon
    listener.close()
    with contextlib.suppress(OSError):  # a daemon that is gone forks no next spare: the call is served anyway
        os.write(taken, os.getpid().to_bytes(4, "little"))  # the daemon forks the next spare meanwhile
    os.close(taken)
    status = _work(conn, fresh)
    if memo >= 0:  # after the answer: the caller does not wait for this
        with contextlib.suppress(OSError):  # a hook worker in a container's namespaces may not see this /proc
            warm_memory.report(memo, warm_memory.owned(ranges))
    return status


def _parent_death(signo: int) -> None:
    """The signal this process gets when its parent ends (0: none). Changes this process."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signo, 0, 0, 0)


# the rooms the GPU path, the hooks and tuning load from (lazily, in the direct path); the workers find them loaded
_ROOMS = ("request", "host", "vendors", "plan", "apply", "tuning", "gpu_path")


def _preload() -> None:
    """Import what the workers run, once: every module of the GPU path's rooms (with the vendors' packages'
    modules, their simulators aside: they serve no call), the shim and the hook, and pynvml where installed
    (tuning loads it). Lists the rooms' folders itself: pkgutil's walk would load inspect (2.5 MiB) for nothing."""
    import importlib

    base = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    names = ["gpuhook.cli.shim", "gpuhook.cli.hook", "gpuhook.syscalls", "gpuhook.logs", "pynvml"]
    for room in _ROOMS:
        for folder, dirs, files in os.walk(os.path.join(base, room)):
            dirs[:] = sorted(d for d in dirs if os.path.exists(os.path.join(folder, d, "__init__.py")))
            package = "gpuhook." + os.path.relpath(folder, base).replace(os.sep, ".")
            names += [f"{package}.{f[:-3]}" for f in sorted(files)
                      if f.endswith(".py") and f != "__init__.py" and not f.startswith("sim")]
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
    _preload_host()


def _preload_host() -> None:
    """The host this daemon's config names, discovered once (what vendors remember of it, NVIDIA's driver files,
    the workers then find in memory), and its libamd_smi.so loaded (not started) where it has one: AMD tuning
    calls it through ctypes (host/amd_smi_lib.py), and a worker then finds it mapped. A config not validated yet
    is validated in a child, so that the daemon (and every worker it forks) stays without jsonschema's 9 MiB."""
    from gpuhook.config import load
    from gpuhook.errors import GpuhookError
    from gpuhook.host.root import Root
    from gpuhook.vendors.discover import discover

    pid = os.fork()  # the config validated (and its cache written) by a child: jsonschema never loads in here
    if pid == 0:
        try:
            load()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    try:
        root = Root(load().host_root)
        discover(root)  # what vendors remember of the host (vendors.discover.refresh keeps it current)
        library = os.path.join(root.resolve("/opt/rocm"), "lib/libamd_smi.so")
        if os.path.exists(library):
            import ctypes

            ctypes.CDLL(library)
    except (GpuhookError, OSError, ValueError):
        return  # the workers load it themselves, as the direct path does


def _listen(path: str) -> socket.socket:
    """The listening socket at `path`, reachable by root only (its directory made 0700 if new; the socket 0600)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)  # a stale socket of a daemon that died
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    old = os.umask(0o177)
    try:
        s.bind(path)
    finally:
        os.umask(old)
    s.listen(64)
    return s


def _same_socket(path: str, mine: tuple[int, int]) -> bool:
    """Whether `path` is still the socket file this daemon made."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == mine


def installation() -> Installation:
    """The identity of the code the daemon runs: every file of a module it has loaded (gpuhook's, the standard
    library's, its dependencies') and every file of the gpuhook package (which workers may import later), each
    as (path, device, inode, mtime). Reads the package's directories; stats each file."""
    base = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = {f for m in list(sys.modules.values()) if isinstance(f := getattr(m, "__file__", None), str)}
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        paths.update(os.path.join(folder, f) for f in files if f.endswith((".py", ".json", ".toml", ".so")))
    return _identity(sorted(paths))


def _identity(paths: list[str]) -> Installation:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((path, 0, 0, 0))
            continue
        out.append((path, st.st_dev, st.st_ino, st.st_mtime_ns))
    return tuple(out)


def _current(installed: Installation) -> bool:
    """Whether every file of `installed` is still the one loaded (none replaced, changed or removed)."""
    return _identity([entry[0] for entry in installed]) == installed


def _answer(conn: socket.socket, text: bytes) -> None:
    with contextlib.suppress(OSError):  # the caller is gone: nobody waits for the answer
        conn.send(text)
    conn.close()


def _work(conn: socket.socket, fresh: Callable[[], bool]) -> int:
    """One call, in the forked worker; the exit status of the worker (the caller has the real one). Served only
    for a caller that is what an engine's runtime call is (trusted_caller), by code that is still the installed
    code (`fresh()`), with a config only root can have written (_own_config); else "direct"."""
    try:
        conn.send(b"A")  # the caller sends its call, and its descriptors, only now
        conn.settimeout(_ACK_WAIT)
        pid, uid, _ = _peer(conn)
        msg, fds, flags, _ = socket.recv_fds(conn, MAX_MESSAGE, _FDS)
        conn.settimeout(None)
        call = _parse(msg) if uid == 0 and len(fds) == _FDS and not flags & socket.MSG_TRUNC else None
        if call is None or not trusted_caller(pid, conn) or not fresh() or not _own_config(call[4]):
            _answer(conn, b"direct")
            return 0
        _adopt(fds)
    except OSError:
        return 0  # the caller is gone, or sent nothing usable: it takes its direct path
    kind, mask, exe, argv, env = call
    os.umask(mask)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [exe, *argv[1:]]
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the caller's, for the call's life)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    answer = _run(kind, argv, pid)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    _answer(conn, answer)
    return 0


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the caller, from the kernel."""
    import struct

    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def _parse(msg: bytes) -> tuple[str, int, str, list[str], dict[str, str]] | None:
    """(kind, umask, exe, argv, env) of a call message; None for anything else."""
    fields = msg.split(b"\0")
    if len(fields) < 6 or fields[0] != VERSION or fields[-1] != b"" or fields[1] not in (b"runtime", b"hook"):
        return None
    try:
        mask, argc = int(fields[2], 8), int(fields[3])
        text = [f.decode("utf-8", "surrogateescape") for f in fields[4:-1]]
    except ValueError:
        return None
    if argc < 1 or argc >= len(text) or not 0 <= mask <= 0o777:
        return None
    exe, argv, env = text[0], text[1:1 + argc], text[1 + argc:]
    if not exe.startswith("/") or any("=" not in e for e in env):
        return None
    return fields[1].decode(), mask, exe, argv, dict(e.split("=", 1) for e in env)


_NAMESPACES = ("mnt", "pid", "user", "cgroup", "ipc", "uts")
_SO_PEERPIDFD = 77  # Linux 6.5: a pidfd of the process that connected


def trusted_caller(pid: int, conn: socket.socket | None = None) -> bool:
    """Whether the process `pid` is what an engine's call to the runtime or a runtime's hook is: in this daemon's
    own namespaces (mount, pid, user, ...), at this daemon's root directory, with every capability this daemon
    has. A container's process (another mount or pid namespace, a user namespace, Docker's reduced capabilities,
    a socket bind-mounted into it, a chroot into a view of the host) is none of these. Reads /proc; the pidfd of
    `conn`'s peer, where the kernel gives one, proves the pid was not reused meanwhile."""
    try:
        for ns in _NAMESPACES:
            mine, theirs = os.stat(f"/proc/self/ns/{ns}"), os.stat(f"/proc/{pid}/ns/{ns}")
            if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
                return False
        mine, theirs = os.stat("/"), os.stat(f"/proc/{pid}/root")
        if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
            return False
        if _capabilities("self") != _capabilities(str(pid)) or _capabilities("self") is None:
            return False
    except OSError:
        return False
    return conn is None or _same_process(conn, pid)


def _capabilities(pid: str) -> tuple[int, int] | None:
    """(effective, bounding) capability sets of a process, from its status file (bounded read)."""
    fd = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = os.read(fd, 8192).decode(errors="replace")
    finally:
        os.close(fd)
    found = dict(line.split(":", 1) for line in text.splitlines() if line.startswith(("CapEff:", "CapBnd:")))
    if len(found) != 2:
        return None
    return int(found["CapEff"], 16), int(found["CapBnd"], 16)


def _same_process(conn: socket.socket, pid: int) -> bool:
    """Whether the peer that connected is still the live process `pid` (its pidfd's fdinfo); True where the kernel
    has no SO_PEERPIDFD (then the pid is what SO_PEERCRED said, and the caller is blocked waiting on us)."""
    try:
        pidfd = conn.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD)
    except OSError:
        return True
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as f:
            info = f.read(4096)
    except OSError:
        return False
    finally:
        os.close(pidfd)
    line = next((ln for ln in info.splitlines() if ln.startswith(b"Pid:")), b"Pid: -1")
    return line.split()[1] == str(pid).encode()


def _own_config(env: dict[str, str]) -> bool:
    """Whether the config the call names (GPUHOOK_CONFIG, else the default) is root's own: a regular file that
    root owns and only root may write, or the default path absent. Reads its status."""
    import stat as st_mod

    from gpuhook.configfile import DEFAULT_PATH, ENV

    path = env.get(ENV) or DEFAULT_PATH
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path == DEFAULT_PATH
    except OSError:
        return False
    return st_mod.S_ISREG(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022


def _adopt(fds: list[int]) -> None:
    """Take the caller's descriptors as stdin, stdout, stderr and working directory (the caller shares this
    daemon's namespaces and root: trusted_caller)."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    os.fchdir(fds[3])
    os.close(fds[3])


def _run(kind: str, argv: list[str], caller: int) -> bytes:
    """The call, as the direct path would run it; its answer to the caller."""
    if kind == "runtime":
        from gpuhook.cli import shim

        return _exited(lambda: b"exec " + shim.prepare(shim.RuncArgs(argv[1:]), caller).encode())
    if os.path.basename(argv[0]) == "nvidia-container-runtime-hook":  # Docker's --gpus hook, NVIDIA's command line
        from gpuhook.cli import nvidia_hook

        return _exited(lambda: b"exit %d" % nvidia_hook.main(argv[1:]))
    from gpuhook.cli import hook

    hook_args = hook.parse(argv[1:])
    if hook_args is None:
        return b"direct"  # only the hook is a hot path; everything else starts Python as always
    stage, folders, mounts, claimed = hook_args
    return _exited(lambda: b"exit %d" % hook.main(stage, folders, mounts=mounts or None, claimed=claimed))


def _exited(call: Callable[[], bytes]) -> bytes:
    """The call's answer, or "exit N" for the SystemExit it raised (a refusal, already reported)."""
    try:
        return call()
    except SystemExit as e:
        code = e.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
        return b"exit %d" % (code or 0)
    except Exception as e:  # fail closed, as the direct path would
        text = one_line(e)
        print(f"gpuhook: internal error in the warm helper ({type(e).__name__}: {text}); please report this",
              file=sys.stderr)
        return b"exit 1"
