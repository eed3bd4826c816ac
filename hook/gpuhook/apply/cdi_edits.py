"""Edits into a CDI containerEdits dict: one writer per kind of edit (edits.FIELDS), or the reason CDI cannot
carry it."""

from __future__ import annotations

from gpuhook.apply.linker_cache import python_args
from gpuhook.edits import FIELDS, DeviceNode, DeviceRule, Edits, Hook, Mount
from gpuhook.errors import CdiError
from gpuhook.frozen import frozen

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


@frozen
class CdiContext:
    """What writing edits into a CDI spec needs beyond the edits."""

    host_base: str  # host_root: device nodes' hostPath is under it
    gpuhook_bin: str  # the hook CDI's linker-cache refresh runs
    config_path: str
    hook_timeout: int = 30  # seconds, for the hooks the spec adds
    helper: str = ""  # the hooks' native front end (gpuhook-hook), where built: the warm helper serves its calls
    ldconfig: str = "/sbin/ldconfig"  # unused (CDI's hook writes the cache itself; kept for callers' signature)
    state_dir: str = "/run/gpuhook"  # unused alike



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
    out.setdefault("hooks", []).extend({"hookName": h.stage, **h.as_spec()} for h in hooks)


def _ldcache_to_cdi(out: dict[str, Any], dirs: tuple[str, ...], edits: Edits, ctx: CdiContext) -> None:
    """A CDI spec is static and nothing of gpuhook runs for a CDI engine's container but a hook: one createRuntime
    hook writes the container's linker cache (gpuhook hook update-ldcache: apply/container_ldcache.py, the root read
    from the OCI state's bundle), no ldconfig. createRuntime runs in the runtime's namespaces, so the native front
    end (gpuhook-hook, where built) hands it to the warm helper; the Python hook otherwise."""
    args = python_args(dirs, ((m.host_path, m.container_path) for m in edits.mounts))
    out.setdefault("hooks", []).append({"hookName": "createRuntime", "path": ctx.helper or ctx.gpuhook_bin,
                                        "args": args, "env": [f"GPUHOOK_CONFIG={ctx.config_path}"],
                                        "timeout": ctx.hook_timeout})


def _not_in_cdi(what: str) -> Callable[[dict[str, Any], tuple[Any, ...], Edits, CdiContext], None]:
    def refuse(out: dict[str, Any], values: tuple[Any, ...], _: Edits, __: CdiContext) -> None:
        raise CdiError(f"CDI has no field for {what} ({values[0]!r}): use gpuhook-runtime or the gpuhook hook")

    return refuse


WRITERS: dict[str, Callable[[dict[str, Any], Any, Edits, CdiContext], None]] = {
    "device_nodes": _nodes_to_cdi,
    "device_rules": _rules_to_cdi,
    "mounts": _mounts_to_cdi,
    "env": _env_to_cdi,
    "additional_gids": _gids_to_cdi,
    "hooks": _hooks_to_cdi,
    "masked_paths": _not_in_cdi("masked paths"),
    "readonly_mounts": _not_in_cdi("read-only remounts"),
    "proc_overlays": _not_in_cdi("procfs copies"),
    "ldcache_dirs": _ldcache_to_cdi,
}


def to_cdi(edits: Edits, ctx: CdiContext) -> dict[str, Any]:
    """`edits` as a CDI containerEdits dict; CdiError for an edit CDI cannot carry."""
    out: dict[str, Any] = {}
    for f in FIELDS:
        values = getattr(edits, f.name)
        if values:
            WRITERS[f.name](out, values, edits, ctx)
    return out
