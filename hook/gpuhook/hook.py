"""`gpuhook hook [prestart|createRuntime|poststop]`: the OCI hook. Reads the container state on stdin.

prestart/createRuntime compute the same edits as the shim and apply what the spec does not already carry,
live, inside the container; poststop releases what hook mode holds (nothing yet: tuning and leases come
later) and never fails the container's removal.
"""

from __future__ import annotations

import json
import os
import sys

from gpuhook import logs, records
from gpuhook.config import load
from gpuhook.errors import GpuhookError, SpecError

STAGES = ("prestart", "createRuntime", "poststop")


def main(stage: str | None) -> int:
    """Run one hook stage (detected from the state's status when not given); 0 on success."""
    try:
        state = json.load(sys.stdin)
    except ValueError as e:
        print(f"gpuhook hook: the OCI state on stdin is not JSON ({e})", file=sys.stderr)
        return 1
    stage = stage or ("poststop" if state.get("status") == "stopped" else "prestart")
    if stage == "poststop":
        return _poststop(state)
    try:
        _prestart(state)
    except GpuhookError as e:
        print(f"gpuhook hook: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"gpuhook hook: {e}", file=sys.stderr)
        return 1
    return 0


def _prestart(state: dict[str, object]) -> None:
    from gpuhook import inject, live
    from gpuhook.spec import load_spec, rootfs

    bundle = str(state.get("bundle") or "")
    pid = state.get("pid")
    if not bundle or not isinstance(pid, int):
        raise SpecError("the OCI state on stdin lacks the bundle or the container's pid")
    path = os.path.join(bundle, "config.json")
    try:
        with open(path, "rb") as f:
            spec = load_spec(f.read(), path)
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from e
    config = load()
    log = logs.logger(config, str(state.get("id", "")), "hook")
    prepared = inject.prepare(spec, bundle, config, log)
    if prepared is None:
        return
    warnings = list(prepared.warnings)
    todo = live.remaining(prepared.edits, spec)
    if prepared.edits.env and not _env_present(spec, prepared.edits.env):
        warnings.append("a hook cannot change the container's environment (" + ", ".join(
            e.split("=", 1)[0] for e in prepared.edits.env) + "): ROCm is mounted at /opt/rocm, where it is "
                        "found by default; use gpuhook-runtime to have these set")
    for w in warnings:
        print(f"gpuhook hook: warning: {w}", file=sys.stderr)  # runc shows a hook's stderr only on failure
        log.warning("hook", detail=w)
    user = (spec.get("process") or {}).get("user") or {}
    gids = {int(user.get("gid", 0)), *(int(g) for g in user.get("additionalGids") or [])}
    live.apply(todo, pid, rootfs(spec, bundle), config.host_root, config.ldconfig, int(user.get("uid", 0)), gids)
    records.save(config.state_dir, records.ContainerRecord(str(state.get("id", "")), prepared.drivers, "", pid,
                                                           records.start_time(pid)))
    log.info("applied live", devices=[n.path for n in todo.device_nodes], mounts=len(todo.mounts),
             rules=len(todo.device_rules))


def _env_present(spec: dict[str, object], env: tuple[str, ...]) -> bool:
    process = spec.get("process")
    have = set(process.get("env") or []) if isinstance(process, dict) else set()
    return all(e in have for e in env)


def _poststop(state: dict[str, object]) -> int:
    """Never fails: a container's removal must not depend on gpuhook."""
    try:
        config = load()
        logs.logger(config, str(state.get("id", "")), "hook").info("poststop")
    except GpuhookError as e:
        print(f"gpuhook hook: poststop: {e} (ignored)", file=sys.stderr)
    return 0
