"""Locate and read the config TOML. Kept tiny: the shim's pass-through path imports only this."""

from __future__ import annotations

import os
from typing import Any

from gpuhook.errors import ConfigError

DEFAULT_PATH = "/etc/gpuhook/config.toml"
ENV = "GPUHOOK_CONFIG"


def config_path() -> tuple[str, bool]:
    """The config path and whether it was named explicitly (env GPUHOOK_CONFIG) rather than defaulted."""
    named = os.environ.get(ENV)
    return (named, True) if named else (DEFAULT_PATH, False)


def read_table(path: str, explicit: bool) -> dict[str, Any]:
    """The TOML table at `path`; {} when the default file is absent. Reads a file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        if not explicit:
            return {}
        raise ConfigError(f"config {path} (from {ENV}) does not exist: create it or unset {ENV}") from e
    except OSError as e:
        raise ConfigError(f"config {path} cannot be read: {e.strerror}") from e
    import tomllib

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from e
