"""The warm helper's pure parts: the call message it accepts, the identity of the installation it watches, and
the answer a call's outcome becomes."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuhook.cli import warm, warm_trust, warm_worker
from gpuhook.errors import RequestError


def _message(*fields: bytes) -> bytes:
    """NUL-terminated fields, as native/warm.h writes them."""
    return b"".join(f + b"\0" for f in fields)


HEAD = (b"gpuhook-warm/1", b"runtime")
EXE = b"/usr/local/bin/gpuhook-runtime-py"
ARGV = (b"gpuhook-runtime", b"run", b"c1")
ENV = (b"PATH=/usr/bin:/bin", b"GPUHOOK_CONFIG=/etc/gpuhook/config.toml", b"X=a=b")
VALID = _message(*HEAD, b"22", b"3", EXE, *ARGV, *ENV)

CALLS = [
    ("runtime", VALID, ("runtime", 0o22, EXE.decode(), ["gpuhook-runtime", "run", "c1"],
                        {"PATH": "/usr/bin:/bin", "GPUHOOK_CONFIG": "/etc/gpuhook/config.toml", "X": "a=b"})),
    ("hook, no environment", _message(b"gpuhook-warm/1", b"hook", b"0", b"3", b"/usr/bin/gpuhook", b"gpuhook",
                                      b"hook", b"prestart"),
     ("hook", 0, "/usr/bin/gpuhook", ["gpuhook", "hook", "prestart"], {})),
    ("umask 777, empty value", _message(*HEAD, b"777", b"1", EXE, b"x", b"EMPTY="),
     ("runtime", 0o777, EXE.decode(), ["x"], {"EMPTY": ""})),
    ("bytes that are not UTF-8", _message(*HEAD, b"22", b"1", EXE, b"id-\xff", b"K=\xfe"),
     ("runtime", 0o22, EXE.decode(), ["id-\udcff"], {"K": "\udcfe"})),
]


@pytest.mark.parametrize(("msg", "expect"), [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_a_call(msg: bytes, expect: tuple[object, ...]) -> None:
    assert warm_trust.parse(msg) == expect


NOT_CALLS = [
    ("empty", b""),
    ("too few fields", _message(*HEAD, b"22", b"1")),
    ("wrong version", VALID.replace(b"gpuhook-warm/1", b"gpuhook-warm/2")),
    ("no version", VALID[len(b"gpuhook-warm/1\0"):]),
    ("unknown kind", VALID.replace(b"\0runtime\0", b"\0exec\0")),
    ("kind in capitals", VALID.replace(b"\0runtime\0", b"\0RUNTIME\0")),
    ("umask not octal", _message(*HEAD, b"8", b"3", EXE, *ARGV, *ENV)),
    ("umask not a number", _message(*HEAD, b"x", b"3", EXE, *ARGV, *ENV)),
    ("umask empty", _message(*HEAD, b"", b"3", EXE, *ARGV, *ENV)),
    ("umask over 777", _message(*HEAD, b"1000", b"3", EXE, *ARGV, *ENV)),
    ("umask negative", _message(*HEAD, b"-1", b"3", EXE, *ARGV, *ENV)),
    ("argc 0", _message(*HEAD, b"22", b"0", EXE, *ARGV, *ENV)),
    ("argc negative", _message(*HEAD, b"22", b"-1", EXE, *ARGV, *ENV)),
    ("argc not a number", _message(*HEAD, b"22", b"three", EXE, *ARGV, *ENV)),
    ("argc past the fields", _message(*HEAD, b"22", b"7", EXE, *ARGV, *ENV)),
    ("argc far past the fields", _message(*HEAD, b"22", b"99", EXE, *ARGV)),
    ("relative exe", _message(*HEAD, b"22", b"3", b"gpuhook-runtime-py", *ARGV, *ENV)),
    ("empty exe", _message(*HEAD, b"22", b"3", b"", *ARGV, *ENV)),
    ("env entry without =", _message(*HEAD, b"22", b"3", EXE, *ARGV, b"PATH=/bin", b"JUSTANAME")),
    ("missing trailing NUL", VALID[:-1]),
    ("junk after the last NUL", VALID + b"X=1"),
]


@pytest.mark.parametrize("msg", [c[1] for c in NOT_CALLS], ids=[c[0] for c in NOT_CALLS])
def test_not_a_call(msg: bytes) -> None:
    assert warm_trust.parse(msg) is None


def test_argc_decides_where_argv_ends() -> None:
    """The environment is what follows argc arguments: an argument with '=' is still an argument."""
    msg = _message(*HEAD, b"22", b"2", EXE, b"gpuhook-runtime", b"--log=/x", b"A=1")
    assert warm_trust.parse(msg) == ("runtime", 0o22, EXE.decode(), ["gpuhook-runtime", "--log=/x"], {"A": "1"})


# -- the installation ------------------------------------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the package, which warm.installation is made to look at (and no loaded module besides)."""
    package = Path(warm.__file__).parents[1]
    copy = tmp_path / "gpuhook"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(warm, "__file__", str(copy / "cli" / "warm.py"))
    monkeypatch.setattr(warm.sys, "modules", {})
    return copy


def test_the_installation_covers_loaded_modules_and_the_package() -> None:
    found = {entry[0] for entry in warm.installation()}
    assert warm.__file__ in found and json.__file__ in found  # gpuhook's and the standard library's
    assert any(p.endswith("gpuhook/config.schema.json") for p in found)  # data the code reads
    assert all(entry[2] for entry in warm.installation())  # every file there
    assert warm._current(warm.installation())


def test_an_untouched_copy_is_the_same_installation(tree: Path) -> None:
    first = warm.installation()
    assert len(first) > 50 and warm._current(first)


# every module of the package, not a chosen few: a change to any is the old code no more
NAMES = ["__init__.py", "cli/shim.py", "logs.py", "plan/select.py", "vendors/amd/vendor.py", "config.schema.json"]


@pytest.mark.parametrize("name", NAMES)
def test_a_touched_file_is_another_installation(tree: Path, name: str) -> None:
    first = warm.installation()
    st = os.stat(tree / name)
    os.utime(tree / name, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert not warm._current(first)


@pytest.mark.parametrize("name", NAMES)
def test_a_replaced_file_is_another_installation(tree: Path, name: str) -> None:
    """A package manager writes a new file and renames it over the old one: same times, another inode."""
    first = warm.installation()
    st = os.stat(tree / name)
    new = tree / f"{name}.new"
    shutil.copyfile(tree / name, new)
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, tree / name)
    assert not warm._current(first)


def test_a_removed_file_is_another_installation(tree: Path) -> None:
    first = warm.installation()
    (tree / "tuning/ledger.py").unlink()
    assert not warm._current(first)


# -- the answer ------------------------------------------------------------------------------------------------------

def _exits(code: object) -> bytes:
    raise SystemExit(code)


EXITS = [("0", 0, b"exit 0"), ("None", None, b"exit 0"), ("1", 1, b"exit 1"), ("3", 3, b"exit 3"),
         ("125", 125, b"exit 125")]


@pytest.mark.parametrize(("code", "answer"), [e[1:] for e in EXITS], ids=[e[0] for e in EXITS])
def test_a_system_exit_is_its_status(code: object, answer: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    assert warm_worker._exited(lambda: _exits(code)) == (answer, True)
    assert capsys.readouterr() == ("", "")


def test_a_system_exit_with_a_message_says_it_and_is_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert warm_worker._exited(lambda: _exits("gpuhook: no such GPU")) == (b"exit 1", True)
    assert capsys.readouterr() == ("", "gpuhook: no such GPU\n")


def test_a_result_is_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert warm_worker._exited(lambda: b"exec /usr/sbin/runc") == (b"exec /usr/sbin/runc", True)
    assert capsys.readouterr() == ("", "")


BROKEN = [("plain", RuntimeError("boom")), ("key", KeyError("devices")),
          ("message on two lines", ValueError("first\nsecond"))]


@pytest.mark.parametrize("error", [b[1] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_an_exception_fails_closed_with_one_line(error: Exception, capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> bytes:
        raise error

    assert warm_worker._exited(broken) == (b"exit 1", False)  # the worker goes after its answer
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert "internal error in the warm helper" in line and type(error).__name__ in line


def _refused_by_the_shim(error: BaseException) -> bytes:
    """What cli/shim.py does: an exception caught, one line said, SystemExit(1) raised in the except clause."""
    try:
        raise error
    except BaseException:
        raise SystemExit(1) from None


@pytest.mark.parametrize(("error", "clean"), [
    (RequestError("no NVIDIA GPU 7"), True),
    (FileNotFoundError(2, "No such file or directory"), True),
    (KeyError("devices"), False),
    (RuntimeError("boom"), False),
], ids=["a refusal", "a file gone", "an internal error (KeyError)", "an internal error (RuntimeError)"])
def test_an_exit_after_an_internal_error_ends_the_worker(error: BaseException, clean: bool) -> None:
    """The shim turns every exception into its exit 1: the worker tells a refusal from an internal error by what
    the exit was raised over, and goes after its answer for the latter."""
    assert warm_worker._exited(lambda: _refused_by_the_shim(error)) == (b"exit 1", clean)


# -- the watch a worker polls instead of a stat per file -----------------------------------------------------------

def _touch(p: Path) -> None:
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1))


def _replace(p: Path) -> None:
    new = p.with_suffix(".new")
    new.write_bytes(p.read_bytes())
    os.replace(new, p)


def _write(p: Path) -> None:
    with p.open("ab") as f:
        f.write(b"#")


@pytest.mark.parametrize("change", [_touch, _replace, _write, Path.unlink], ids=["touched", "replaced", "written",
                                                                                   "removed"])
def test_the_watch_sees_every_kind_of_change(tmp_path: Path, change: Callable[[Path], None]) -> None:
    from gpuhook.cli.warm_watch import Watch

    files = [tmp_path / f"m{i}.py" for i in range(3)]
    for f in files:
        f.write_text("x = 1\n")
    watch = Watch([str(f) for f in files])
    try:
        assert watch.usable() and not watch.changed()
        (tmp_path / "other.py").write_text("")  # a file it does not hold: no change of its installation
        assert not watch.changed()
        change(files[1])
        assert watch.changed() and watch.changed()  # seen, and still there for the next worker
    finally:
        watch.close()


def test_a_watch_on_a_missing_file_is_not_usable(tmp_path: Path) -> None:
    from gpuhook.cli.warm_watch import Watch

    assert not Watch([str(tmp_path / "gone.py")]).usable()  # the caller stats the files instead


# -- the worker's word to the daemon -------------------------------------------------------------------------------

def test_a_worker_is_counted_back_before_its_caller_has_the_answer() -> None:
    """The daemon hears "back" before the caller can make its next call: else the next call, taken by another
    worker, would find every worker busy and fork one."""
    import socket

    caller, conn = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    daemon, channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    seen: list[bool] = []

    class Channel:
        def send(self, data: bytes) -> int:
            caller.setblocking(False)
            try:
                caller.recv(16, socket.MSG_PEEK)
                seen.append(True)  # the answer was there first
            except BlockingIOError:
                seen.append(False)
            return channel.send(data)

    assert warm_worker._answer(conn, b"exit 0", Channel()) is True  # type: ignore[arg-type]
    assert seen == [False]
    assert daemon.recv(16) == warm_worker.BACK and caller.recv(16) == b"exit 0"
    for s in (caller, daemon, channel):
        s.close()
