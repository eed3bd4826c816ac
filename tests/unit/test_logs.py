"""gpuhook.logs: structlog's lines, as gpuhook configured it, without structlog on the GPU path."""

from __future__ import annotations

import datetime
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
import structlog

from gpuhook import logs
from gpuhook.config import Config
from gpuhook.startup import HEAVY

PATH = [str(Path(__file__).resolve().parents[2] / "hook"), sysconfig.get_paths()["purelib"]]
_STAMP = re.compile(r'"timestamp": "([^"]*)"')
_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}

# (bind, method, event, fields): what the callers pass (gpu_path/inject.py, cli/hook.py), and what they might
_CALLS: list[tuple[dict[str, Any], str, str, dict[str, Any]]] = [
    ({}, "debug", "no gpu request", {}),
    ({}, "info", "injecting", {"gpus": ["0", "GPU-1"], "sources": ["annotation"], "devices": ["/dev/nvidia0"],
                               "mounts": 3, "exclusive": False, "lease": None, "ratio": 0.5}),
    ({}, "info", "device filter", {"cgroup": "/sys/fs/cgroup/x", "old": [], "new": {"b": [1, 2], "a": {"z": True}}}),
    ({}, "warning", "compatibility", {"detail": "ROCm 6.1 > driver's 6.0 \u00fc\u65e5\u672c \"quoted\"\n\ttab"}),
    ({"pid": 42}, "info", "tuned", {"settings": ["0:clocks=1410"], "path": Path("/sys/x"), "names": {"b", "a"} - {"b"},
                                    "pair": (1, "x")}),
    ({"pid": 42, "container_id": "rebound"}, "error", "restore failed", {"detail": "EPERM", "container_id": "kw"}),
    ({}, "exception", "boom", {"code": 7}),
    ({}, "info", "\u00e9v\u00e9nement \U0001f600", {"k\u00e9y": "\ud800 lone surrogate", "big": 10**30}),
]


def _config(tmp_path: Path, **kw: Any) -> Config:
    return Config(path="c", log_file=str(tmp_path / "gpuhook.log"), **kw)


def _run(log: Any) -> None:
    for bound, method, event, fields in _CALLS:
        getattr(log.bind(**bound) if bound else log, method)(event, **fields)


def _structlog_lines(level: str) -> list[str]:
    """What the old logs.py wrote: its structlog pipeline, on a buffer instead of the file."""
    out = io.StringIO()
    log = structlog.wrap_logger(
        structlog.WriteLogger(out),
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer(sort_keys=True)],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        cache_logger_on_first_use=False,
    ).bind(container_id="c1", component="shim")
    _run(log)
    return out.getvalue().splitlines()


def _parsed(line: str) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads(line)
    assert isinstance(fields.pop("timestamp"), str)
    return fields


@pytest.mark.parametrize("level", list(_LEVELS), ids=list(_LEVELS))
def test_lines_are_structlogs_but_for_the_timestamp(tmp_path: Path, level: str) -> None:
    _run(logs.logger(_config(tmp_path, log_level=level), "c1", "shim"))
    ours = (tmp_path / "gpuhook.log").read_text().splitlines()
    theirs = _structlog_lines(level)
    assert len(ours) == len(theirs) == sum(_LEVELS[m if m != "exception" else "error"] >= _LEVELS[level]
                                           for _, m, _, _ in _CALLS)
    assert [_parsed(x) for x in ours] == [_parsed(x) for x in theirs]
    assert [_STAMP.sub("T", x) for x in ours] == [_STAMP.sub("T", x) for x in theirs]  # byte for byte
    assert all(_STAMP.search(x) for x in ours)


def test_fields_bind_levels_and_fallbacks(tmp_path: Path) -> None:
    log = logs.logger(_config(tmp_path, log_level="info"), "c1", "hook")
    log.debug("dropped")
    log.bind(pid=1).info("bound", n=1)
    log.info("unbound")
    log.exception("failed")
    log.warning("odd", path=Path("/x"), when=b"\xff")
    cycle: list[Any] = [1]
    cycle.append(cycle)
    log.info("cyclic", cycle=cycle, n=2)
    lines = [json.loads(x) for x in (tmp_path / "gpuhook.log").read_text().splitlines()]
    assert [(x["event"], x["level"]) for x in lines] == [("bound", "info"), ("unbound", "info"),
                                                          ("failed", "error"), ("odd", "warning"), ("cyclic", "info")]
    assert all(x["container_id"] == "c1" and x["component"] == "hook" for x in lines)
    assert lines[0]["pid"] == 1 and "pid" not in lines[1]
    assert lines[2]["exc_info"] is True  # as structlog's exception() without format_exc_info
    assert (lines[3]["path"], lines[3]["when"]) == ("PosixPath('/x')", "b'\\xff'")
    assert (lines[4]["cycle"], lines[4]["n"]) == ("[1, [...]]", 2)  # no JSON for a cycle: its repr()


def test_timestamp_is_structlogs_iso_utc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    for ns in (1_796_128_496_123_456_789, 1_796_128_496_000_000_999, 1_796_128_496_000_001_000, 951_782_400 * 10**9,
               0, 4_102_444_799_999_999_999):
        expected = (epoch + datetime.timedelta(microseconds=ns // 1000)).isoformat().replace("+00:00", "Z")
        assert logs._timestamp(ns) == expected
    assert logs._timestamp(1_796_128_496_123_456_789) == "2026-12-01T12:34:56.123456Z"
    assert logs._timestamp(1_796_128_496_000_000_999) == "2026-12-01T12:34:56Z"  # isoformat drops zero microseconds
    monkeypatch.setattr(time, "time_ns", lambda: 1_796_128_496_123_456_789)
    logs.logger(_config(tmp_path), "c1", "shim").info("now")
    assert json.loads((tmp_path / "gpuhook.log").read_text())["timestamp"] == "2026-12-01T12:34:56.123456Z"


def test_timestamp_agrees_with_datetime_now() -> None:
    before = datetime.datetime.now(tz=datetime.UTC)
    ours = logs._timestamp(time.time_ns())
    after = datetime.datetime.now(tz=datetime.UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z", ours)
    assert before <= datetime.datetime.fromisoformat(ours.replace("Z", "+00:00")) <= after


def test_nothing_is_opened_or_rotated_until_a_line_at_the_level(tmp_path: Path) -> None:
    log = logs.logger(_config(tmp_path, log_level="warning", log_max_bytes=10), "c1", "shim")
    log.bind(pid=1).info("below")
    log.debug("below")
    assert not (tmp_path / "gpuhook.log").exists()
    (tmp_path / "gpuhook.log").write_text("x" * 20)
    log.info("below")
    assert not (tmp_path / "gpuhook.log.1").exists()
    log.warning("at")
    assert (tmp_path / "gpuhook.log.1").read_text() == "x" * 20
    assert json.loads((tmp_path / "gpuhook.log").read_text())["event"] == "at"


def test_rotation_before_the_first_line_only(tmp_path: Path) -> None:
    config = _config(tmp_path, log_max_bytes=300)
    (tmp_path / "gpuhook.log").write_text("x" * 301)
    log = logs.logger(config, "c1", "shim")
    for n in range(5):  # past the limit again: this writer keeps its file, the next one rotates
        log.info("line", n=n, pad="p" * 100)
    assert (tmp_path / "gpuhook.log.1").read_text() == "x" * 301
    assert len((tmp_path / "gpuhook.log").read_text().splitlines()) == 5
    logs.logger(config, "c2", "shim").info("next")
    assert len((tmp_path / "gpuhook.log.1").read_text().splitlines()) == 5
    assert json.loads((tmp_path / "gpuhook.log").read_text())["container_id"] == "c2"


def test_each_line_is_one_append_write_on_a_cloexec_descriptor(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    opened: list[int] = []
    written: list[bytes] = []
    real_open, real_write = os.open, os.write

    def spy_open(path: str, flags: int, mode: int = 0o777) -> int:
        opened.append(flags)
        return real_open(path, flags, mode)

    def spy_write(fd: int, data: bytes) -> int:
        written.append(data)
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "write", spy_write)
    old = os.umask(0o027)
    try:
        log = logs.logger(_config(tmp_path), "c1", "shim")
        log.info("one", big="y" * 10000)
        log.bind(x=1).warning("two")
    finally:
        os.umask(old)
    assert opened == [os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC]
    assert [w.count(b"\n") for w in written] == [1, 1] and all(w.endswith(b"\n") for w in written)
    assert b"".join(written) == (tmp_path / "gpuhook.log").read_bytes()
    assert (tmp_path / "gpuhook.log").stat().st_mode & 0o777 == 0o640  # open(path, "a")'s: 0o666 less the umask


@pytest.mark.parametrize("where", ["missing/dir/gpuhook.log", "", "/dev/full"], ids=["no-dir", "a-dir", "disk-full"])
def test_an_unwritable_log_never_raises_and_is_not_tried_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               where: str) -> None:
    if where == "/dev/full" and not os.path.exists(where):
        pytest.skip("no /dev/full")
    log = logs.logger(Config(path="c", log_file=str(tmp_path / where)), "c1", "shim")
    log.info("dropped")
    monkeypatch.setattr(os, "open", lambda *_: pytest.fail("opened again"))
    monkeypatch.setattr(os, "write", lambda *_: pytest.fail("written again"))
    log.error("dropped too")
    log.bind(more=1).info("and this")


def test_no_log_file_discards() -> None:
    log = logs.logger(Config(path="c"), "c1", "shim")
    assert isinstance(log, logs._Discard)
    log.bind(a=1).info("x", y=2)
    log.exception("z")


def test_logging_loads_nothing_heavy(tmp_path: Path) -> None:
    """The GPU path's processes log a few lines each: that must not cost structlog, logging, json or datetime."""
    path = tmp_path / "gpuhook.log"
    probe = (f"import sys\nsys.path[:0] = {PATH!r}\nfrom gpuhook import logs\nfrom gpuhook.config import Config\n"
             f"log = logs.logger(Config(path='c', log_file={str(path)!r}, log_level='debug'), 'c1', 'shim')\n"
             "log.debug('one')\nlog.bind(pid=1).info('two', gpus=['0'], n=1, ok=True, none=None, d={'a': 1})\n"
             "log.error('three')\nprint(' '.join(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
    assert [json.loads(x)["event"] for x in path.read_text().splitlines()] == ["one", "two", "three"]
