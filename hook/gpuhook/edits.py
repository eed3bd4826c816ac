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
class ProcOverlay:
    """A read-only copy of a procfs directory put over the container's own (runc allows no spec mounts in /proc)."""

    source: str  # a host directory holding <name>/ (e.g. nvidia/)
    target: str  # e.g. /proc/driver/nvidia


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
    masked_paths: tuple[str, ...] = ()  # hidden from the container (linux.maskedPaths)
    readonly_mounts: tuple[str, ...] = ()  # mount destinations that must stay read-only (e.g. /sys)
    proc_overlays: tuple[ProcOverlay, ...] = ()

    def is_empty(self) -> bool:
        """Whether these edits change nothing."""
        return not (self.device_nodes or self.mounts or self.env or self.additional_gids or self.hooks
                    or self.masked_paths or self.readonly_mounts or self.proc_overlays)


def merge(parts: list[Edits]) -> Edits:
    """Concatenate edits in order, dropping repeats (first occurrence wins)."""
    nodes: dict[str, DeviceNode] = {}
    rules: dict[DeviceRule, None] = {}
    mounts: dict[str, Mount] = {}
    env: dict[str, str] = {}
    gids: dict[int, None] = {}
    dirs: dict[str, None] = {}
    hooks: dict[Hook, None] = {}
    masked: dict[str, None] = {}
    readonly: dict[str, None] = {}
    overlays: dict[str, ProcOverlay] = {}
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
        masked.update(dict.fromkeys(e.masked_paths))
        readonly.update(dict.fromkeys(e.readonly_mounts))
        for o in e.proc_overlays:
            overlays.setdefault(o.target, o)
    return Edits(
        device_nodes=tuple(nodes.values()),
        device_rules=tuple(rules),
        mounts=tuple(mounts.values()),
        env=tuple(env.values()),
        additional_gids=tuple(gids),
        ldcache_dirs=tuple(dirs),
        hooks=tuple(hooks),
        masked_paths=tuple(masked),
        readonly_mounts=tuple(readonly),
        proc_overlays=tuple(overlays.values()),
    )
