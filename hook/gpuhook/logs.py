"""Structured JSON-lines logs with the container id bound on every line.

The lines are those structlog wrote for gpuhook (add_log_level, TimeStamper(fmt="iso", utc=True),
JSONRenderer(sort_keys=True)), written without it: structlog with logging and datetime cost 40-80 ms in each
process in front of a GPU container. Nothing is opened or imported before the first line at the level.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.config import Config

try:  # the C encoder json.dumps drives; without it json.dumps itself (below)
    import _json
except ImportError:
    _json = None  # type: ignore[assignment]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}  # logging's numbers, as structlog filters them
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


class _Discard:
    """The logger when no log_file is set."""

    def bind(self, **_: Any) -> _Discard:
        return self

    def _drop(self, event: str, **_: Any) -> None:
        return None

    debug = info = warning = error = exception = _drop


def logger(config: Config, container_id: str, component: str) -> Any:
    """A logger writing JSON lines to config.log_file (nothing when unset); the file opens at the first line."""
    if not config.log_file:
        return _Discard()
    least = _LEVELS.get(config.log_level.lower(), _LEVELS["info"])  # the schema allows no other level
    context = {"container_id": container_id, "component": component}
    return _Logger(_Appender(config.log_file, config.log_max_bytes), context, least)


class _Logger:
    """structlog's filtering bound logger, as gpuhook used it: calls below `least` cost a comparison."""

    __slots__ = ("_context", "_least", "_out")

    def __init__(self, out: _Appender, context: dict[str, Any], least: int) -> None:
        self._out, self._context, self._least = out, context, least

    def bind(self, **fields: Any) -> _Logger:
        """This logger with `fields` on every line as well."""
        return _Logger(self._out, {**self._context, **fields}, self._least)

    def debug(self, event: str, **fields: Any) -> None:
        """Log `event` at debug. Writes the log file."""
        self._log(10, "debug", event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log `event` at info. Writes the log file."""
        self._log(20, "info", event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log `event` at warning. Writes the log file."""
        self._log(30, "warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log `event` at error. Writes the log file."""
        self._log(40, "error", event, fields)

    def exception(self, event: str, **fields: Any) -> None:
        """Log `event` at error with exc_info=True, as structlog's exception() does. Writes the log file."""
        fields.setdefault("exc_info", True)
        self._log(40, "error", event, fields)

    def _log(self, level: int, name: str, event: str, fields: dict[str, Any]) -> None:
        if level >= self._least:
            self._out.write(_render({**self._context, **fields, "event": event, "level": name,
                                     "timestamp": _timestamp(time.time_ns())}) + "\n")


class _Appender:
    """The log file, rotated and opened at the first line. Each line is one write on an O_APPEND descriptor,
    so the many short-lived processes sharing the file never interleave within a line. An error drops the
    line and every later one of this process: a full disk does not refuse a container."""

    __slots__ = ("_fd", "_max_bytes", "_path")

    def __init__(self, path: str, max_bytes: int) -> None:
        self._path, self._max_bytes, self._fd = path, max_bytes, -2  # -2: not opened yet, -1: given up

    def __del__(self) -> None:
        """The descriptor closes with the logger (a warm worker serves many calls in one process). Closes it."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                return

    def write(self, line: str) -> None:
        """Append `line`; nothing after an error. Opens (0o666 less the umask, as open(path, "a")) and writes."""
        try:
            if self._fd == -2:
                self._fd = -1
                if self._max_bytes:
                    _rotate(self._path, self._max_bytes)
                self._fd = os.open(self._path, _FLAGS, 0o666)
            if self._fd >= 0:
                data = line.encode()
                if os.write(self._fd, data) != len(data):
                    self._fd = -1  # a short write: the disk is full (the descriptor closes with the process)
        except OSError:
            self._fd = -1


def _timestamp(ns: int) -> str:
    """`ns` since the epoch as structlog's TimeStamper(fmt="iso", utc=True) writes it (datetime's isoformat:
    microseconds, truncated, left out when zero; "Z" for UTC)."""
    seconds, micros = divmod(ns // 1000, 1_000_000)
    t = time.gmtime(seconds)
    fraction = f".{micros:06d}" if micros else ""
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}{fraction}Z"


def _render(fields: dict[str, Any]) -> str:
    """`fields` as structlog's JSONRenderer(sort_keys=True) writes them; where even repr() as the default does
    not do (a cycle, a key of another type), every value but a string, a number or None as its repr()."""
    try:
        return _dumps(fields)
    except (TypeError, ValueError):
        import json

        return json.dumps({key: value if value is None or isinstance(value, (str, int, float)) else repr(value)
                           for key, value in fields.items()}, sort_keys=True)


def _dumps(fields: dict[str, Any]) -> str:
    """json.dumps(fields, sort_keys=True, default=repr) by the C encoder it drives, without the json package."""
    if _json is None:
        import json

        return json.dumps(fields, sort_keys=True, default=repr)
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys, skipkeys, allow_nan)
    encode = _json.make_encoder({}, repr, _json.encode_basestring_ascii, None, ": ", ", ", True, False, True)
    return "".join(encode(fields, 0))


def _rotate(path: str, limit: int) -> None:
    """Move a log past `limit` bytes to <path>.1 (replacing the last one). Many short-lived writers share the
    file: each checks before it opens, the rename is atomic, and a writer still holding the old file finishes
    its few lines there."""
    try:
        if os.stat(path).st_size > limit:
            os.replace(path, path + ".1")
    except OSError:
        return
