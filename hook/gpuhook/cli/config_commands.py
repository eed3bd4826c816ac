"""`gpuhook config show|set|default`: the configuration as nvidia-ctk's `config` shows and sets it: the file in
effect with every default filled in, keys set by name and checked against the schema before the file is replaced
(atomically, comments kept), and the shipped default."""

from __future__ import annotations

import os
import sys

from gpuhook.config import from_table
from gpuhook.configfile import config_path
from gpuhook.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

DEFAULT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config.default.toml")


def default_text() -> str:
    """The shipped default config, with its comments. Reads a file."""
    with open(DEFAULT) as f:
        return f.read()


def show(args: argparse.Namespace) -> int:
    """`gpuhook config show`: the config in effect: its path, then the defaults with the file's keys over them."""
    import tomlkit

    path, explicit = config_path()
    doc = tomlkit.parse(default_text())
    table = _file_table(path, explicit)
    from_table(table, path)  # an invalid file is one line, exit 1, before anything is shown
    _overlay(doc, table)
    state = "" if os.path.exists(path) else " (absent: the defaults)"
    print(f"# gpuhook config in effect: {path}{state}")
    sys.stdout.write(tomlkit.dumps(doc))
    return 0


def set_keys(args: argparse.Namespace) -> int:
    """`gpuhook config set KEY=VALUE...`: each dotted key set to the TOML value (a bare word is a string), the
    whole checked against the schema, then the file replaced atomically. Writes the config file."""
    import tomlkit
    import tomlkit.exceptions

    from gpuhook.atomic import write_text
    from gpuhook.fastjson import MAX_DEPTH, check_depth

    path = args.config or config_path()[0]
    text = _read(path) if os.path.lexists(path) else default_text()
    try:
        doc = tomlkit.parse(text)
        for item in args.pairs:
            _set(doc, item)
        table = doc.unwrap()
        check_depth(table, MAX_DEPTH, f"config {path}")
    except (tomlkit.exceptions.TOMLKitError, ValueError, RecursionError) as e:
        raise ConfigError(f"config {path}: {_one_line(e)}: fix the file or the KEY=VALUE, nothing was written") \
            from e
    from_table(table, path)  # the schema's one line (unknown key, wrong type) before the file changes
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_text(path, tomlkit.dumps(doc), mode=0o644)
    for item in args.pairs:
        print(f"set {item.partition('=')[0].strip()} in {path}")
    return 0


def _set(doc: Any, item: str) -> None:
    """Set one KEY=VALUE in the tomlkit document; ConfigError when KEY is none or goes through a value."""
    import tomlkit

    key, eq, raw = item.partition("=")
    parts = [p.strip() for p in key.split(".")]
    if not eq or not all(parts):
        raise ConfigError(f"config set {item!r}: expected KEY=VALUE (e.g. policy.requests=allocated)")
    parent: Any = doc
    for i, part in enumerate(parts[:-1]):
        if part not in parent:
            parent[part] = tomlkit.table()
        parent = parent[part]
        if not isinstance(parent, dict):
            raise ConfigError(f"config set {item!r}: {'.'.join(parts[:i + 1])} is a value, not a table: set "
                              f"{'.'.join(parts[:i + 1])}=VALUE itself, or name a key of a table (gpuhook config "
                              "show lists them)")
    parent[parts[-1]] = _value(raw.strip())


def default(args: argparse.Namespace) -> int:
    """`gpuhook config default`: the shipped default config on stdout."""
    sys.stdout.write(default_text())
    return 0


def _value(raw: str) -> Any:
    """A TOML value (number, boolean, quoted string, array, inline table), else the text as a string."""
    import tomlkit

    try:
        return tomlkit.parse(f"v = {raw}")["v"]
    except Exception:  # tomlkit's parse errors have no common base but Exception: a bare word is a string
        return raw


def _read(path: str) -> str:
    from gpuhook.configfile import MAX_CONFIG, read_regular

    try:
        return read_regular(path, 0, MAX_CONFIG).decode("utf-8")  # a FIFO or a device is refused, not waited on
    except OSError as e:
        raise ConfigError(f"config {path} cannot be read: {e.strerror}: give a regular TOML file of at most "
                          f"{MAX_CONFIG} bytes") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path} is not UTF-8 text ({e.reason}): give a TOML file") from e


def _one_line(e: BaseException) -> str:
    if isinstance(e, RecursionError):
        return "nested too deep"
    return " ".join(str(e).split()) or type(e).__name__


def _file_table(path: str, explicit: bool) -> dict[str, Any]:
    """The file's table; {} for the default path when absent, ConfigError for a named file that is."""
    from gpuhook.configfile import read_config

    return read_config(path, explicit, cache_dir=None)[0]


def _overlay(doc: Any, table: dict[str, Any]) -> None:
    for key, value in table.items():
        if isinstance(value, dict) and key in doc and isinstance(doc[key], dict):
            _overlay(doc[key], value)
        else:
            doc[key] = value
