"""What the CDI commands and doctor read: spec files as the engines find them, and the installed CDI consumers.

Engines read every *.json and *.yaml in /etc/cdi and /var/run/cdi (the later directory wins a conflict); a name
defined twice at the same priority is dropped by them (their "conflicting device"). YAML needs PyYAML (python3-yaml),
loaded only for YAML files.
"""

from __future__ import annotations

import glob
import os

from gpuhook.apply.cdi_readers import Reader, version_in
from gpuhook.engines.engine import cdi_since
from gpuhook.engines.table import cdi_consumers, reader
from gpuhook.errors import CdiError, ProcessError, one_line
from gpuhook.proc import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")  # the engines' defaults, lowest priority first
_SEARCH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_MAX_SPEC = 16 << 20


def spec_files(dirs: tuple[str, ...] | list[str] | None = None) -> list[str]:
    """The spec files an engine reads in `dirs` (default SPEC_DIRS), in its order."""
    return [p for d in dirs or SPEC_DIRS
            for p in sorted(glob.glob(os.path.join(d, "*.json")) + glob.glob(os.path.join(d, "*.yaml")))]


def read_spec(path: str) -> Any:
    """A spec file's data (JSON, or YAML by its .yaml name); CdiError saying why it cannot be read. Reads it."""
    from gpuhook.configfile import read_regular
    from gpuhook.fastjson import check_depth, loads

    try:
        data = read_regular(path, 0, _MAX_SPEC)  # a FIFO or a device in a CDI directory is refused, not waited on
    except OSError as e:
        raise CdiError(f"{path}: {e.strerror}: a CDI spec is a regular file of at most {_MAX_SPEC} bytes") from e
    if path.endswith(".yaml"):
        try:
            import yaml
        except ImportError as e:
            raise CdiError(f"{path}: reading a YAML spec needs PyYAML (apt install python3-yaml); JSON specs do "
                           "not") from e
        try:
            value = yaml.safe_load(data)
            check_depth(value, what="the YAML")
            return value
        except RecursionError as e:
            raise CdiError(f"{path}: not a CDI spec (nested too deep)") from e
        except (yaml.YAMLError, ValueError) as e:
            raise CdiError(f"{path}: not valid YAML ({one_line(e)})") from e
    try:
        return loads(data)
    except ValueError as e:
        raise CdiError(f"{path}: not valid JSON ({e})") from e


def installed_readers(given: list[str] | None = None) -> tuple[Reader, ...]:
    """The CDI consumers: `given` as ENGINE=VERSION (or "none"), else each known engine found on the usual PATH
    with the release its `--version` names. Runs those commands (10 s each)."""
    if given:
        out = []
        for item in given:
            if item == "none":
                continue
            engine, eq, version = item.partition("=")
            if not eq or version_in(version) is None:
                raise CdiError(f"--engine {item!r}: expected ENGINE=VERSION, e.g. {_example()} (engines: "
                               f"{', '.join(e.name for e in cdi_consumers())}; or none)")
            try:
                out.append(reader(engine, version_in(version) or ""))
            except ValueError as e:
                raise CdiError(str(e)) from e
        return tuple(out)
    found = []
    for consumer in cdi_consumers():
        program = next((p for d in _SEARCH if os.access(p := os.path.join(d, consumer.program), os.X_OK)), None)
        if program is None:
            continue
        try:
            named = version_in(run([program, "--version"], timeout=10))
        except ProcessError:
            continue
        if named:
            found.append(consumer.reader(named))
    return tuple(found)


def _example() -> str:
    """An ENGINE=VERSION: the first CDI consumer at its first release that reads CDI specs (docker=25.0.0)."""
    return next((f"{e.name}={e.cdi.releases[0][0]}" for e in cdi_consumers() if e.cdi is not None), "ENGINE=1.2.3")


def describe(readers: tuple[Reader, ...]) -> str:
    """One line: which installed engines read CDI specs, and up to which cdiVersion."""
    if not readers:
        return "no CDI consumer found (" + ", ".join(f"{e.label} >= {cdi_since(e)}" for e in cdi_consumers()) + ")"
    parts = [f"{r.label} reads cdiVersion up to {r.highest} (container-device-interface {r.library})" if r.library
             else f"{r.label} reads no CDI specs" for r in readers]
    return "CDI consumers: " + "; ".join(parts)
