"""proc.run: what it gives the program, what it reports, and that it never hangs or leaks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpuhook.errors import ProcessError
from gpuhook.proc import SAFE_ENV, run


def test_stdout_is_returned_and_env_is_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/evil.so")  # the caller's environment does not reach the program
    out = run(["/usr/bin/env"], extra_env={"EXTRA": "1"})
    assert sorted(out.splitlines()) == sorted([*(f"{k}={v}" for k, v in SAFE_ENV.items()), "EXTRA=1"])


def test_a_bare_name_is_found_on_the_fixed_path() -> None:
    assert run(["echo", "hi"]) == "hi\n"


def test_stdin_is_empty() -> None:
    assert run(["cat"], timeout=5) == ""


def test_failure_names_the_exit_code_and_the_last_stderr_line() -> None:
    with pytest.raises(ProcessError, match=r"^sh exited 3: second$"):
        run(["sh", "-c", "echo first >&2; echo second >&2; exit 3"])


def test_a_missing_program_cannot_run() -> None:
    with pytest.raises(ProcessError, match="/nonexistent/tool could not run"):
        run(["/nonexistent/tool"])


def test_large_output_on_both_pipes_does_not_deadlock() -> None:
    script = "head -c 300000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2"
    assert run(["sh", "-c", script], timeout=20) == "a" * 300000


def _children() -> list[str]:
    mine = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115 (one read of a proc file)
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            mine.append(stat)
    return mine


def test_timeout_kills_and_reaps() -> None:
    start = time.monotonic()
    with pytest.raises(ProcessError, match=r"timed out after 0\.3 s"):
        run(["sleep", "30"], timeout=0.3)
    assert time.monotonic() - start < 5
    assert not [c for c in _children() if "(sleep)" in c]  # killed and reaped: no process, no zombie


def test_no_descriptor_leaks() -> None:
    before = set(os.listdir("/proc/self/fd"))
    run(["true"])
    with pytest.raises(ProcessError):
        run(["false"])
    assert set(os.listdir("/proc/self/fd")) == before


def test_inherited_descriptors_and_ignored_signals_do_not_reach_the_program(tmp_path: Path) -> None:
    leaked = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)  # as a library might: without close-on-exec
    os.set_inheritable(leaked, True)
    try:
        fds = run(["ls", "/proc/self/fd"]).split()
    finally:
        os.close(leaked)
    assert str(leaked) not in fds and set(fds) <= {"0", "1", "2", "3"}  # 3: ls's own listing
    ignored = int(run(["sh", "-c", "grep SigIgn /proc/self/status"]).split()[1], 16)
    assert not ignored & (1 << (13 - 1)), "SIGPIPE must be at its default, not Python's SIG_IGN"
