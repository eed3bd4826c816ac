"""Structured JSON-lines logs with the container id bound on every line."""

from __future__ import annotations

import logging
from typing import Any

from gpuhook.config import Config


def logger(config: Config, container_id: str, component: str) -> Any:
    """A structlog logger writing JSON lines to config.log_file (nothing when unset). Opens a file."""
    import structlog

    level = getattr(logging, config.log_level.upper())
    if config.log_file:
        factory: Any = structlog.WriteLoggerFactory(file=open(config.log_file, "a", buffering=1))  # noqa: SIM115
    else:
        factory = structlog.ReturnLoggerFactory()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer(sort_keys=True)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        cache_logger_on_first_use=False,
    )
    return structlog.get_logger().bind(container_id=container_id, component=component)
