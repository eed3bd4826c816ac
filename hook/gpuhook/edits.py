"""Engine-neutral container edits, shaped like CDI's containerEdits."""

from __future__ import annotations

from gpuhook.inventory import DeviceNode
from gpuhook.record import record


@record
class Mount:
    """A read-only bind mount of a host file into the container."""

    host_path: str  # real path on the machine (host_root applied)
    container_path: str
    options: tuple[str, ...] = ("ro", "nosuid", "nodev", "bind")


@record
class DeviceRule:
    """A device cgroup allow rule."""

    kind: str
    major: int
    minor: int
    access: str = "rwm"


@record
class Hook:
    """An OCI hook for one stage."""

    stage: str  # "createContainer", "prestart", "poststop", ...
    path: str
    args: tuple[str, ...]
    env: tuple[str, ...] = ()


@record
class Edits:
    """What to add to a container: device nodes, cgroup rules, mounts, env, gids, linker cache, hooks."""

    device_nodes: tuple[DeviceNode, ...] = ()
    device_rules: tuple[DeviceRule, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: tuple[str, ...] = ()
    additional_gids: tuple[int, ...] = ()
    ldcache_dirs: tuple[str, ...] = ()  # container dirs whose libraries the linker cache must list
    hooks: tuple[Hook, ...] = ()

    def is_empty(self) -> bool:
        """Whether these edits change nothing."""
        return not (self.device_nodes or self.mounts or self.env or self.additional_gids or self.hooks)


def merge(parts: list[Edits]) -> Edits:
    """Concatenate edits in order, dropping repeats (first occurrence wins)."""
    nodes: dict[str, DeviceNode] = {}
    rules: dict[DeviceRule, None] = {}
    mounts: dict[str, Mount] = {}
    env: dict[str, str] = {}
    gids: dict[int, None] = {}
    dirs: dict[str, None] = {}
    hooks: dict[Hook, None] = {}
    for e in parts:
        for node in e.device_nodes:
            nodes.setdefault(node.path, node)
        rules.update(dict.fromkeys(e.device_rules))
        for m in e.mounts:
            mounts.setdefault(m.container_path, m)
        for kv in e.env:
            env.setdefault(kv.split("=", 1)[0], kv)
        gids.update(dict.fromkeys(e.additional_gids))
        dirs.update(dict.fromkeys(e.ldcache_dirs))
        hooks.update(dict.fromkeys(e.hooks))
    return Edits(
        device_nodes=tuple(nodes.values()),
        device_rules=tuple(rules),
        mounts=tuple(mounts.values()),
        env=tuple(env.values()),
        additional_gids=tuple(gids),
        ldcache_dirs=tuple(dirs),
        hooks=tuple(hooks),
    )
