"""Engine-neutral container edits, shaped like CDI's containerEdits, and their whole algebra.

`FIELDS` is the one table of the kinds of edit. Each row says, for its field: what makes two values the
same edit (merge keeps the first), how the values go into a config.json dict, which of them a config.json
already carries (hook mode applies only the rest), and how they go into a CDI containerEdits dict (or why
CDI cannot carry them). `merge`, `Edits.apply_to`, `Edits.lacking` and `Edits.to_cdi` are written once over
the table, so a new kind of edit is one new row; tests/unit/test_edits.py fails for a row a consumer skips.
"""

from __future__ import annotations

from gpuhook.errors import CdiError
from gpuhook.frozen import frozen
from gpuhook.proc import SAFE_ENV

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


@frozen
class ProcOverlay:
    """A read-only copy of a procfs directory put over the container's own (runc allows no spec mounts in /proc)."""

    source: str  # a host directory holding <name>/ (e.g. nvidia/)
    target: str  # e.g. /proc/driver/nvidia


@frozen
class SpecContext:
    """What writing edits into one container's config.json needs beyond the edits."""

    root_path: str  # the container's root filesystem (absolute)
    ldconfig: str  # the host's ldconfig
    hook_timeout: int = 30  # seconds, for the hooks the edits add
    state_dir: str = "/run/gpuhook"  # where the linker-cache refresh finds its mount point
    helper: str = ""  # the native createContainer hook (cli/native/createhook.c), when built
    gpuhook_bin: str = "/usr/local/bin/gpuhook"  # the hook, where the helper is not there
    config_path: str = "/etc/gpuhook/config.toml"


@frozen
class CdiContext:
    """What writing edits into a CDI spec needs beyond the edits."""

    host_base: str  # host_root: device nodes' hostPath is under it
    gpuhook_bin: str  # the hook CDI's linker-cache refresh runs
    config_path: str
    hook_timeout: int = 30  # seconds, for the hooks the spec adds


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

    def apply_to(self, spec: Spec, ctx: SpecContext) -> None:
        """Add every edit to the config.json dict `spec`, in place; what it already carries is not added twice."""
        for f in FIELDS:
            values = getattr(self, f.name)
            if values:
                f.to_spec(spec, values, self, ctx)

    def lacking(self, spec: Spec) -> Edits:
        """The part of these edits that `spec` does not carry yet (what gpuhook-runtime left for the hook)."""
        out: dict[str, Any] = {}
        for f in FIELDS:
            have = f.in_spec(spec)
            out[f.name] = tuple(v for v in getattr(self, f.name) if f.present_key(v) not in have)
        return Edits(**out)

    def to_cdi(self, ctx: CdiContext) -> dict[str, Any]:
        """These edits as a CDI containerEdits dict; CdiError for an edit CDI cannot carry."""
        out: dict[str, Any] = {}
        for f in FIELDS:
            values = getattr(self, f.name)
            if values:
                f.to_cdi(out, values, self, ctx)
        return out


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


# --- config.json -----------------------------------------------------------------------------------------

def _object(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """parent[key] as an object, made where it is absent or null (runc takes null for absent)."""
    if parent.get(key) is None:
        parent[key] = {}
    value: dict[str, Any] = parent[key]
    return value


def _list(parent: dict[str, Any], key: str) -> list[Any]:
    """parent[key] as a list, made where it is absent or null."""
    if parent.get(key) is None:
        parent[key] = []
    value: list[Any] = parent[key]
    return value


def _linux(spec: Spec) -> dict[str, Any]:
    return _object(spec, "linux")


def _nodes_to_spec(spec: Spec, nodes: tuple[DeviceNode, ...], _e: Edits, _: SpecContext) -> None:
    devices = _list(_linux(spec), "devices")
    have = {d.get("path") for d in devices}
    devices.extend({"path": n.path, "type": n.kind, "major": n.major, "minor": n.minor, "fileMode": n.mode,
                    "uid": n.uid, "gid": n.gid} for n in nodes if n.path not in have)


def _nodes_in_spec(spec: Spec) -> set[object]:
    return {d.get("path") for d in (spec.get("linux") or {}).get("devices") or []}


def _rules_to_spec(spec: Spec, rules: tuple[DeviceRule, ...], _e: Edits, _: SpecContext) -> None:
    have = _list(_object(_linux(spec), "resources"), "devices")
    for r in rules:
        if r.as_spec() not in have:
            have.append(r.as_spec())


def _rules_in_spec(spec: Spec) -> set[object]:
    rules = ((spec.get("linux") or {}).get("resources") or {}).get("devices") or []
    return {DeviceRule(str(r.get("type")), r["major"], r["minor"], str(r.get("access")))
            for r in rules if isinstance(r, dict) and r.get("allow") and _numbered(r)}


def _numbered(rule: dict[str, Any]) -> bool:
    """A rule for one device (wildcard rules, without numbers, are never what an edit adds)."""
    return isinstance(rule.get("major"), int) and isinstance(rule.get("minor"), int)


def _mounts_to_spec(spec: Spec, mounts: tuple[Mount, ...], _e: Edits, _: SpecContext) -> None:
    have = _list(spec, "mounts")
    taken = {m.get("destination") for m in have}
    have.extend({"destination": m.container_path, "type": "bind", "source": m.host_path, "options": list(m.options)}
                for m in mounts if m.container_path not in taken)


def _mounts_in_spec(spec: Spec) -> set[object]:
    return {m.get("destination") for m in spec.get("mounts") or []}


def _env_to_spec(spec: Spec, env: tuple[str, ...], _e: Edits, _: SpecContext) -> None:
    have = _list(_object(spec, "process"), "env")
    for kv in env:
        key = kv.split("=", 1)[0] + "="
        have[:] = [e for e in have if not (isinstance(e, str) and e.startswith(key))] + [kv]  # a null item stays


def _env_in_spec(spec: Spec) -> set[object]:
    return set((spec.get("process") or {}).get("env") or [])


def _gids_to_spec(spec: Spec, gids: tuple[int, ...], _e: Edits, _: SpecContext) -> None:
    have = _list(_object(_object(spec, "process"), "user"), "additionalGids")
    have.extend(g for g in gids if g not in have)


def _gids_in_spec(spec: Spec) -> set[object]:
    return set(((spec.get("process") or {}).get("user") or {}).get("additionalGids") or [])


def _hook_dict(h: Hook) -> dict[str, Any]:
    out: dict[str, Any] = {"path": h.path, "args": list(h.args), "env": list(h.env)}
    if h.timeout is not None:
        out["timeout"] = h.timeout
    return out


def _add_hook(spec: Spec, stage: str, hook: dict[str, Any]) -> None:
    entries = _list(_object(spec, "hooks"), stage)
    if hook not in entries:
        entries.append(hook)


def _hooks_to_spec(spec: Spec, hooks: tuple[Hook, ...], _e: Edits, _: SpecContext) -> None:
    for h in hooks:
        _add_hook(spec, h.stage, _hook_dict(h))


def _stage(spec: Spec, stage: str) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = (spec.get("hooks") or {}).get(stage) or []
    return hooks


def _hooks_in_spec(spec: Spec) -> set[object]:
    return {Hook(stage, h.get("path", ""), tuple(h.get("args") or ()), tuple(h.get("env") or ()), h.get("timeout"))
            for stage, entries in (spec.get("hooks") or {}).items() for h in entries or []}


def _masked_to_spec(spec: Spec, paths: tuple[str, ...], _e: Edits, _: SpecContext) -> None:
    masked = _list(_linux(spec), "maskedPaths")
    masked.extend(p for p in paths if p not in masked)


def _masked_in_spec(spec: Spec) -> set[object]:
    return set((spec.get("linux") or {}).get("maskedPaths") or [])


def _readonly_to_spec(spec: Spec, paths: tuple[str, ...], _e: Edits, _: SpecContext) -> None:
    for m in spec.get("mounts") or []:
        if m.get("destination") in paths and "ro" not in (m.get("options") or []):
            m["options"] = [o for o in m.get("options") or [] if o != "rw"] + ["ro"]


def _readonly_in_spec(spec: Spec) -> set[object]:
    return {m.get("destination") for m in spec.get("mounts") or [] if "ro" in (m.get("options") or [])}


# Without the native helper: the host's sh and mount in the container's mount namespace before pivot_root, where
# <rootfs>/proc is already the container's procfs (so no path in it belongs to the image). Where the kernel has no
# such directory (a simulated host), the copy goes over its parent, holding the directory inside.
_OVERLAY = ('if [ -d "$1$3" ]; then t="$1$3"; s="$2/${3##*/}"; else t="$1${3%/*}"; s="$2"; fi; '
            'exec mount --bind -o ro,nosuid,nodev,noexec "$s" "$t"')
_OVERLAY_NAME = "gpuhook-procfs"


def overlay_hook(o: ProcOverlay, root_path: str, timeout: int = 30) -> dict[str, Any]:
    """The shell createContainer hook that puts a read-only procfs copy over the container's own."""
    return {"path": "/bin/sh", "args": ["sh", "-c", _OVERLAY, _OVERLAY_NAME, root_path, o.source, o.target],
            "env": [f"{k}={v}" for k, v in SAFE_ENV.items()], "timeout": timeout}


def _overlays_to_spec(spec: Spec, overlays: tuple[ProcOverlay, ...], _e: Edits, ctx: SpecContext) -> None:
    from gpuhook.apply import create_hook

    have = _overlays_in_spec(spec)
    for o in overlays:
        if o.target in have:
            continue
        if ctx.helper:  # one native process for every copy and the cache (apply/create_hook.py)
            create_hook.add(_list(_object(spec, "hooks"), "createContainer"), ctx.helper, ctx.root_path,
                            create_hook.proc_part(o.source, o.target), ctx.hook_timeout)
        else:
            _add_hook(spec, "createContainer", overlay_hook(o, ctx.root_path, ctx.hook_timeout))


def _overlays_in_spec(spec: Spec) -> set[object]:
    from gpuhook.apply import create_hook

    hooks = _stage(spec, "createContainer")
    return ({(h.get("args") or [""] * 7)[6] for h in hooks if _OVERLAY_NAME in (h.get("args") or [])}
            | {t for h in hooks for t in create_hook.proc_targets(h)})


def _ldcache_to_spec(spec: Spec, dirs: tuple[str, ...], edits: Edits, ctx: SpecContext) -> None:
    from gpuhook.apply import create_hook, linker_cache

    have = _ldcache_in_spec(spec)
    dirs = tuple(d for d in dirs if d not in have)
    if not dirs:
        return
    if ctx.helper:
        part = linker_cache.helper_part(ctx.ldconfig, dirs, edits.mounts, ctx.state_dir)
        create_hook.add(_list(_object(spec, "hooks"), "createContainer"), ctx.helper, ctx.root_path, part,
                        ctx.hook_timeout)
    else:
        _add_hook(spec, "createContainer", linker_cache.python_hook(dirs, edits.mounts, ctx.gpuhook_bin,
                                                                    ctx.config_path, ctx.hook_timeout))


def _ldcache_in_spec(spec: Spec) -> set[object]:
    from gpuhook.apply import linker_cache

    return {d for h in _stage(spec, "createContainer") for d in linker_cache.dirs_in(h) or ()}


# --- CDI -------------------------------------------------------------------------------------------------

def _cdi_node(n: DeviceNode, host_base: str) -> dict[str, Any]:
    host = n.path if host_base == "/" else host_base.rstrip("/") + n.path
    return {"path": n.path, "hostPath": host, "type": n.kind, "major": n.major, "minor": n.minor,
            "fileMode": n.mode, "uid": n.uid, "gid": n.gid}


def _nodes_to_cdi(out: dict[str, Any], nodes: tuple[DeviceNode, ...], _: Edits, ctx: CdiContext) -> None:
    out["deviceNodes"] = [_cdi_node(n, ctx.host_base) for n in nodes]


def _rules_to_cdi(out: dict[str, Any], rules: tuple[DeviceRule, ...], edits: Edits, _: CdiContext) -> None:
    """CDI consumers derive the cgroup rules from deviceNodes: a rule without its node cannot be carried."""
    derived = set(Edits.for_nodes(edits.device_nodes).device_rules)
    extra = [r for r in rules if r not in derived]
    if extra:
        raise CdiError(f"a CDI spec carries cgroup rules only for its device nodes; no node for {extra[0]}")


def _mounts_to_cdi(out: dict[str, Any], mounts: tuple[Mount, ...], _: Edits, __: CdiContext) -> None:
    out["mounts"] = [{"hostPath": m.host_path, "containerPath": m.container_path, "options": list(m.options)}
                     for m in mounts]


def _env_to_cdi(out: dict[str, Any], env: tuple[str, ...], _: Edits, __: CdiContext) -> None:
    out["env"] = [*out.get("env", []), *env]


def _gids_to_cdi(out: dict[str, Any], gids: tuple[int, ...], _: Edits, __: CdiContext) -> None:
    out["additionalGids"] = list(gids)


def _hooks_to_cdi(out: dict[str, Any], hooks: tuple[Hook, ...], _: Edits, __: CdiContext) -> None:
    out.setdefault("hooks", []).extend({"hookName": h.stage, **_hook_dict(h)} for h in hooks)


def _ldcache_to_cdi(out: dict[str, Any], dirs: tuple[str, ...], edits: Edits, ctx: CdiContext) -> None:
    """A CDI spec cannot know the container's root: gpuhook's own hook refreshes the cache from the state."""
    from gpuhook.apply.linker_cache import python_args

    args = python_args(dirs, ((m.host_path, m.container_path) for m in edits.mounts))
    out.setdefault("hooks", []).append({"hookName": "createContainer", "path": ctx.gpuhook_bin, "args": args,
                                        "env": [f"GPUHOOK_CONFIG={ctx.config_path}"], "timeout": ctx.hook_timeout})


def _not_in_cdi(what: str) -> Callable[[dict[str, Any], tuple[Any, ...], Edits, CdiContext], None]:
    def refuse(out: dict[str, Any], values: tuple[Any, ...], _: Edits, __: CdiContext) -> None:
        raise CdiError(f"CDI has no field for {what} ({values[0]!r}): use gpuhook-runtime or the gpuhook hook")

    return refuse


# --- the table -------------------------------------------------------------------------------------------

class Field:
    """One kind of edit and what every consumer does with it."""

    __slots__ = ("in_spec", "key", "name", "present_key", "to_cdi", "to_spec")

    def __init__(self, name: str, key: Callable[[Any], object],
                 to_spec: Callable[[Spec, Any, Edits, SpecContext], None], in_spec: Callable[[Spec], set[object]],
                 to_cdi: Callable[[dict[str, Any], Any, Edits, CdiContext], None],
                 present_key: Callable[[Any], object] | None = None) -> None:
        self.name, self.key, self.to_spec, self.in_spec, self.to_cdi = name, key, to_spec, in_spec, to_cdi
        self.present_key = present_key or key  # what in_spec's set holds for a value (env: the whole entry)


def _same(v: object) -> object:
    return v


def _env_key(kv: str) -> object:
    return kv.split("=", 1)[0]


FIELDS: tuple[Field, ...] = (
    Field("device_nodes", lambda n: n.path, _nodes_to_spec, _nodes_in_spec, _nodes_to_cdi),
    Field("device_rules", _same, _rules_to_spec, _rules_in_spec, _rules_to_cdi),
    Field("mounts", lambda m: m.container_path, _mounts_to_spec, _mounts_in_spec, _mounts_to_cdi),
    Field("env", _env_key, _env_to_spec, _env_in_spec, _env_to_cdi, present_key=_same),
    Field("additional_gids", _same, _gids_to_spec, _gids_in_spec, _gids_to_cdi),
    Field("hooks", _same, _hooks_to_spec, _hooks_in_spec, _hooks_to_cdi),
    Field("masked_paths", _same, _masked_to_spec, _masked_in_spec, _not_in_cdi("masked paths")),
    Field("readonly_mounts", _same, _readonly_to_spec, _readonly_in_spec, _not_in_cdi("read-only remounts")),
    Field("proc_overlays", lambda o: o.target, _overlays_to_spec, _overlays_in_spec, _not_in_cdi("procfs copies")),
    Field("ldcache_dirs", _same, _ldcache_to_spec, _ldcache_in_spec, _ldcache_to_cdi),
)
