"""The warm helper (`gpuhook warm`) in front of real runc: what its workers do for the native front ends is what the
direct path does, and every way the helper can fail or be refused leaves the direct path.

The callers run from a directory of their own: the native binaries, beside a `gpuhook-runtime-py` and a `gpuhook`
that only leave a mark and exit 99. A container that works there while no mark appears was served by the helper
from start to end (the shim's work, the prestart and the poststop)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from gpuhook.cli.launcher import write_launchers
from gpuhook.testing.bundle import make_bundle, oci_config
from gpuhook.testing.simulate import HostSpec, build_host

from .conftest import HOOK_DIR, stop_container

NATIVE = ("gpuhook-runtime", "gpuhook-hook", "gpuhook-createhook")
NOBODY = 65534
EMPTY_LEDGER = '{\n "leases": {},\n "seq": 7,\n "settings": {},\n "version": 1\n}\n'  # tuning/ledger.py's rendering
NV0 = {"gpuhook.dev/gpus": "0", "gpuhook.dev/vendor": "nvidia"}
AMD1 = {"gpuhook.dev/gpus": "1", "gpuhook.dev/vendor": "amd"}
SEE = ("for f in /dev/nvidia* /dev/kfd /dev/dri/*; do [ -e $f ] && stat -c 'NODE %n %t:%T' $f; done; "
       "for g in /proc/driver/nvidia/gpus/*; do [ -e $g ] && echo \"PROCGPU ${g##*/}\"; done; "
       "dlopen-probe libcuda.so.1; echo \"UID $(id -u)\"")
SEEN = {  # request, the nodes the container sees (stat's hex major:minor), what else it sees
    "nvidia": (NV0, {"/dev/nvidia0": "c3:0", "/dev/nvidiactl": "c3:ff", "/dev/nvidia-uvm": "1fd:0",
                     "/dev/nvidia-uvm-tools": "1fd:1"},
               ["PROCGPU 0000:10:00.0", "dlopen libcuda.so.1 ok cuDriverGetVersion=12040"]),
    "amd": (AMD1, {"/dev/kfd": "1ff:0", "/dev/dri/card2": "e2:2", "/dev/dri/renderD129": "e2:81"}, []),
}


def _nodes(out: str) -> dict[str, str]:
    return {p[1]: p[2] for line in out.splitlines() if (p := line.split())[:1] == ["NODE"]}


def _message(kind: bytes, argv: list[bytes], env: list[bytes], exe: bytes = b"/usr/bin/gpuhook-runtime-py") -> bytes:
    """A call as native/warm.h sends it: NUL-terminated version, kind, umask, argc, exe, argv..., env...."""
    fields = [b"gpuhook-warm/1", kind, b"22", str(len(argv)).encode(), exe, *argv, *env]
    return b"".join(f + b"\0" for f in fields)


def _ask(sock: Path, message: bytes, fds: list[int] | None = None) -> list[bytes]:
    """Every message the helper at `sock` sends a root caller that sent `message` (and `fds`), until it hangs up."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(5)
        s.connect(str(sock))
        if fds:
            socket.send_fds(s, [message], fds)
        else:
            s.send(message)
        answers = []
        while chunk := s.recv(8192):
            answers.append(chunk)
        return answers


class Daemon:
    """`gpuhook warm --socket SOCK` from `bindir`, in a session of its own (its workers are its process group)."""

    def __init__(self, bindir: Path, sock: Path, said: Path) -> None:
        self.sock, self.said = sock, said
        with open(self.said, "wb") as out:
            self.proc = subprocess.Popen([str(bindir / "gpuhook"), "warm", "--socket", str(sock)],
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         env={"PATH": os.environ["PATH"]}, start_new_session=True)
        for _ in range(300):  # until it answers (a socket left by an earlier daemon may be there already)
            try:
                if _ask(sock, b"are you there") == [b"A", b"direct"]:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the warm helper did not come up: {self.said.read_text()}")

    def signal_group(self, signo: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signo)

    def stop(self) -> Stopped:
        """SIGTERM, as a service manager stops it, and what became of it. Whatever is left of its processes is
        killed, and its socket removed, either way."""
        self.signal_group(signal.SIGCONT)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        for _ in range(40):  # the spares it stopped, going
            stray = _living(self.proc.pid)
            if not stray:
                break
            time.sleep(0.05)
        self.signal_group(signal.SIGKILL)
        self.proc.wait()
        left = os.path.lexists(self.sock)
        if left:
            os.unlink(self.sock)
        return Stopped(rc, left, self.said.read_text(), stray)


@dataclass
class Stopped:
    rc: int | None  # None: still running 10 s after SIGTERM
    left: bool  # its socket was still there
    said: str  # its stdout and stderr
    stray: list[int]  # its processes still alive 2 s after it exited


def _living(group: int) -> list[int]:
    """The processes of process group `group` that have not exited (zombies do not count)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            found.append(int(entry))
    return found


@dataclass
class Site:
    """A simulated host (2 NVIDIA + 2 AMD), its config, the real launchers and the callers' directory."""

    tmp: Path
    host: str
    config: Path
    bin: Path
    callers: Path
    marker: Path
    rootfs: str


def _launchers(dest: Path, entries: list[str]) -> Path:
    dest.mkdir()
    written = write_launchers(str(dest), sys.executable, entries)
    assert all(name in written for name in NATIVE), f"the native binaries did not build: {written}"
    return dest


def _callers(real: Path, dest: Path, marker: Path) -> Path:
    """The native binaries beside Python entry points that only record that they ran (and their stdin) and exit 99."""
    dest.mkdir()
    for name in NATIVE:
        shutil.copy2(real / name, dest / name)
    for name in ("gpuhook-runtime-py", "gpuhook"):
        keep_stdin = f"cat >> {marker}.stdin\n" if name == "gpuhook" else ""
        (dest / name).write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n{keep_stdin}exit 99\n')
        os.chmod(dest / name, 0o755)
    return dest


def _site(tmp: Path, rootfs: str, entries: list[str] | None = None) -> Site:
    host = build_host(str(tmp / "host"), HostSpec(nvidia=2, amd=2))
    config = tmp / "config.toml"
    config.write_text(f'host_root = "{host}"\nstate_dir = "{tmp}/state"\nlog_file = "{tmp}/gpuhook.log"\n')
    real = _launchers(tmp / "bin", entries or [HOOK_DIR, sysconfig.get_paths()["purelib"]])
    marker = tmp / "direct-path-ran"
    return Site(tmp, host, config, real, _callers(real, tmp / "callers", marker), marker, rootfs)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, base_rootfs: str) -> Site:
    return _site(tmp_path_factory.mktemp("warm"), base_rootfs)


def _stopped_cleanly(daemon: Daemon) -> None:
    stopped = daemon.stop()
    assert stopped.rc == 0, stopped.said
    assert not stopped.left, f"the helper left its socket {daemon.sock} behind"
    assert not stopped.stray, f"processes of the helper outlived it: {stopped.stray}"


@pytest.fixture(scope="module")
def daemon(site: Site) -> Iterator[Daemon]:
    """The helper for the module, in a socket directory it makes itself; stopped by SIGTERM after."""
    d = Daemon(site.bin, site.tmp / "run" / "warm.sock", site.tmp / "daemon.out")
    yield d
    _stopped_cleanly(d)


@pytest.fixture
def own_daemon(site: Site, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start a helper of the test's own (one to stop, kill or change): own_daemon(bindir=site.bin, sock=...)."""
    started: list[Daemon] = []

    def start(bindir: Path | None = None, sock: Path | None = None) -> Daemon:
        said = tmp_path / f"daemon{len(started)}.out"
        started.append(Daemon(bindir or site.bin, sock or tmp_path / "run" / "warm.sock", said))
        return started[-1]

    yield start
    for d in started:
        d.stop()


@dataclass
class Ran:
    rc: int
    out: str
    err: str
    bundle: Path
    before: bytes
    cid: str
    log: Path
    seconds: float  # until the runtime exited
    held: bool = False  # its stdout or stderr was still open elsewhere 2 s after it exited


def _drain(pipe: IO[bytes], into: list[bytes]) -> None:
    while chunk := os.read(pipe.fileno(), 65536):
        into.append(chunk)


@dataclass
class Containers:
    """Bundles on the site's base image, run through a front end; every container is deleted after the test."""

    site: Site
    tmp: Path
    cids: list[str] = field(default_factory=list)

    def bundle(self, annotations: dict[str, str], script: str, edit: Callable[[dict[str, Any]], None] | None = None,
               args: list[str] | None = None) -> Path:
        b = self.tmp / f"b-{uuid.uuid4().hex[:8]}"
        spec = oci_config(args or ["sh", "-c", script], annotations=annotations, uid=1000, gid=1000)
        if edit:
            edit(spec)
        make_bundle(str(b), spec, self.site.rootfs)
        return b

    def env(self, sock: Path | str | None) -> dict[str, str]:
        env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(self.site.config)}
        if sock is not None:
            env["GPUHOOK_WARM_SOCKET"] = str(sock)
        return env

    def run(self, runtime: Path | str, bundle: Path, sock: Path | str | None, detach: bool = False) -> Ran:
        """`runtime --log L --log-format json run [-d] --bundle B ID`; a detached container's stdio on /dev/null and
        the runtime's stderr in a file (a pipe would stay open)."""
        cid = "w-" + uuid.uuid4().hex[:10]
        self.cids.append(cid)
        log = self.tmp / f"{cid}.runc.json"
        before = (bundle / "config.json").read_bytes()
        argv = [str(runtime), "--log", str(log), "--log-format", "json", "run", *(["-d"] if detach else []),
                "--bundle", str(bundle), cid]
        start = time.monotonic()
        if detach:
            with open(bundle / "stderr", "w") as err:
                rc = subprocess.run(argv, env=self.env(sock), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err, timeout=60, check=False).returncode
            return Ran(rc, "", (bundle / "stderr").read_text(), bundle, before, cid, log, time.monotonic() - start)
        proc = subprocess.Popen(argv, env=self.env(sock), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        read: tuple[list[bytes], list[bytes]] = ([], [])
        readers = [threading.Thread(target=_drain, args=(pipe, into), daemon=True)
                   for pipe, into in zip((proc.stdout, proc.stderr), read, strict=True)]
        for t in readers:
            t.start()
        rc = proc.wait(60)
        seconds = time.monotonic() - start
        for t in readers:
            t.join(2)
        held = any(t.is_alive() for t in readers)
        for t in readers:  # whoever holds the pipes lets go some time (a stopped helper: once continued)
            t.join(0 if held else 60)
        out, text = (b"".join(x).decode(errors="replace") for x in read)
        return Ran(rc, out, text, bundle, before, cid, log, seconds, held)

    def delete(self, cid: str) -> None:
        """`runc kill` and `runc delete`, plain runc (the poststop hook in config.json runs)."""
        stop_container(cid)


@pytest.fixture
def containers(site: Site, tmp_path: Path) -> Iterator[Containers]:
    site.marker.unlink(missing_ok=True)
    Path(f"{site.marker}.stdin").unlink(missing_ok=True)
    c = Containers(site, tmp_path)
    yield c
    for cid in c.cids:
        subprocess.run(["runc", "delete", "--force", cid], capture_output=True, check=False)


def _direct_path(site: Site) -> str:
    """What the callers' Python entry points recorded: "" when the helper did everything."""
    return site.marker.read_text() if site.marker.exists() else ""


def _sees_its_gpu(r: Ran, vendor: str) -> None:
    _, nodes, more = SEEN[vendor]
    assert r.rc == 0, r.err
    assert _nodes(r.out) == nodes
    for line in more:
        assert line in r.out.splitlines()
    if vendor != "nvidia":
        assert "PROCGPU" not in r.out
    assert "UID 1000" in r.out
    assert not r.held, "the runtime's stdout or stderr stayed open after it exited"


# -- the warm path --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("vendor", ["nvidia", "amd"])
def test_one_gpu_of_two_through_the_warm_path(site: Site, daemon: Daemon, containers: Containers,
                                              vendor: str) -> None:
    r = containers.run(site.callers / "gpuhook-runtime", containers.bundle(SEEN[vendor][0], SEE), daemon.sock)
    _sees_its_gpu(r, vendor)
    assert _direct_path(site) == ""


def test_a_burst_of_starts_is_served_warm_each_with_its_gpu(site: Site, daemon: Daemon, containers: Containers) -> None:
    """Twelve containers at once, more than the daemon keeps waiting workers for: the rest queue for the next
    forks (well within the second a caller waits for its acknowledgement), none takes the direct path."""
    from concurrent.futures import ThreadPoolExecutor

    vendors = ["nvidia", "amd"] * 6
    bundles = [containers.bundle(SEEN[v][0], SEE) for v in vendors]
    start = time.monotonic()
    with ThreadPoolExecutor(len(bundles)) as pool:
        results = list(pool.map(lambda b: containers.run(site.callers / "gpuhook-runtime", b, daemon.sock), bundles))
    for vendor, r in zip(vendors, results, strict=True):
        _sees_its_gpu(r, vendor)
    assert _direct_path(site) == ""
    assert time.monotonic() - start < 30


def test_refusal_through_the_warm_path(site: Site, daemon: Daemon, containers: Containers) -> None:
    b = containers.bundle({"gpuhook.dev/gpus": "7", "gpuhook.dev/vendor": "nvidia"}, "echo yes > /ran")
    r = containers.run(site.callers / "gpuhook-runtime", b, daemon.sock)
    assert r.rc == 1
    (line,) = r.err.splitlines()
    assert line.startswith("gpuhook-runtime: ") and "no NVIDIA GPU 7" in line and "it has: 0" in line, r.err
    (entry,) = [json.loads(x) for x in r.log.read_text().splitlines()]
    assert entry["level"] == "error" and entry["msg"] == "gpuhook: " + line.removeprefix("gpuhook-runtime: ")
    assert (b / "config.json").read_bytes() == r.before
    assert not (b / "rootfs/ran").exists()
    assert subprocess.run(["runc", "state", r.cid], capture_output=True, check=False).returncode != 0
    assert _direct_path(site) == ""


def _nvml(site: Site) -> dict[int, list[int]]:
    text = Path(f"{site.host}/var/lib/gpuhook-sim/nvml").read_text()
    return {int(f[0]): [int(x) for x in f[1:]] for f in (ln.split() for ln in text.splitlines())}


def _nvml_calls(site: Site) -> list[str]:
    path = Path(f"{site.host}/var/lib/gpuhook-sim/nvml.log")
    return [ln.split()[0] for ln in path.read_text().splitlines()] if path.exists() else []


def test_tuning_by_the_warm_hooks(site: Site, daemon: Daemon, containers: Containers) -> None:
    b = containers.bundle({**NV0, "gpuhook.dev/clocks": "1500"}, "", args=["sleep", "60"])
    r = containers.run(site.callers / "gpuhook-runtime", b, daemon.sock, detach=True)
    assert r.rc == 0, r.err
    hooks = json.loads((b / "config.json").read_text())["hooks"]
    for stage in ("prestart", "poststop"):
        (hook,) = [h for h in hooks[stage] if h["args"][1:2] == ["hook"]]
        assert hook["path"] == str(site.callers / "gpuhook-hook")
        assert f"GPUHOOK_WARM_SOCKET={daemon.sock}" in hook["env"]
    assert _nvml(site)[0][:2] == [1500, 1500] and _nvml(site)[1][:2] == [0, 0]
    containers.delete(r.cid)
    assert _nvml(site)[0][:2] == [0, 0] and _nvml(site)[1][:2] == [0, 0]
    assert _nvml_calls(site) == ["set-clocks", "reset-clocks"]
    assert _direct_path(site) == ""


def _hooked(site: Site, front: Path, sock: Path) -> Callable[[dict[str, Any]], None]:
    """Hook mode: config.json's prestart and poststop hooks are `front`/gpuhook-hook, told the helper's socket."""

    def edit(spec: dict[str, Any]) -> None:
        env = [f"GPUHOOK_CONFIG={site.config}", f"GPUHOOK_WARM_SOCKET={sock}"]
        spec["hooks"] = {stage: [{"path": str(front / "gpuhook-hook"), "args": ["gpuhook", "hook", stage],
                                  "env": env}] for stage in ("prestart", "poststop")}

    return edit


def test_hook_mode_through_the_native_hook(site: Site, daemon: Daemon, containers: Containers) -> None:
    r = containers.run("runc", containers.bundle(NV0, SEE, edit=_hooked(site, site.callers, daemon.sock)),
                       daemon.sock)
    assert r.rc == 0, r.err
    assert set(_nodes(r.out)) == set(SEEN["nvidia"][1])
    assert "dlopen libcuda.so.1 ok cuDriverGetVersion=12040" in r.out
    assert _direct_path(site) == ""


@pytest.mark.parametrize("ledger", [None, EMPTY_LEDGER, '{"leases": {}, "seq": 1, "settings": {}, "version": 1}'],
                         ids=["no ledger", "an empty ledger", "a ledger not in gpuhook's empty form"])
def test_a_poststop_with_nothing_to_restore_starts_nothing(site: Site, daemon: Daemon, containers: Containers,
                                                           ledger: str | None) -> None:
    """The poststop's own env has no helper: where it still starts no `gpuhook`, the native front end answered."""
    def edit(spec: dict[str, Any]) -> None:
        _hooked(site, site.callers, daemon.sock)(spec)
        spec["hooks"]["poststop"][0]["env"] = [f"GPUHOOK_CONFIG={site.config}", "GPUHOOK_WARM_SOCKET="]

    path = site.tmp / "state" / "ledger.json"
    kept = path.read_bytes() if path.exists() else None
    try:
        if ledger is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(ledger)
        r = containers.run("runc", containers.bundle(NV0, SEE, edit=edit), daemon.sock)
        assert r.rc == 0, r.err
        assert set(_nodes(r.out)) == set(SEEN["nvidia"][1])
        went = "hook poststop" in _direct_path(site)
        assert went == (ledger is not None and ledger != EMPTY_LEDGER), _direct_path(site)
    finally:
        path.unlink(missing_ok=True)
        if kept is not None:
            path.write_bytes(kept)


def test_the_hook_front_end_keeps_the_state_for_the_direct_path(site: Site, daemon: Daemon,
                                                                 containers: Containers) -> None:
    """A call the helper answers "direct" (only `hook` is served) gets `gpuhook` beside it, with stdin unread."""
    state = b'{"ociVersion": "1.0.2", "id": "x", "status": "creating"}' * 100
    done = subprocess.run(["gpuhook", "version"], executable=site.callers / "gpuhook-hook", input=state,
                          env=containers.env(daemon.sock), capture_output=True, timeout=30, check=False)
    assert done.returncode == 99, done.stderr
    assert _direct_path(site) == f"{site.callers}/gpuhook version\n"
    assert Path(f"{site.marker}.stdin").read_bytes() == state


# -- the direct path, whatever the helper does -----------------------------------------------------------------------

def test_no_socket_is_the_direct_path(site: Site, containers: Containers) -> None:
    r = containers.run(site.bin / "gpuhook-runtime", containers.bundle(NV0, SEE), site.tmp / "no-such-dir/warm.sock")
    _sees_its_gpu(r, "nvidia")


def test_a_stopped_helper_costs_the_ack_timeout_only(site: Site, own_daemon: Callable[..., Daemon],
                                                    containers: Containers) -> None:
    d = own_daemon()
    d.signal_group(signal.SIGSTOP)  # the daemon and its spare workers
    try:
        r = containers.run(site.bin / "gpuhook-runtime", containers.bundle(NV0, SEE), d.sock)
    finally:
        d.signal_group(signal.SIGCONT)
    assert r.rc == 0, r.err
    assert 1.0 <= r.seconds < 5, r.seconds  # it waited for the acknowledgement (1 s), then took the direct path
    assert not r.held, ("the stopped helper holds the runtime's stdout/stderr (passed to it before it acknowledged): "
                        "whoever reads them to their end (an engine, runc for a hook) waits until it is continued")
    _sees_its_gpu(r, "nvidia")
    served = containers.run(site.callers / "gpuhook-runtime", containers.bundle(NV0, SEE), d.sock)
    _sees_its_gpu(served, "nvidia")  # continued, the helper serves again
    assert _direct_path(site) == ""


def test_a_stopped_helper_does_not_hold_up_runc_at_a_hook(site: Site, own_daemon: Callable[..., Daemon],
                                                          containers: Containers) -> None:
    """runc reads a hook's stdout and stderr to their end: nobody but the hook may keep them open."""
    d = own_daemon()
    d.signal_group(signal.SIGSTOP)
    later = threading.Timer(6, d.signal_group, (signal.SIGCONT,))  # however runc fares, the helper goes on
    later.start()
    try:
        r = containers.run("runc", containers.bundle(NV0, SEE, edit=_hooked(site, site.bin, d.sock)), d.sock)
    finally:
        later.cancel()
        d.signal_group(signal.SIGCONT)
    assert r.rc == 0, r.err
    assert r.seconds < 5, f"runc took {r.seconds:.1f} s: it waited at the hook for the stopped helper to go on"
    assert set(_nodes(r.out)) == set(SEEN["nvidia"][1])


def test_a_killed_helpers_socket_is_the_direct_path(site: Site, own_daemon: Callable[..., Daemon],
                                                    containers: Containers) -> None:
    d = own_daemon()
    d.signal_group(signal.SIGKILL)
    d.proc.wait()
    assert stat.S_ISSOCK(os.lstat(d.sock).st_mode)
    for _ in range(100):  # its workers die with it; then nobody listens
        try:
            _ask(d.sock, b"x")
        except ConnectionRefusedError:
            break
        except OSError:
            pass
        time.sleep(0.02)
    with pytest.raises(ConnectionRefusedError):
        _ask(d.sock, b"x")
    r = containers.run(site.bin / "gpuhook-runtime", containers.bundle(NV0, SEE), d.sock)
    _sees_its_gpu(r, "nvidia")
    assert r.seconds < 5


def test_an_empty_socket_setting_turns_the_helper_off(site: Site, containers: Containers) -> None:
    b = containers.bundle(NV0, SEE)
    r = containers.run(site.callers / "gpuhook-runtime", b, "")
    assert r.rc == 99
    assert _direct_path(site).splitlines() == [f"{site.callers}/gpuhook-runtime-py --log {r.log} --log-format json "
                                               f"run --bundle {b} {r.cid}"]
    state = b'{"ociVersion": "1.0.2", "id": "x", "status": "created", "pid": 1, "bundle": "/nowhere"}'
    done = subprocess.run(["gpuhook", "hook", "prestart"], executable=site.callers / "gpuhook-hook", input=state,
                          env=containers.env(""), capture_output=True, timeout=30, check=False)
    assert done.returncode == 99
    assert _direct_path(site).splitlines()[1:] == [f"{site.callers}/gpuhook hook prestart"]
    assert Path(f"{site.marker}.stdin").read_bytes() == state


# -- who may talk to whom ------------------------------------------------------------------------------------------

def test_the_socket_is_roots_only(daemon: Daemon) -> None:
    st = os.lstat(daemon.sock)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
    made = os.stat(daemon.sock.parent)
    assert stat.S_IMODE(made.st_mode) == 0o700 and made.st_uid == 0


CONNECT_AS_NOBODY = """
import errno, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(errno.errorcode[e.errno])
    sys.exit()
cwd = os.open(".", os.O_PATH | os.O_DIRECTORY)
socket.send_fds(s, [bytes.fromhex(sys.argv[2])], [0, 1, 2, cwd])
answers = []
while chunk := s.recv(8192):
    answers.append(chunk.decode())
print(" ".join(answers))
"""


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory everybody may search (/tmp/...), so that only a socket's own mode stands in the way."""
    path = Path(tempfile.mkdtemp(prefix="gpuhook-warm-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
                          cwd="/", capture_output=True, text=True, timeout=30, check=False)


def test_a_user_cannot_reach_the_helper(own_daemon: Callable[..., Daemon], open_dir: Path) -> None:
    d = own_daemon(sock=open_dir / "warm.sock")
    call = _message(b"runtime", [b"gpuhook-runtime", b"--version"], [b"PATH=/usr/bin:/bin"]).hex()
    refused = _as_nobody("/usr/bin/python3", "-I", "-c", CONNECT_AS_NOBODY, str(d.sock), call)
    assert refused.stdout.split() == ["EACCES"], refused.stderr
    os.chmod(d.sock, 0o666)  # were the socket open to all, the helper still serves root only
    answered = _as_nobody("/usr/bin/python3", "-I", "-c", CONNECT_AS_NOBODY, str(d.sock), call)
    assert answered.stdout.split() == ["A", "direct"], answered.stderr


SERVE_AS_NOBODY = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    try:
        c.recv(70000)
        c.send(b"A")
        c.send(b"exit 0")
    except OSError:
        pass
    c.close()
"""


def test_a_helper_that_is_not_root_is_not_believed(site: Site, containers: Containers, open_dir: Path) -> None:
    os.chown(open_dir, NOBODY, NOBODY)
    sock = open_dir / "warm.sock"
    impostor = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                                 "/usr/bin/python3", "-I", "-c", SERVE_AS_NOBODY, str(sock)], cwd="/",
                                stdout=subprocess.PIPE, text=True)
    try:
        assert impostor.stdout is not None and impostor.stdout.readline() == "ready\n"
        assert _ask(sock, b"anything") == [b"A", b"exit 0"]  # it would answer "done" to anyone who believed it
        b = containers.bundle(NV0, SEE)
        r = containers.run(site.callers / "gpuhook-runtime", b, sock)
    finally:
        impostor.kill()
        impostor.wait()
    assert r.rc == 99  # the direct path
    assert _direct_path(site).startswith(f"{site.callers}/gpuhook-runtime-py ")


def _null_fds() -> list[int]:
    return [os.open("/dev/null", os.O_RDONLY), os.open("/dev/null", os.O_WRONLY), os.open("/dev/null", os.O_WRONLY),
            os.open("/", os.O_PATH | os.O_DIRECTORY)]


GOOD = _message(b"runtime", [b"gpuhook-runtime", b"--version"], [b"PATH=/usr/bin:/bin"])
NOT_CALLS = [  # message, descriptors passed
    ("garbage", b"\x00\xffgarbage", 0),
    ("garbage with descriptors", b"\x00\xffgarbage", 4),
    ("a call with 3 descriptors", GOOD, 3),
    ("a call without descriptors", GOOD, 0),
    ("another version", GOOD.replace(b"gpuhook-warm/1", b"gpuhook-warm/9"), 4),
    ("an unknown kind", GOOD.replace(b"\0runtime\0", b"\0exec\0"), 4),
    ("a relative exe", GOOD.replace(b"/usr/bin/gpuhook-runtime-py", b"gpuhook-runtime-py"), 4),
    ("a call cut short", GOOD[:-1], 4),
    ("more than 64 KiB", GOOD + b"X=" + b"x" * (64 << 10) + b"\0", 4),
]


@pytest.mark.parametrize(("message", "nfds"), [c[1:] for c in NOT_CALLS], ids=[c[0] for c in NOT_CALLS])
def test_what_is_not_a_call_is_answered_direct(daemon: Daemon, message: bytes, nfds: int) -> None:
    fds = _null_fds()
    try:
        assert _ask(daemon.sock, message, fds[:nfds]) == [b"A", b"direct"]
    finally:
        for fd in fds:
            os.close(fd)


def test_a_real_call_from_python_is_served(site: Site, daemon: Daemon) -> None:
    """The control for the table above: such a call with its 4 descriptors is run (`--version` is passed on)."""
    call = _message(b"runtime", [b"gpuhook-runtime", b"--version"],
                    [b"PATH=/usr/sbin:/usr/bin:/sbin:/bin", f"GPUHOOK_CONFIG={site.config}".encode()])
    fds = _null_fds()
    try:
        answers = _ask(daemon.sock, call, fds)
    finally:
        for fd in fds:
            os.close(fd)
    assert answers == [b"A", f"exec {shutil.which('runc')}".encode()]


# -- the helper's own life ------------------------------------------------------------------------------------------

def test_sigterm_after_calls_stops_the_helper_and_its_workers(own_daemon: Callable[..., Daemon]) -> None:
    """Stopped after it served a few calls (their workers gone and reaped): it exits 0, its spares with it, its
    socket removed, and nothing of it says a word."""
    d = own_daemon()
    for _ in range(4):
        assert _ask(d.sock, b"x") == [b"A", b"direct"]
    time.sleep(1.5)  # the daemon reaps once a second
    stopped = d.stop()
    assert stopped.rc == 0 and stopped.stray == []
    assert stopped.said == ""
    assert not stopped.left, "the helper left its socket behind"


def test_an_installation_change_ends_the_helper(site: Site, tmp_path: Path, own_daemon: Callable[..., Daemon],
                                               containers: Containers) -> None:
    """Its code replaced under it (here: a copy of the package, its warm.py touched), the helper exits 0 for its
    service manager to start it anew, and containers take the direct path meanwhile."""
    package = tmp_path / "pkg"
    shutil.copytree(Path(HOOK_DIR) / "gpuhook", package / "gpuhook", symlinks=True)
    copy = _launchers(tmp_path / "bin", [str(package), sysconfig.get_paths()["purelib"]])
    d = own_daemon(bindir=copy)
    later = time.time() + 5
    os.utime(package / "gpuhook/cli/warm.py", (later, later))
    start = time.monotonic()
    try:
        rc = d.proc.wait(3)
    except subprocess.TimeoutExpired:
        rc = None
    assert rc == 0 and time.monotonic() - start < 3, d.said.read_text()
    r = containers.run(copy / "gpuhook-runtime", containers.bundle(NV0, SEE), d.sock)
    _sees_its_gpu(r, "nvidia")
    assert _living(d.proc.pid) == []
    assert not os.path.lexists(d.sock), "the helper left its socket behind"


# -- long-lived workers: no fork per call, nothing of one call in the next -----------------------------------------

def _children(daemon: Daemon) -> set[int]:
    """The daemon's living children: its workers."""
    found = set()
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[1]) == daemon.proc.pid:
            found.add(int(entry))
    return found


def _settled(daemon: Daemon, count: int, seconds: float = 10) -> set[int]:
    """The daemon's workers once there are `count` of them (its spares, after a burst's extra workers retired)."""
    deadline = time.monotonic() + seconds
    while (found := _children(daemon)) and len(found) != count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(found) == count, found
    return found


@contextlib.contextmanager
def _every_worker(daemon: Daemon) -> Iterator[set[int]]:
    """Every worker the daemon has while the block runs (its children, sampled every 5 ms: a forked worker waits
    at least 5 s before it retires)."""
    seen: set[int] = set()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            seen.update(_children(daemon))
            time.sleep(0.005)

    watcher = threading.Thread(target=sample)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join()
        seen.update(_children(daemon))


def _gone(pid: int, seconds: float = 3) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


def test_sequential_gpu_starts_fork_no_worker(site: Site, own_daemon: Callable[..., Daemon],
                                             containers: Containers) -> None:
    """Eight GPU containers one after another, through the native front end: each sees its GPU, none takes the
    direct path, and the daemon's workers are the very processes it had before the first (no fork)."""
    d = own_daemon()
    workers = _settled(d, 2)
    with _every_worker(d) as seen:
        for vendor in ["nvidia", "amd"] * 4:
            r = containers.run(site.callers / "gpuhook-runtime", containers.bundle(SEEN[vendor][0], SEE), d.sock)
            _sees_its_gpu(r, vendor)
    assert _direct_path(site) == ""
    assert seen == workers, "the daemon forked (or lost) workers for sequential calls"


def test_calls_answered_direct_one_after_another_fork_no_worker(own_daemon: Callable[..., Daemon]) -> None:
    """What is not a call is answered "direct" at once, by the same two workers: the worker is counted as waiting
    again before the caller has its answer, so the next call never finds them all busy."""
    d = own_daemon()
    workers = _settled(d, 2)
    with _every_worker(d) as seen:
        for _ in range(20):
            assert _ask(d.sock, b"x") == [b"A", b"direct"]
    assert seen == workers


def test_concurrent_starts_are_served_and_the_pool_shrinks_back(site: Site, own_daemon: Callable[..., Daemon],
                                                                 containers: Containers) -> None:
    """Six containers at once: all served, never more than 8 workers; the burst's extra workers retire while idle,
    and the next container is served by one of the two that stay."""
    from concurrent.futures import ThreadPoolExecutor

    d = own_daemon()
    _settled(d, 2)
    vendors = ["nvidia", "amd"] * 3
    bundles = [containers.bundle(SEEN[v][0], SEE) for v in vendors]
    most = [0]
    done = threading.Event()

    def count() -> None:
        while not done.is_set():
            most[0] = max(most[0], len(_children(d)))
            time.sleep(0.005)

    watcher = threading.Thread(target=count)
    watcher.start()
    try:
        with ThreadPoolExecutor(len(bundles)) as pool:
            results = list(pool.map(lambda b: containers.run(site.callers / "gpuhook-runtime", b, d.sock), bundles))
    finally:
        done.set()
        watcher.join()
    for vendor, r in zip(vendors, results, strict=True):
        _sees_its_gpu(r, vendor)
    assert _direct_path(site) == ""
    assert 2 <= most[0] <= 8, most[0]
    stay = _settled(d, 2, seconds=15)
    r = containers.run(site.callers / "gpuhook-runtime", containers.bundle(NV0, SEE), d.sock)
    _sees_its_gpu(r, "nvidia")
    assert _children(d) == stay


def test_tuned_starts_fork_no_worker(site: Site, own_daemon: Callable[..., Daemon], containers: Containers) -> None:
    """A tuned container's shim call, prestart and poststop, twice over: served by the same two workers (tuning
    through the simulated NVML leaves nothing in them)."""
    d = own_daemon()
    workers = _settled(d, 2)
    with _every_worker(d) as seen:
        for _ in range(2):
            b = containers.bundle({**NV0, "gpuhook.dev/clocks": "1500"}, "", args=["sleep", "60"])
            r = containers.run(site.callers / "gpuhook-runtime", b, d.sock, detach=True)
            assert r.rc == 0, r.err
            assert _nvml(site)[0][:2] == [1500, 1500]
            containers.delete(r.cid)
            assert _nvml(site)[0][:2] == [0, 0]
    assert _direct_path(site) == ""
    assert seen == workers, "a worker left after a tuning call, or one was forked"


# the copy of hook.py a junk-leaving helper runs: each call reports what it sees, then leaves what WARM_TEST_JUNK says
JUNK_HOOK = '''

def _warm_test(real):
    def main(*args, **kwargs):
        import json, os, threading, time
        fds = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                fds[name] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                pass
        mask = os.umask(0)
        os.umask(mask)
        print(json.dumps({"pid": os.getpid(), "fds": fds, "cwd": os.getcwd(), "umask": mask, "env": sorted(os.environ),
                          "mnt": os.readlink("/proc/self/ns/mnt"), "threads": len(os.listdir("/proc/self/task"))}),
              flush=True)
        junk = os.environ.get("WARM_TEST_JUNK", "")
        if junk == "fd":
            os.open(os.environ["WARM_TEST_FILE"], os.O_RDONLY)
        elif junk == "stdout kept":
            os.dup(1)
        elif junk == "cwd":
            os.chdir("/tmp")
        elif junk == "env":
            os.environ["WARM_TEST_LEFT"] = "1"
        elif junk == "umask":
            os.umask(0o077)
        elif junk == "exception":
            raise RuntimeError("left by a warm test")
        elif junk == "mount namespace":
            from gpuhook import syscalls
            syscalls.unshare(syscalls.CLONE_NEWNS)
        elif junk == "thread":
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        elif junk == "sleep":
            time.sleep(5)
        return real(*args, **kwargs)
    return main


main = _warm_test(main)
'''


# the copy of apply/spec.py: a warm worker that wrote config.json waits there when WARM_TEST_JUNK says so (the moment
# a worker can die with the engine's spec edited and no answer given)
JUNK_SPEC = '''

def _warm_test_slow(real):
    def write_atomic(*args, **kwargs):
        import os, sys, time
        real(*args, **kwargs)
        if os.environ.get("WARM_TEST_JUNK") == "sleep after config.json" and "gpuhook.cli.warm_worker" in sys.modules:
            time.sleep(30)
    return write_atomic


write_atomic = _warm_test_slow(write_atomic)
'''


@pytest.fixture(scope="module")
def junk_site(tmp_path_factory: pytest.TempPathFactory, site: Site) -> Path:
    """Launchers of a copy of the package whose hook reports what each call sees and leaves junk on request, and
    whose shim waits after writing config.json on request."""
    tmp = tmp_path_factory.mktemp("junk")
    package = tmp / "pkg"
    shutil.copytree(Path(HOOK_DIR) / "gpuhook", package / "gpuhook", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(package / "gpuhook/cli/hook.py", "a") as f:
        f.write(JUNK_HOOK)
    with open(package / "gpuhook/apply/spec.py", "a") as f:
        f.write(JUNK_SPEC)
    (tmp / "state.json").write_text(json.dumps({"ociVersion": "1.0.2", "id": "warm-junk", "status": "stopped"}))
    (tmp / "cwd").mkdir()
    (tmp / "secret").write_text("a previous caller's file\n")
    return _launchers(tmp / "bin", [str(package), sysconfig.get_paths()["purelib"]])


@dataclass
class Call:
    answers: list[bytes]
    seen: dict[str, Any]  # what the call reported it sees
    eof: bool  # the reader of the call's stdout saw its end within 3 s of the answer


def _hook_call(site: Site, sock: Path, bindir: Path, junk: str = "") -> Call:
    """`gpuhook hook poststop` as the native hook sends it, from this (root, host) process: stdin the state file,
    stdout a pipe this test reads, the working directory bindir/../cwd, umask 022."""
    tmp = bindir.parent
    env = [b"PATH=/usr/bin:/bin", f"GPUHOOK_CONFIG={site.config}".encode(), f"WARM_TEST_JUNK={junk}".encode(),
           f"WARM_TEST_FILE={tmp / 'secret'}".encode()]
    message = _message(b"hook", [b"gpuhook", b"hook", b"poststop"], env, exe=str(bindir / "gpuhook").encode())
    read, write = os.pipe()
    fds = [os.open(tmp / "state.json", os.O_RDONLY), write, os.open("/dev/null", os.O_WRONLY),
           os.open(tmp / "cwd", os.O_PATH | os.O_DIRECTORY)]
    try:
        answers = _ask(sock, message, fds)
    finally:
        for fd in fds:
            os.close(fd)
    out = b""
    eof = False
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        import select

        if select.select([read], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(read, 65536)
            if not chunk:
                eof = True
                break
            out += chunk
    os.close(read)
    line = out.decode().splitlines()[0] if out else "{}"
    return Call(answers, json.loads(line), eof)


def _clean(call: Call, site: Site, bindir: Path) -> None:
    """What a call sees in a worker that no earlier call left anything in."""
    tmp = bindir.parent
    assert call.answers == [b"A", b"exit 0"], call
    left = [t for fd, t in call.seen["fds"].items() if fd not in ("0", "1") and t.startswith(("pipe:", str(tmp)))]
    assert left == [], f"a call sees descriptors of an earlier one: {call.seen['fds']}"
    assert call.seen["cwd"] == str(tmp / "cwd")
    assert call.seen["umask"] == 0o22
    assert "WARM_TEST_LEFT" not in call.seen["env"]
    assert call.seen["mnt"] == os.readlink("/proc/self/ns/mnt")
    assert call.seen["threads"] == 1
    assert call.eof, "the call's stdout stayed open in the worker after its answer"


def test_a_clean_call_leaves_its_worker_waiting_and_its_descriptors_closed(site: Site, junk_site: Path,
                                                                        own_daemon: Callable[..., Daemon]) -> None:
    """The control for the table below: calls that leave nothing are served by the same workers, one after another,
    each with its own descriptors only (the pipe given as stdout reaches its end once the call is answered)."""
    d = own_daemon(bindir=junk_site)
    workers = _settled(d, 2)
    with _every_worker(d) as seen:
        calls = [_hook_call(site, d.sock, junk_site) for _ in range(6)]
    for call in calls:
        _clean(call, site, junk_site)
    assert {c.seen["pid"] for c in calls} <= workers
    assert seen == workers


JUNK = ["fd", "stdout kept", "cwd", "env", "umask", "exception", "mount namespace", "thread"]


@pytest.mark.parametrize("junk", JUNK)
def test_a_call_that_leaves_junk_ends_its_worker(site: Site, junk_site: Path, own_daemon: Callable[..., Daemon],
                                                 junk: str) -> None:
    """The worker that served it exits after its answer; the next calls are served by workers with none of it."""
    d = own_daemon(bindir=junk_site)
    workers = _settled(d, 2)
    first = _hook_call(site, d.sock, junk_site, junk)
    assert first.answers == [b"A", b"exit 1" if junk == "exception" else b"exit 0"], first
    assert first.seen["pid"] in workers
    assert _gone(first.seen["pid"]), f"the worker that served a call leaving {junk!r} is still there"
    assert first.eof, "the call's stdout stayed open after the worker that held it exited"
    for _ in range(4):
        _clean(_hook_call(site, d.sock, junk_site), site, junk_site)
    assert first.seen["pid"] not in _children(d)
    assert len(_settled(d, 2)) == 2


def test_killing_a_busy_worker_costs_only_its_call(site: Site, junk_site: Path,
                                                   own_daemon: Callable[..., Daemon]) -> None:
    """A worker killed while it holds a call: that caller gets no answer (its native front end takes the direct
    path), the other workers serve the calls meanwhile and after, and the daemon replaces it."""
    import select

    d = own_daemon(bindir=junk_site)
    _settled(d, 2)
    tmp = junk_site.parent
    env = [b"PATH=/usr/bin:/bin", f"GPUHOOK_CONFIG={site.config}".encode(), b"WARM_TEST_JUNK=sleep"]
    message = _message(b"hook", [b"gpuhook", b"hook", b"poststop"], env, exe=str(junk_site / "gpuhook").encode())
    read, write = os.pipe()
    fds = [os.open(tmp / "state.json", os.O_RDONLY), write, os.open("/dev/null", os.O_WRONLY),
           os.open(tmp / "cwd", os.O_PATH | os.O_DIRECTORY)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
        s.settimeout(10)
        s.connect(str(d.sock))
        assert s.recv(8192) == b"A"
        socket.send_fds(s, [message], fds)
        for fd in fds:
            os.close(fd)
        assert select.select([read], [], [], 5)[0], "the slow call did not start"
        victim = json.loads(os.read(read, 65536).decode().splitlines()[0])["pid"]
        os.kill(victim, signal.SIGKILL)
        meanwhile = [_hook_call(site, d.sock, junk_site) for _ in range(3)]
        answers = []
        while chunk := s.recv(8192):
            answers.append(chunk)
    os.close(read)
    assert answers == [], answers  # no answer: the native front end takes the direct path
    for call in meanwhile:
        _clean(call, site, junk_site)
        assert call.seen["pid"] != victim
    assert victim not in _children(d)
    assert len(_settled(d, 2)) == 2


def _serving(daemon: Daemon, err: Path, seconds: float = 20) -> int:
    """The worker whose stderr is `err` (the call it holds), once there is one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for pid in _children(daemon):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/2") == str(err):
                    return pid
        time.sleep(0.01)
    raise AssertionError(f"no worker of {daemon.sock} took the call")


@pytest.mark.parametrize("then", ["refused", "started"])
def test_a_worker_lost_after_editing_config_json_leaves_the_direct_path_the_engines_spec(
        site: Site, junk_site: Path, own_daemon: Callable[..., Daemon], containers: Containers, tmp_path: Path,
        then: str) -> None:
    """A worker killed after it wrote config.json and before it answered: the native front end puts the engine's
    bytes back before its direct path. Refused there (the config broken meanwhile): one line, and config.json is
    byte for byte what the engine wrote (not the lost worker's edit). Or started: it sees exactly its GPU."""
    d = own_daemon(bindir=junk_site)
    _settled(d, 2)
    config = tmp_path / "config.toml"
    text = site.config.read_text()
    config.write_text(text)
    bundle = containers.bundle(NV0, SEE)
    spec = bundle / "config.json"
    before = spec.read_bytes()
    err = tmp_path / "stderr"
    cid = "w-" + uuid.uuid4().hex[:10]
    containers.cids.append(cid)
    env = {"PATH": os.environ["PATH"], "GPUHOOK_CONFIG": str(config), "GPUHOOK_WARM_SOCKET": str(d.sock),
           "WARM_TEST_JUNK": "sleep after config.json"}
    with open(err, "wb") as errors:
        proc = subprocess.Popen([str(junk_site / "gpuhook-runtime"), "run", "--bundle", str(bundle), cid], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors)
    try:
        worker = _serving(d, err)
        deadline = time.monotonic() + 20
        while spec.read_bytes() == before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert spec.read_bytes() != before, "the worker did not edit config.json"
        if then == "refused":
            config.write_text(text + 'state_dir = "/elsewhere"\n')  # a key twice: not TOML
        os.kill(worker, signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    said = err.read_text()
    if then == "refused":
        assert proc.returncode == 1, said
        (line,) = said.splitlines()
        assert line.startswith("gpuhook-runtime: ") and str(config) in line, said
        assert spec.read_bytes() == before, "config.json kept the lost worker's edit"
        assert not list(bundle.glob(".config.json.*")), "a temporary file was left in the bundle"
    else:
        _sees_its_gpu(Ran(proc.returncode, out.decode(), said, bundle, before, cid, tmp_path / "log", 0), "nvidia")
        devices = [dev["path"] for dev in json.loads(spec.read_text())["linux"]["devices"]]
        assert devices.count("/dev/nvidia0") == 1, devices
    assert worker not in _children(d)
