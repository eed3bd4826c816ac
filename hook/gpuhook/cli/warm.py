"""`gpuhook warm`: the optional warm helper. A root daemon that has started Python and imported the GPU path
once, and keeps a pool of long-lived workers forked from it, each waiting for calls from gpuhook-runtime's native
front end or the native hook (cli/native/warm.h), so that a GPU container pays neither an interpreter's start nor
its imports nor a fork, and the runtime is exec'd from the small native process rather than from a grown Python
one.

A worker (cli/warm_worker.py) is the direct path, kept: it takes the caller's stdin, stdout, stderr and working
directory (descriptors), argv, environment and umask for one call, runs the same code (cli/shim.py's `prepare`,
cli/hook.py), answers "exit N" or "exec RUNTIME", puts its own state back and waits for the next call. What it
keeps between calls is what the code keeps of the host for any process (the modules, NVIDIA's driver files while
unchanged, the config's cache by its file's identity); each call reads the config's identity, the host and the
image anew. It serves only a caller that is what an engine's call is (cli/warm_trust.py: root, in the daemon's own
namespaces and root directory, with all its capabilities; docs/warm-helper.md), naming a config only root can
write, while the installed code is still the code loaded; every call is checked, not a worker's first alone. A
worker exits after its answer when anything about it is doubtful (cli/warm_state.py), and the daemon forks
another when the pool needs one (cli/warm_pool.py): steady state forks nothing. Any doubt answers "direct" and
the caller starts Python itself; an installation changed under the daemon also ends it, for its service manager
to start it anew. Stopping or killing the daemon only ever costs the callers their direct path.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import time

from gpuhook.cli.warm_pool import SPARES, Pool
from gpuhook.cli.warm_worker import BACK, GO, TOOK

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SOCKET = "/run/gpuhook/warm.sock"  # native/warm.h's WARM_SOCKET; GPUHOOK_WARM_SOCKET overrides both sides
LEARN_FROM = 16  # forked workers whose first call's written pages the daemon learns (warm_memory.py)
Installation = tuple[tuple[str, int, int, int], ...]  # (path, device, inode, mtime) of every file the code is


def serve(path: str = "", spares: int = SPARES) -> int:
    """Listen on `path` (GPUHOOK_WARM_SOCKET, else SOCKET) until SIGTERM or SIGINT, or until the installation
    changes; 0 then. Binds a socket; forks workers."""
    path = path or os.environ.get("GPUHOOK_WARM_SOCKET") or SOCKET
    _preload()
    listener = _listen(path)
    listener.setblocking(False)  # a worker polls, then accepts without waiting: another may have taken the call
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

    gc.freeze()  # what was imported stays shared with the workers (no copy-on-write from the collector)
    daemon = _Daemon(listener, Pool(spares), fresh)
    try:
        daemon.run(lambda: _current(installed) and not (watch.usable() and watch.changed()))
    finally:
        if _same_socket(path, mine):
            os.unlink(path)  # first: no new caller queues for a daemon that is going
        listener.close()
        daemon.close()  # waiting workers go; a worker holding a call finishes it, then goes
    return 0


class _Daemon:
    """The daemon's side of the pool: each worker's channel, the pages calls write (warm_memory.py), the forks."""

    def __init__(self, listener: socket.socket, pool: Pool, fresh: Callable[[], bool]) -> None:
        self.listener, self.pool, self.fresh = listener, pool, fresh
        self.channels: dict[int, socket.socket] = {}  # pid -> the daemon's end of its channel
        self.pids: dict[int, int] = {}  # channel descriptor -> pid
        self.learning: dict[int, int] = {}  # pid -> the memory file it reports its first call's pages in
        self.hot: set[int] = set()
        self.forks = 0
        self.poller = select.poll()

    def run(self, current: Callable[[], bool]) -> None:
        """Keep the pool until `current()` (checked each second) is False. Forks; reads the workers' channels."""
        from gpuhook.vendors.discover import refresh

        checked = 0.0
        while True:
            now = time.monotonic()
            if now - checked >= 1.0:
                if not current():
                    return
                with contextlib.suppress(Exception):  # what vendors remember: the workers read it otherwise
                    refresh()
                checked = now
            for _ in range(self.pool.to_fork(now)):
                self._fork(now)
            retired = self.pool.to_retire(now)
            if retired is not None:
                with contextlib.suppress(OSError):  # gone already: its channel's end says so next
                    self.channels[retired].send(GO)
            wait = min(self.pool.wake(now), max(0.0, checked + 1.0 - now))
            for fd, events in self.poller.poll(wait * 1000 + 1):
                self._heard(fd, events)
            self._reap()

    def _fork(self, now: float) -> None:
        """Fork a worker (cli/warm_worker.py), with a channel of its own; the child never returns here."""
        memo = os.memfd_create("gpuhook-warm-pages") if self.forks < LEARN_FROM else -1
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for signo in (signal.SIGTERM, signal.SIGINT):  # the daemon's handler would run its cleanup here
                    signal.signal(signo, signal.SIG_DFL)
                ours.close()
                for other in self.channels.values():  # the daemon alone holds them: its exit ends the waiting
                    other.close()
                for page_file in self.learning.values():
                    os.close(page_file)
                from gpuhook.cli.warm_worker import live

                code = live(self.listener, theirs, self.hot, memo, self.fresh)
            except BaseException:  # a worker's failure is its caller's direct path, never the daemon's loop
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        self.forks += 1
        self.channels[pid] = ours
        self.pids[ours.fileno()] = pid
        self.poller.register(ours, select.POLLIN)
        if memo >= 0:
            self.learning[pid] = memo
        self.pool.forked(pid, now)

    def _heard(self, fd: int, events: int) -> None:
        """A worker's messages (all of them: one batch of events is counted whole before the pool decides), or
        its channel closed (it exited)."""
        pid = self.pids.get(fd)
        if pid is None:
            return
        while True:
            said = b""
            if events & select.POLLIN:
                try:
                    said = self.channels[pid].recv(16, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    return
                except OSError:
                    said = b""
            now = time.monotonic()
            if said == TOOK:
                if self.pool.calls.get(pid):  # its first call's pages are written by now
                    self._learn(pid)
                self.pool.took(pid, now)
            elif said == BACK:
                self.pool.back(pid, now)
            else:
                self._forget(pid, now)
                return

    def _learn(self, pid: int) -> None:
        """The pages `pid`'s first call wrote, added to those the next forks copy ahead."""
        from gpuhook.cli import warm_memory

        memo = self.learning.pop(pid, -1)
        if memo >= 0:
            if len(self.hot) < warm_memory.MAX_PAGES:
                with contextlib.suppress(OSError):
                    self.hot.update(warm_memory.read(memo))
            os.close(memo)

    def _forget(self, pid: int, now: float) -> None:
        channel = self.channels.pop(pid, None)
        if channel is not None:
            self.pids.pop(channel.fileno(), None)
            self.poller.unregister(channel)
            channel.close()
        self._learn(pid)
        self.pool.gone(pid, now)

    def _reap(self) -> None:
        """Collect the workers that exited."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._forget(pid, time.monotonic())

    def close(self) -> None:
        """Let every worker go: a waiting one at once, one holding a call after its answer. Closes the channels."""
        for pid in list(self.channels):
            self._forget(pid, time.monotonic())
        for memo in self.learning.values():
            os.close(memo)
        self.learning.clear()


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
