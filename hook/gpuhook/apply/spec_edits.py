"""Edits into a config.json dict: one writer per kind of edit (edits.FIELDS), what a spec already carries of
each (hook mode applies only the rest), and the createContainer hooks procfs copies and the linker cache need
(apply/create_hook.py's native helper where built, else the host's sh or gpuhook's own hook). The linker cache
is written by the shim before the spec (gpu_path/inject.py): its hook is only the fallback."""

from __future__ import annotations

from gpuhook.apply import create_hook, linker_cache
from gpuhook.edits import FIELDS, SHARED_MEMORY, DeviceNode, DeviceRule, Edits, Hook, Mount, ProcOverlay
from gpuhook.frozen import frozen
from gpuhook.proc import SAFE_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Spec = dict[str, Any]


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
    ldcache_written: bool = False  # the shim wrote the root's linker cache itself (apply/container_ldcache.py)


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
    shm = next((m for m in mounts if m.container_path == SHARED_MEMORY), None)
    if shm is not None:  # a sharing daemon's shared memory in place of the runtime's own /dev/shm
        have[:] = [m for m in have if m.get("destination") != SHARED_MEMORY or m.get("source") == shm.host_path]
    taken = {m.get("destination") for m in have}
    have.extend({"destination": m.container_path, "type": "bind", "source": m.host_path, "options": list(m.options)}
                for m in mounts if m.container_path not in taken)


def _mounts_in_spec(spec: Spec) -> set[object]:
    """Each mount's destination, and at /dev/shm its (destination, source) too (edits._mount_present)."""
    return {k for m in spec.get("mounts") or []
            for k in (m.get("destination"), (m.get("destination"), m.get("source")))}


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


def _add_hook(spec: Spec, stage: str, hook: dict[str, Any]) -> None:
    entries = _list(_object(spec, "hooks"), stage)
    if hook not in entries:
        entries.append(hook)


def _hooks_to_spec(spec: Spec, hooks: tuple[Hook, ...], _e: Edits, _: SpecContext) -> None:
    for h in hooks:
        _add_hook(spec, h.stage, h.as_spec())


def _stage(spec: Spec, stage: str) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = (spec.get("hooks") or {}).get(stage) or []
    return hooks


def _hooks_in_spec(spec: Spec) -> set[object]:
    return {Hook(stage=stage, path=h.get("path", ""), args=tuple(h.get("args") or ()), env=tuple(h.get("env") or ()),
                 timeout=h.get("timeout"))
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
    hooks = _stage(spec, "createContainer")
    return ({(h.get("args") or [""] * 7)[6] for h in hooks if _OVERLAY_NAME in (h.get("args") or [])}
            | {t for h in hooks for t in create_hook.proc_targets(h)})


def _ldcache_to_spec(spec: Spec, dirs: tuple[str, ...], edits: Edits, ctx: SpecContext) -> None:
    """The refresh hook, only where the shim could not write the cache itself (an image cache it ignored)."""
    if ctx.ldcache_written:
        return
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
    return {d for h in _stage(spec, "createContainer") for d in linker_cache.dirs_in(h) or ()}


Writer = tuple["Callable[[Spec, Any, Edits, SpecContext], None]", "Callable[[Spec], set[object]]"]
WRITERS: dict[str, Writer] = {  # field -> (write its values, what the spec carries of it)
    "device_nodes": (_nodes_to_spec, _nodes_in_spec),
    "device_rules": (_rules_to_spec, _rules_in_spec),
    "mounts": (_mounts_to_spec, _mounts_in_spec),
    "env": (_env_to_spec, _env_in_spec),
    "additional_gids": (_gids_to_spec, _gids_in_spec),
    "hooks": (_hooks_to_spec, _hooks_in_spec),
    "masked_paths": (_masked_to_spec, _masked_in_spec),
    "readonly_mounts": (_readonly_to_spec, _readonly_in_spec),
    "proc_overlays": (_overlays_to_spec, _overlays_in_spec),
    "ldcache_dirs": (_ldcache_to_spec, _ldcache_in_spec),
}


def apply(edits: Edits, spec: Spec, ctx: SpecContext) -> None:
    """Add every edit to the config.json dict `spec`, in place; what it already carries is not added twice."""
    for f in FIELDS:
        values = getattr(edits, f.name)
        if values:
            WRITERS[f.name][0](spec, values, edits, ctx)


def lacking(edits: Edits, spec: Spec) -> Edits:
    """The part of `edits` that `spec` does not carry yet (what gpuhook-runtime left for the hook)."""
    out: dict[str, Any] = {}
    for f in FIELDS:
        have = WRITERS[f.name][1](spec)
        out[f.name] = tuple(v for v in getattr(edits, f.name) if f.present_key(v) not in have)
    return Edits(**out)
