"""The one error hierarchy; only the CLI entry points turn these into exit codes and messages."""

from __future__ import annotations


def one_line(text: object) -> str:
    """`text` (an error, a message) as one line: every run of whitespace, newlines included, one space; what
    else a terminal would act on, escaped (shown). Pure."""
    return shown(" ".join(str(text).split()), backslash=False)


def shown(text: object, backslash: bool = True) -> str:
    """`text` as a terminal may print it: every character that is not printable (control characters, escape
    sequences' ESC, newlines, bidi and line separators) and the backslash written as a Python escape, so a name
    read from a spec or a record (a pod's, a process's) is one line that moves no cursor. The one escaping every
    printer of such names uses (`backslash` False: a message's own, which quotes values by repr, left as is). Pure."""
    value = str(text)
    if value.isprintable() and not (backslash and "\\" in value):
        return value
    return "".join(c if c.isprintable() and not (backslash and c == "\\") else _escaped(c) for c in value)


def _escaped(c: str) -> str:
    n = ord(c)
    return "\\\\" if c == "\\" else f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


class GpuhookError(Exception):
    """Base of every error gpuhook reports to a user."""


class ConfigError(GpuhookError):
    """The gpuhook configuration file is missing, unreadable or invalid."""


class RequestError(GpuhookError):
    """The container's annotations or env ask for something malformed."""


class DiscoveryError(GpuhookError):
    """The host (under host_root) lacks something the request needs."""


class PlanError(GpuhookError):
    """The request cannot be satisfied by what the host has."""


class PolicyError(GpuhookError):
    """The container may not start as asked: an image requirement the host cannot meet, or a policy."""


class SpecError(GpuhookError):
    """The OCI bundle or its config.json cannot be read or written."""


class RuntimeNotFoundError(GpuhookError):
    """The low-level runtime named in the config cannot be found."""


class SimulatorError(GpuhookError):
    """A fake GPU host could not be built."""


class EngineConfigError(GpuhookError):
    """A container engine's config file cannot be read or changed."""


class ProcessError(GpuhookError):
    """A helper program gpuhook ran failed."""


class CgroupError(GpuhookError):
    """The container's device cgroup cannot be extended."""


class UnsafePathError(GpuhookError):
    """A path in the container root is not what gpuhook may touch (a symlink where a file must be, ...)."""


class CdiError(GpuhookError):
    """A CDI spec cannot be made as asked."""


class TuningError(GpuhookError):
    """A backend could not read or change a GPU setting."""


class LedgerError(GpuhookError):
    """The ledger is unreadable or inconsistent; an admin must look before gpuhook changes anything."""


class StateError(GpuhookError):
    """state_dir cannot be trusted (not root's alone) or used (full, unwritable)."""


class KubernetesError(GpuhookError):
    """The Kubernetes API server cannot be reached or refused a call, or a claim cannot be prepared."""
