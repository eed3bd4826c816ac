"""The validated gpuhook configuration."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from gpuhook.configfile import config_path, read_table
from gpuhook.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Policy:
    """What the admin allows containers to ask for."""

    accept_env_requests: bool = True


@dataclass(frozen=True, slots=True)
class Config:
    """Settings from config.toml, with defaults."""

    path: str
    host_root: str = "/"
    runtime: str = "runc"
    state_dir: str = "/run/gpuhook"
    log_file: str | None = None
    log_level: str = "info"
    ldconfig: str = "/sbin/ldconfig"
    policy: Policy = field(default_factory=Policy)


def load() -> Config:
    """Read and validate the config named by GPUHOOK_CONFIG or the default path. Reads a file."""
    path, explicit = config_path()
    return from_table(read_table(path, explicit), path)


def from_table(table: dict[str, Any], path: str) -> Config:
    """Validate a parsed TOML table against the shipped schema; ConfigError names the key."""
    _validate(table, path)
    policy = Policy(**table.get("policy", {}))
    top = {k: v for k, v in table.items() if k != "policy"}
    return Config(path=path, policy=policy, **top)


def schema() -> dict[str, Any]:
    """The JSON schema of config.toml shipped in the package."""
    loaded: dict[str, Any] = json.loads(resources.files("gpuhook").joinpath("config.schema.json").read_text())
    return loaded


def _validate(table: dict[str, Any], path: str) -> None:
    import jsonschema

    sch = schema()
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(sch).iter_errors(table))
    if error is None:
        return
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - known)
        key = ".".join(p for p in (where, unknown[0]) if p)
        raise ConfigError(f"config {path}: unknown key {key!r}; known here: {', '.join(sorted(known))}")
    raise ConfigError(f"config {path}: key {where or '(top)'!r}: {error.message}")
