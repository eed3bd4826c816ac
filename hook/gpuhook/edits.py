"""Engine-neutral container edits, shaped like CDI's containerEdits, and their algebra. Pure data: the code
that writes them lives with its consumer (apply/spec_edits.py into config.json, apply/cdi_edits.py into a CDI
spec), each a table keyed by `FIELDS`' names; tests/unit/test_edits.py fails for a field a consumer skips.

`FIELDS` is the one list of the kinds of edit: a new kind is one row here and one in each consumer's table.
"""

from __future__ import annotations

from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    Spec = dict[str, Any]


@frozen
class DeviceNode:
    """A device node as the host has it: path (host-absolute), type, numbers, permissions."""

    path: str
    kind: str  # "c" or "b"
    major: int
    minor: int
    mode: int  # permission bits only
    uid: int
    gid: int

    def needs_group(self) -> bool:
        """Whether a process needs the node's group (others lack read+write) to open it."""
        return (self.mode & 0o006) != 0o006


SHARED_MEMORY = "/dev/shm"  # a mount here is a sharing daemon's shared memory: it replaces the runtime's own


@frozen
class Mount:
    """A read-only bind mount of a host file into the container."""

    host_path: str  # real path on the machine (host_root applied)
    container_path: str
    options: tuple[str, ...] = ("ro", "nosuid", "nodev", "bind")


@frozen
class DeviceRule:
    """A device cgroup allow rule."""

    kind: str
    major: int
    minor: int
    access: str = "rwm"

    def as_spec(self) -> dict[str, Any]:
        """The rule as linux.resources.devices holds it."""
        return {"allow": True, "type": self.kind, "major": self.major, "minor": self.minor, "access": self.access}


@frozen
class Hook:
    """An OCI hook for one stage."""

    stage: str  # "createContainer", "prestart", "poststop", ...
    path: str
    args: tuple[str, ...]
    env: tuple[str, ...] = ()
    timeout: int | None = None  # seconds; the runtime kills the hook and fails the container after it

    def as_spec(self) -> dict[str, Any]:
        """The hook as config.json's hooks.<stage> lists it (and CDI's hooks, with its hookName)."""
        out: dict[str, Any] = {"path": self.path, "args": list(self.args), "env": list(self.env)}
        if self.timeout is not None:
            out["timeout"] = self.timeout
        return out


@frozen
class ProcOverlay:
    """A read-only copy of a procfs directory put over the container's own (runc allows no spec mounts in /proc)."""

    source: str  # a host directory holding <name>/ (e.g. nvidia/)
    target: str  # e.g. /proc/driver/nvidia


@frozen
class Edits:
    """What to add to a container: device nodes, cgroup rules, mounts, env, gids, hooks, hardening, linker cache."""

    device_nodes: tuple[DeviceNode, ...] = ()
    device_rules: tuple[DeviceRule, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: tuple[str, ...] = ()
    additional_gids: tuple[int, ...] = ()
    hooks: tuple[Hook, ...] = ()
    masked_paths: tuple[str, ...] = ()  # hidden from the container (linux.maskedPaths)
    readonly_mounts: tuple[str, ...] = ()  # mount destinations that must stay read-only (e.g. /sys)
    proc_overlays: tuple[ProcOverlay, ...] = ()
    ldcache_dirs: tuple[str, ...] = ()  # container dirs whose libraries the linker cache must list

    @staticmethod
    def for_nodes(nodes: Iterable[DeviceNode]) -> Edits:
        """The nodes, the cgroup rule each needs, and the groups a non-root user needs to open them."""
        ns = tuple(nodes)
        return Edits(device_nodes=ns, device_rules=tuple(DeviceRule(n.kind, n.major, n.minor) for n in ns),
                     additional_gids=tuple(dict.fromkeys(n.gid for n in ns if n.needs_group() and n.gid)))

    def is_empty(self) -> bool:
        """Whether these edits change nothing."""
        return not any(getattr(self, f.name) for f in FIELDS)



def merge(parts: Iterable[Edits]) -> Edits:
    """Concatenate edits in order, dropping repeats (the first of the same key wins)."""
    kept: dict[str, dict[object, Any]] = {f.name: {} for f in FIELDS}
    for e in parts:
        for f in FIELDS:
            seen = kept[f.name]
            for v in getattr(e, f.name):
                seen.setdefault(f.key(v), v)
    merged: dict[str, Any] = {name: tuple(values.values()) for name, values in kept.items()}
    return Edits(**merged)


# --- the table -------------------------------------------------------------------------------------------

class Field:
    """One kind of edit: its name (an attribute of Edits) and what makes two values the same edit."""

    __slots__ = ("key", "name", "present_key")

    def __init__(self, name: str, key: Callable[[Any], object],
                 present_key: Callable[[Any], object] | None = None) -> None:
        self.name, self.key = name, key
        self.present_key = present_key or key  # what a consumer finds already written of a value (env: the entry)


def _same(v: object) -> object:
    return v


def _env_key(kv: str) -> object:
    return kv.split("=", 1)[0]


def _mount_present(m: Mount) -> object:
    """A mount is written where its destination is taken, but at /dev/shm only where it is this very mount: the
    runtime's own /dev/shm is there in every spec, and a sharing daemon's replaces it."""
    return (m.container_path, m.host_path) if m.container_path == SHARED_MEMORY else m.container_path


FIELDS: tuple[Field, ...] = (
    Field("device_nodes", lambda n: n.path),
    Field("device_rules", _same),
    Field("mounts", lambda m: m.container_path, present_key=_mount_present),
    Field("env", _env_key, present_key=_same),
    Field("additional_gids", _same),
    Field("hooks", _same),
    Field("masked_paths", _same),
    Field("readonly_mounts", _same),
    Field("proc_overlays", lambda o: o.target),
    Field("ldcache_dirs", _same),
)
