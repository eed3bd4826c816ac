"""A long-lived warm worker's own state (cli/warm_state.py): put back after a call, and whatever a call left that
cannot be put back named. Each case runs in a forked child (it changes the process), which reports back."""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from gpuhook.cli.warm_state import Idle

T = TypeVar("T")


def _in_child(body: Callable[[], T]) -> T:
    """What `body` returns, run in a forked child of this process."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            result: object = body()
        except BaseException as e:  # reported to the test
            result = e
        os.write(write, pickle.dumps(result))
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    out = pickle.loads(data)
    if isinstance(out, BaseException):
        raise out
    return out  # type: ignore[no-any-return]


def _call_like(tmp: Path, leave: Callable[[], object] | None = None) -> tuple[list[str], list[str], dict[str, object]]:
    """A call as a worker runs one: the caller's descriptors taken as stdin, stdout, stderr and working directory,
    its environment and umask; `leave` run; then (what the call changed, what it left, what the worker is after
    restore)."""
    idle = Idle(("/dev/nvidia",))
    caller = [os.open("/dev/null", os.O_RDONLY), os.open(tmp / "out", os.O_WRONLY | os.O_CREAT, 0o600),
              os.open(tmp / "err", os.O_WRONLY | os.O_CREAT, 0o600), os.open(tmp, os.O_PATH | os.O_DIRECTORY)]
    passed = [(st.st_dev, st.st_ino) for st in map(os.fstat, caller)]
    for target, fd in enumerate(caller[:3]):
        os.dup2(fd, target)
    os.fchdir(caller[3])
    for fd in caller:
        os.close(fd)
    env = {"PATH": "/bin", "CALLER": "1"}
    os.environ.clear()
    os.environ.update(env)
    os.umask(0o027)
    sys.argv = ["/usr/bin/gpuhook", "hook", "poststop"]
    if leave:
        leave()
    changed = idle.changed_by(env, passed[3], 0o027)
    idle.restore()
    left = idle.doubts(passed)
    mask = os.umask(0)
    after = {"cwd": os.getcwd(), "CALLER": os.environ.get("CALLER"), "umask": mask, "argv": sys.argv,
             "out": os.readlink("/proc/self/fd/1")}
    return changed, left, after


def test_a_call_that_leaves_nothing_is_put_back(tmp_path: Path) -> None:
    here, mask = os.getcwd(), os.umask(0o022)
    os.umask(mask)
    changed, left, after = _in_child(lambda: _call_like(tmp_path))
    assert changed == [] and left == []
    assert after["cwd"] == here and after["CALLER"] is None and after["umask"] == mask
    assert after["argv"] == sys.argv and after["out"] != str(tmp_path / "out")


def _open_file(tmp: Path) -> Callable[[], object]:
    return lambda: os.open(tmp / "out", os.O_RDONLY)


LEFT: list[tuple[str, Callable[[Path], Callable[[], object]], str]] = [
    ("a file left open", _open_file, "descriptor"),
    ("the caller's stdout kept", lambda tmp: lambda: os.dup(1), "descriptor"),
    ("a pipe left open", lambda tmp: os.pipe, "descriptor"),
    ("a thread", lambda tmp: lambda: threading.Thread(target=time.sleep, args=(5,), daemon=True).start(), "Threads"),
    ("a signal caught", lambda tmp: lambda: __import__("signal").signal(10, lambda *_: None), "SigCgt"),
    ("a signal blocked", lambda tmp: lambda: __import__("signal").pthread_sigmask(0, {12}), "SigBlk"),
    ("a child left running", lambda tmp: lambda: __import__("subprocess").Popen(["sleep", "5"]), "process"),
    ("a descriptor of its own closed", lambda tmp: _closes_its_own(tmp), "closed or replaced"),
]


def _closes_its_own(tmp: Path) -> Callable[[], object]:
    """A call that closes a descriptor the worker held before the call (opened here, before Idle sees the process;
    never one of Idle's own copies, which restore needs, nor a descriptor listing /proc/self/fd had open)."""
    fd = os.open(tmp, os.O_PATH | os.O_DIRECTORY)
    return lambda: os.close(fd)


@pytest.mark.parametrize(("make", "word"), [c[1:] for c in LEFT], ids=[c[0] for c in LEFT])
def test_what_a_call_leaves_is_named(tmp_path: Path, make: Callable[[Path], Callable[[], object]], word: str) -> None:
    _, left, _ = _in_child(lambda: _call_like(tmp_path, make(tmp_path)))
    assert left and any(word in doubt for doubt in left), left


CHANGED = [
    ("its environment", lambda: os.environ.__setitem__("LEFT", "1"), "environment"),
    ("its working directory", lambda: os.chdir("/usr"), "working directory"),
    ("its umask", lambda: os.umask(0), "umask"),
    ("sys.path", lambda: sys.path.append("/tmp/x"), "sys.path"),
]


@pytest.mark.parametrize(("change", "word"), [c[1:] for c in CHANGED], ids=[c[0] for c in CHANGED])
def test_what_a_call_changes_of_its_callers_is_named_and_put_back(tmp_path: Path, change: Callable[[], object],
                                                                   word: str) -> None:
    here = os.getcwd()
    changed, left, after = _in_child(lambda: _call_like(tmp_path, change))
    assert len(changed) == 1 and word in changed[0], changed
    assert left == []
    assert after["cwd"] == here and after["CALLER"] is None


def test_a_working_directory_left_at_the_root_is_not_doubtful(tmp_path: Path) -> None:
    """setns(2) into a container's mount namespace and back (hook mode) leaves the working directory at the root:
    put back, and not a reason to end the worker."""
    changed, left, _ = _in_child(lambda: _call_like(tmp_path, lambda: os.chdir("/")))
    assert changed == [] and left == []


def test_a_mount_namespace_of_its_own_is_named(tmp_path: Path) -> None:
    def unshare() -> None:
        from gpuhook import syscalls

        syscalls.unshare(syscalls.CLONE_NEWNS)

    if os.geteuid() != 0:
        pytest.skip("unshare(CLONE_NEWNS) needs root")
    _, left, _ = _in_child(lambda: _call_like(tmp_path, unshare))
    assert left == ["its mnt namespace changed"]


def test_memory_grown_past_the_bound_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuhook.cli import warm_state

    monkeypatch.setattr(warm_state, "MAX_GROWTH", 8 << 20)
    kept: list[bytearray] = []
    _, left, _ = _in_child(lambda: _call_like(tmp_path, lambda: kept.append(bytearray(32 << 20))))
    assert any("grew" in doubt for doubt in left), left


def test_a_device_session_of_a_gpu_library_is_kept(tmp_path: Path) -> None:
    """A GPU library's own descriptor on its driver's node (an NVML session kept between calls) is not a leftover:
    the character device under a vendor's prefix, opened by the worker itself. The caller's descriptors never are."""
    def body() -> tuple[list[str], list[str]]:
        idle = Idle(("/dev/nu",))  # /dev/null stands for a GPU's node here
        kept = os.open("/dev/null", os.O_RDONLY)  # noqa: F841 (the session)
        first = idle.doubts([])
        stdin = os.fstat(0)
        os.dup(0)  # a copy of the caller's stdin (here /dev/null too)
        return first, idle.doubts([(stdin.st_dev, stdin.st_ino)])

    first, second = _in_child(body)
    assert first == [] and len(second) == 1 and "left open" in second[0]


def test_a_daemon_started_with_stdin_closed_gets_dev_null_there(tmp_path: Path) -> None:
    def body() -> tuple[str, list[str], str]:
        os.close(0)
        idle = Idle()
        before = os.readlink("/proc/self/fd/0")
        stdin = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
        os.dup2(stdin, 0)  # a call's stdin
        os.close(stdin)
        idle.restore()
        return before, idle.doubts([]), os.readlink("/proc/self/fd/0")

    before, left, after = _in_child(body)
    assert before == after == "/dev/null" and left == []
