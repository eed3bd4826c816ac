"""config.json: read a bundle's spec, apply Edits to the raw dict, write it back atomically."""

from __future__ import annotations

import marshal
import os

from gpuhook import fastjson
from gpuhook.atomicfile import write_text
from gpuhook.edits import Edits, ProcOverlay
from gpuhook.errors import SpecError
from gpuhook.proc import SAFE_ENV

TYPE_CHECKING = False  # typing costs milliseconds to import: the GPU path sits in front of a container start
if TYPE_CHECKING:
    from typing import Any

    Spec = dict[str, Any]


def load_spec(data: bytes, path: str) -> Spec:
    """Parse config.json bytes; SpecError when they are not a JSON object."""
    try:
        spec = fastjson.loads(data)
    except ValueError as e:
        raise SpecError(f"{path} is not valid JSON ({e}); the bundle is broken, not the GPU request") from e
    if not isinstance(spec, dict):
        raise SpecError(f"{path} is not a JSON object")
    return spec


def rootfs(spec: Spec, bundle: str) -> str:
    """The absolute path of the container's root filesystem."""
    root = spec.get("root", {}).get("path", "rootfs")
    return os.path.normpath(os.path.join(os.path.abspath(bundle), root))


def apply_edits(spec: Spec, edits: Edits, root_path: str, ldconfig: str) -> Spec:
    """A copy of `spec` with the edits added (idempotent: what is already there is not added twice)."""
    out: Spec = marshal.loads(marshal.dumps(spec))  # a deep copy; JSON values are all marshal knows
    linux = out.setdefault("linux", {})
    devices = linux.setdefault("devices", [])
    have = {d.get("path") for d in devices}
    for n in edits.device_nodes:
        if n.path not in have:
            devices.append({"path": n.path, "type": n.kind, "major": n.major, "minor": n.minor,
                            "fileMode": n.mode, "uid": n.uid, "gid": n.gid})
    rules = linux.setdefault("resources", {}).setdefault("devices", [])
    for r in edits.device_rules:
        rule = {"allow": True, "type": r.kind, "major": r.major, "minor": r.minor, "access": r.access}
        if rule not in rules:
            rules.append(rule)
    mounts = out.setdefault("mounts", [])
    taken = {m.get("destination") for m in mounts}
    for m in edits.mounts:
        if m.container_path not in taken:
            mounts.append({"destination": m.container_path, "type": "bind", "source": m.host_path,
                           "options": list(m.options)})
    process = out.setdefault("process", {})
    env = process.setdefault("env", [])
    for kv in edits.env:
        key = kv.split("=", 1)[0] + "="
        env[:] = [e for e in env if not e.startswith(key)] + [kv]
    if edits.additional_gids:
        gids = process.setdefault("user", {}).setdefault("additionalGids", [])
        gids.extend(g for g in edits.additional_gids if g not in gids)
    stages = out.setdefault("hooks", {})
    for h in edits.hooks:
        _add_hook(stages, h.stage, {"path": h.path, "args": list(h.args), "env": list(h.env)})
    if edits.masked_paths:
        masked = linux.setdefault("maskedPaths", [])
        masked.extend(p for p in edits.masked_paths if p not in masked)
    for m in mounts:
        if m.get("destination") in edits.readonly_mounts and "ro" not in (m.get("options") or []):
            m["options"] = [o for o in m.get("options") or [] if o != "rw"] + ["ro"]
    for o in edits.proc_overlays:
        _add_hook(stages, "createContainer", overlay_hook(o, root_path))
    if edits.ldcache_dirs:
        env_list = [f"{k}={v}" for k, v in SAFE_ENV.items()]
        _add_hook(stages, "createContainer", {"path": ldconfig, "args": ["ldconfig", "-r", root_path,
                                                                          *edits.ldcache_dirs],
                                              "env": env_list})
    return out


# Runs the host's sh and mount in the container's mount namespace before pivot_root, where <rootfs>/proc is
# already the container's procfs (so no path in it belongs to the image). Where the kernel has no such
# directory (a simulated host), the copy goes over its parent, holding the directory inside.
_OVERLAY = ('if [ -d "$1$3" ]; then t="$1$3"; s="$2/${3##*/}"; else t="$1${3%/*}"; s="$2"; fi; '
            'exec mount --bind -o ro,nosuid,nodev,noexec "$s" "$t"')


def overlay_hook(o: ProcOverlay, root_path: str) -> dict[str, Any]:
    """The createContainer hook that puts a read-only procfs copy over the container's own."""
    return {"path": "/bin/sh", "args": ["sh", "-c", _OVERLAY, "gpuhook-procfs", root_path, o.source, o.target],
            "env": [f"{k}={v}" for k, v in SAFE_ENV.items()]}


def _add_hook(stages: dict[str, Any], stage: str, hook: dict[str, Any]) -> None:
    entries = stages.setdefault(stage, [])
    if hook not in entries:
        entries.append(hook)


def write_atomic(path: str, spec: Spec) -> None:
    """Replace `path` with `spec` as JSON, atomically, keeping the file mode. Writes a file."""
    write_text(path, fastjson.dumps(spec))
