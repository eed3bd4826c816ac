"""Structured JSON-lines logs with the container id bound on every line."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpuhook.config import Config


class _Discard:
    """The logger when no log_file is set: structlog (tens of milliseconds to import) is not loaded."""

    def bind(self, **_: Any) -> _Discard:
        return self

    def _drop(self, event: str, **_: Any) -> None:
        return None

    debug = info = warning = error = exception = _drop


def logger(config: Config, container_id: str, component: str) -> Any:
    """A structlog logger writing JSON lines to config.log_file (nothing when unset). Opens a file."""
    if not config.log_file:
        return _Discard()
    import logging

    import structlog

    if config.log_max_bytes:
        _rotate(config.log_file, config.log_max_bytes)
    level = getattr(logging, config.log_level.upper())
    factory = structlog.WriteLoggerFactory(file=open(config.log_file, "a", buffering=1))  # noqa: SIM115
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer(sort_keys=True)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger().bind(container_id=container_id, component=component)


def _rotate(path: str, limit: int) -> None:
    """Move a log past `limit` bytes to <path>.1 (replacing the last one). Many short-lived writers share the
    file: each checks before it opens, the rename is atomic, and a writer still holding the old file finishes
    its few lines there."""
    import os

    try:
        if os.stat(path).st_size > limit:
            os.replace(path, path + ".1")
    except OSError:
        return
