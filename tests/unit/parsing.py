"""Request parsing in the terms of the vendors registered now (what the GPU path passes it), for the tests."""

from __future__ import annotations

from typing import Any

from gpuhook.request import container, docker_flag
from gpuhook.vendors.registry import all_vendors


def parse_request(*args: Any, **kwargs: Any) -> container.Request:
    return container.parse_request(*args, vendors=all_vendors(), **kwargs)


def gpus_flag(hooks: object) -> str | None:
    return docker_flag.gpus_flag(hooks, all_vendors())


def is_gpus_hook(hook: object) -> bool:
    return docker_flag.is_gpus_hook(hook, all_vendors())
